"""The broker's /config/changes listener (docs/controller-behaviour.md §8.13) on the in-memory store."""

from __future__ import annotations

import threading
from collections.abc import Callable

from kafka_controller.broker.config_changes import ConfigChangeListener, TopicConfigChangeListener
from kafka_controller.dryrun.memory_store import InMemoryMetadataStore
from kafka_controller.testing.zk_harness import wait_for


def _listener(store: InMemoryMetadataStore) -> tuple[TopicConfigChangeListener, list[str]]:
    enabled: list[str] = []
    lock = threading.Lock()

    def submit(task: object) -> None:
        with lock:  # the broker runs tasks on one thread; keep that here
            task()  # type: ignore[operator]

    listener = TopicConfigChangeListener(store, submit, enabled.append)
    listener.start()
    return listener, enabled


def test_enabling_unclean_election_in_a_topic_config_notifies_the_controller() -> None:
    store = InMemoryMetadataStore()
    listener, enabled = _listener(store)
    store.change_topic_config("t", {"retention.ms": "1000"})
    store.change_topic_config("t", {"unclean.leader.election.enable": "TRUE"})
    wait_for(lambda: enabled == ["t"], timeout=10.0, message="the listener to report topic t")
    listener.process()  # nothing new: nothing reported twice
    assert enabled == ["t"]


def test_notifications_present_at_start_are_taken_as_seen() -> None:
    store = InMemoryMetadataStore()
    store.change_topic_config("old", {"unclean.leader.election.enable": "true"})
    listener, enabled = _listener(store)
    listener.process()
    assert enabled == []
    store.change_topic_config("new", {"unclean.leader.election.enable": "false"})
    listener.process()
    assert enabled == []


# -- dynamic broker configs -------------------------------------------------------------------------
Levels = tuple[dict[str, str] | None, dict[str, str] | None]


class CountingStore(InMemoryMetadataStore):
    """Counts the batched entity-config reads the listener makes."""

    entity_reads: list[list[tuple[str, str]]]

    def get_entity_configs(self, entities):  # type: ignore[no-untyped-def]
        self.entity_reads.append(list(entities))
        return super().get_entity_configs(entities)


def _broker_listener(
    store: InMemoryMetadataStore, submit: Callable[[Callable[[], None]], None] = lambda task: task()
) -> tuple[ConfigChangeListener, list[str], list[Levels]]:
    enabled: list[str] = []
    handed: list[Levels] = []
    listener = ConfigChangeListener(
        store,
        submit,
        enabled.append,
        broker_id=2,
        on_broker_config=lambda default, own: handed.append((default, own)),  # type: ignore[arg-type]
    )
    listener.start()
    return listener, enabled, handed


def _alter(store: InMemoryMetadataStore, entity: str, config: dict[str, str]) -> None:
    """What ``kafka-configs.sh --alter`` (and the Airflow hook's pause) writes."""
    store.set_or_create_entity_config("brokers", entity, config)
    store.create_config_change_notification(f"brokers/{entity}")


def test_start_reads_both_broker_levels_once() -> None:
    store = InMemoryMetadataStore()
    store.set_or_create_entity_config("brokers", "<default>", {"auto.leader.rebalance.enable": "false"})
    _, _, handed = _broker_listener(store)
    assert handed == [({"auto.leader.rebalance.enable": "false"}, {})]


def test_default_and_own_broker_changes_are_handed_over_in_one_read() -> None:
    store = CountingStore()
    store.entity_reads = []
    tasks: list[Callable[[], None]] = []  # the broker's task thread, run by hand
    _, enabled, handed = _broker_listener(store, tasks.append)
    tasks.pop()()  # start's read of both levels
    handed.clear()
    store.entity_reads.clear()
    store.change_topic_config("t", {"unclean.leader.election.enable": "true"})
    _alter(store, "<default>", {"auto.leader.rebalance.enable": "false"})
    _alter(store, "2", {"auto.leader.rebalance.enable": "true"})
    _alter(store, "3", {"auto.leader.rebalance.enable": "false"})  # another broker's: not ours
    wait_for(lambda: len(tasks) == 1, timeout=10.0, message="the watch to hand work over")
    tasks.pop()()  # the one-shot watch fired once: one run sees all four notifications
    assert enabled == ["t"]
    assert handed == [({"auto.leader.rebalance.enable": "false"}, {"auto.leader.rebalance.enable": "true"})]
    # one batched read of every entity named (plus nothing for broker 3)
    assert store.entity_reads == [[("topics", "t"), ("brokers", "<default>"), ("brokers", "2")]]


def test_another_brokers_change_is_ignored() -> None:
    store = InMemoryMetadataStore()
    listener, _, handed = _broker_listener(store)
    handed.clear()
    _alter(store, "3", {"auto.leader.rebalance.enable": "false"})
    listener.process()
    assert handed == []


def test_an_unreadable_level_is_handed_over_as_none() -> None:
    store = InMemoryMetadataStore()
    _, _, handed = _broker_listener(store)
    handed.clear()
    store.set_or_create_entity_config("brokers", "2", {"auto.leader.rebalance.enable": "true"})
    store.session.create("/config/brokers/<default>", b"{not json")  # corrupt, behind its back
    store.create_config_change_notification("brokers/<default>")
    wait_for(lambda: len(handed) == 1, timeout=10.0, message="the listener to hand the levels over")
    assert handed == [(None, {"auto.leader.rebalance.enable": "true"})]
