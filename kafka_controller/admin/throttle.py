"""Replication throttles for a reassignment, as Kafka 2.8's ``kafka-reassign-partitions.sh
--throttle`` writes them, and their removal once the reassignment is done (``--verify``).

* Brokers: ``leader.replication.throttled.rate`` and ``follower.replication.throttled.rate`` (bytes/s)
  in ``/config/brokers/<id>`` of every broker a moving partition has or gets a replica on.
* Topics: ``leader.replication.throttled.replicas`` (``partition:broker`` of every current replica of
  a moving partition: any of them may lead) and ``follower.replication.throttled.replicas`` (the
  replicas being added) in ``/config/topics/<t>``.

Each write is a read-modify-write of the entity's config (other keys kept) followed by a
``/config/changes`` notification, as ``kafka-configs.sh --zookeeper`` does. Removal (Kafka's
``clearAllThrottles``) takes the rates off every registered broker, since a broker throttled by an
earlier reassignment cannot be told apart, and the replica lists off the plan's topics.

Removal is for a plan that ran: the replica lists its ``--execute --throttle`` wrote on its topics
name its partitions (``ran_throttled``), and that is the only trace a plan leaves once it is done
(the moves themselves leave none). A plan that never ran, or ran without ``--throttle``, leaves
every throttle as it is: clearing them would undo another reassignment's throttles (Kafka's tool
clears them for any plan with nothing in progress, even one never started).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Protocol

from kafka_controller.domain.errors import InvalidArgumentError
from kafka_controller.domain.values import TopicPartition

LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
BROKER_THROTTLE_KEYS = (LEADER_RATE, FOLLOWER_RATE)
TOPIC_THROTTLE_KEYS = (LEADER_REPLICAS, FOLLOWER_REPLICAS)
BROKERS, TOPICS = "brokers", "topics"


class ConfigWriter(Protocol):
    """The store calls this module makes (a subset of ``ZkMetadataStore``)."""

    def get_entity_config(self, entity_type: str, name: str) -> dict[str, str]: ...
    def set_or_create_entity_config(self, entity_type: str, name: str, config: Mapping[str, str]) -> None: ...
    def create_config_change_notification(self, entity_path: str) -> str: ...


def throttle_configs(
    plan: Mapping[TopicPartition, Sequence[int]],
    current: Mapping[TopicPartition, Sequence[int]],
    rate_bytes_per_s: int,
) -> tuple[dict[int, dict[str, str]], dict[str, dict[str, str]]]:
    """``(broker configs, topic configs)`` for a throttled reassignment, as Kafka's tool sets them:
    leaders throttled on the current replicas, followers on the ones being added."""
    if rate_bytes_per_s < 1:
        raise InvalidArgumentError(f"throttle must be a positive number of bytes/s, got {rate_bytes_per_s}")
    rate = str(int(rate_bytes_per_s))
    brokers: dict[int, dict[str, str]] = {}
    leaders: dict[str, list[str]] = {}
    followers: dict[str, list[str]] = {}
    for tp, target in sorted(plan.items()):
        existing = tuple(current.get(tp, ()))
        adding = tuple(r for r in target if r not in existing)
        if not adding:
            continue
        for b in (*existing, *adding):
            brokers[b] = {LEADER_RATE: rate, FOLLOWER_RATE: rate}
        leaders.setdefault(tp.topic, []).extend(f"{tp.partition}:{b}" for b in existing)
        followers.setdefault(tp.topic, []).extend(f"{tp.partition}:{b}" for b in adding)
    topics = {
        t: {LEADER_REPLICAS: ",".join(leaders[t]), FOLLOWER_REPLICAS: ",".join(followers.get(t, []))}
        for t in leaders
    }
    return brokers, topics


def merge_entity_config(
    store: ConfigWriter, entity_type: str, name: str, changes: Mapping[str, str | None]
) -> dict[str, str]:
    """Set (or with None, remove) keys of ``/config/<type>/<name>`` and notify when anything
    changed; returns the previous values of the keys touched."""
    current = store.get_entity_config(entity_type, name)
    previous = {k: current[k] for k in changes if k in current}
    updated = {k: v for k, v in current.items() if k not in changes}
    updated.update({k: v for k, v in changes.items() if v is not None})
    if updated != current:
        store.set_or_create_entity_config(entity_type, name, updated)
        store.create_config_change_notification(f"{entity_type}/{name}")
    return previous


def set_throttles(
    store: ConfigWriter, brokers: Mapping[int, Mapping[str, str]], topics: Mapping[str, Mapping[str, str]]
) -> None:
    for b, config in sorted(brokers.items()):
        merge_entity_config(store, BROKERS, str(b), dict(config))
    for t, config in sorted(topics.items()):
        merge_entity_config(store, TOPICS, t, dict(config))


def ran_throttled(store: ConfigWriter, plan: Collection[TopicPartition]) -> bool:
    """Whether the throttled-replica lists of the plan's topics name one of its partitions, as
    ``--execute --throttle`` of this plan wrote them (``*``, an operator's "every replica", names
    none)."""
    wanted: dict[str, set[int]] = {}
    for tp in plan:
        wanted.setdefault(tp.topic, set()).add(tp.partition)
    for topic, partitions in sorted(wanted.items()):
        config = store.get_entity_config(TOPICS, topic)
        for key in TOPIC_THROTTLE_KEYS:
            for entry in config.get(key, "").split(","):
                partition, sep, _broker = entry.strip().partition(":")
                if sep and partition.isascii() and partition.isdigit() and int(partition) in partitions:
                    return True
    return False


def clear_throttles(store: ConfigWriter, brokers: Collection[int], topics: Collection[str]) -> None:
    for b in sorted(brokers):
        merge_entity_config(store, BROKERS, str(b), dict.fromkeys(BROKER_THROTTLE_KEYS))
    for t in sorted(topics):
        merge_entity_config(store, TOPICS, t, dict.fromkeys(TOPIC_THROTTLE_KEYS))
