"""Dynamic broker configs: which ``/config/brokers`` keys the controller follows, and the pure merge.

Kafka 2.8 keeps dynamic broker configs in ZooKeeper at two levels, ``/config/brokers/<default>``
(cluster default) and ``/config/brokers/<id>`` (one broker), and a broker's effective value of a
key is the first of: per-broker dynamic, cluster-default dynamic, static (``server.properties``,
here ``--config``), Kafka's default (``DynamicBrokerConfig``). Only keys Kafka lists as dynamic
are taken from ZooKeeper; a non-dynamic key found there is ignored with an error log.

Of the keys the controller reads, Kafka 2.8 makes exactly one dynamic:
``unclean.leader.election.enable`` (through ``DynamicLogConfig``, a log config synonym, "cluster-wide"
mode, so also settable per broker). When its effective value turns true, Kafka calls
``KafkaController.enableDefaultUncleanLeaderElection()``; elections then merge topic configs over
the broker's updated ``config.originals()``.

**Deviation:** ``auto.leader.rebalance.enable`` is read-only in Kafka 2.8 (a dynamic value is
ignored there, and ``kafka-configs.sh`` refuses to set it). This controller honours it dynamically
anyway, at both levels and with the same precedence, because the Airflow rolling restart pauses the
auto rebalance by setting it to false on the cluster default
(``KafkaClusterHook.pause_auto_rebalance``). While the effective value is false the auto-rebalance
task moves no leader; a controller elected meanwhile reads it at failover and stays paused.

Everything here is a pure function of plain values; the runtime side is ``broker_configs``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from kafka_controller.controller.config import KNOWN_KEYS, KafkaConfig
from kafka_controller.domain.config_keys import AUTO_LEADER_REBALANCE_ENABLE, UNCLEAN_LEADER_ELECTION_ENABLE
from kafka_controller.domain.errors import InvalidArgumentError

#: ``/config/<type>/<name>`` of the dynamic broker configs (docs/external-contract.md §1; Kafka's
#: ``ConfigType.Broker`` and ``ConfigEntityName.Default``).
BROKER_CONFIG_TYPE = "brokers"
DEFAULT_BROKER_ENTITY = "<default>"

#: Controller keys Kafka 2.8 updates dynamically (``DynamicLogConfig.ReconfigurableConfigs``).
KAFKA_DYNAMIC_KEYS: frozenset[str] = frozenset({UNCLEAN_LEADER_ELECTION_ENABLE})
#: Read-only in Kafka 2.8, dynamic here (see the module docstring).
DEVIATION_DYNAMIC_KEYS: frozenset[str] = frozenset({AUTO_LEADER_REBALANCE_ENABLE})
DYNAMIC_KEYS: frozenset[str] = KAFKA_DYNAMIC_KEYS | DEVIATION_DYNAMIC_KEYS

CLUSTER_DEFAULT = "cluster default"
PER_BROKER = "per-broker"
STATIC = "static"
KAFKA_DEFAULT = "default"


@dataclass(frozen=True)
class EffectiveBrokerConfig:
    """The merged config, where each dynamic key's value came from, and what was left out.

    ``ignored`` maps ``"<key> (<level>)"`` to the reason; keys this controller does not know at
    all (quotas, throttles, listener settings) are other components' business and not listed.
    """

    config: KafkaConfig
    sources: dict[str, str] = field(default_factory=dict)
    ignored: dict[str, str] = field(default_factory=dict)

    def describe(self) -> str:
        """``auto.leader.rebalance.enable=false (cluster default), ...``, for logs and the audit."""
        c = self.config
        values = {
            AUTO_LEADER_REBALANCE_ENABLE: c.auto_leader_rebalance_enable,
            UNCLEAN_LEADER_ELECTION_ENABLE: c.unclean_leader_election_enable,
        }
        return ", ".join(
            f"{key}={str(values[key]).lower()} ({self.sources.get(key, KAFKA_DEFAULT)})"
            for key in sorted(DYNAMIC_KEYS)
        )


def effective_broker_config(
    static: KafkaConfig, cluster_default: Mapping[str, str], per_broker: Mapping[str, str]
) -> EffectiveBrokerConfig:
    """``static`` with the dynamic keys of both levels applied, per-broker over cluster default.

    A value that does not parse is ignored on its own (the next level down then applies); Kafka
    rejects the whole level's update instead, keeping its previous values."""
    overrides: dict[str, str] = {}
    ignored: dict[str, str] = {}
    sources = {k: STATIC for k in DYNAMIC_KEYS if k in static.originals()}
    for level, configs in ((CLUSTER_DEFAULT, cluster_default), (PER_BROKER, per_broker)):
        for key, value in sorted(configs.items()):
            if key not in DYNAMIC_KEYS:
                if key in KNOWN_KEYS:
                    ignored[f"{key} ({level})"] = "not dynamically updatable in Kafka 2.8"
                continue
            try:
                KafkaConfig.of(static.broker_id, {key: value})
            except InvalidArgumentError as e:
                ignored[f"{key} ({level})"] = str(e)
                continue
            overrides[key] = value
            sources[key] = level
    config = static.with_overrides(overrides) if overrides else static
    return EffectiveBrokerConfig(config, sources, ignored)


@dataclass(frozen=True)
class ConfigTransition:
    """What a change of effective config asks of the controller."""

    #: false -> true: Kafka's ``enableDefaultUncleanLeaderElection`` (retry offline partitions).
    unclean_enabled: bool = False
    #: The unclean default that topic configs are merged over changed (either way): the partition
    #: state machine must be rebuilt with it.
    unclean_changed: bool = False
    rebalance_paused: bool = False
    rebalance_resumed: bool = False


def config_transition(old: KafkaConfig, new: KafkaConfig) -> ConfigTransition:
    old_unclean, new_unclean = old.unclean_leader_election_enable, new.unclean_leader_election_enable
    old_rebalance, new_rebalance = old.auto_leader_rebalance_enable, new.auto_leader_rebalance_enable
    return ConfigTransition(
        unclean_enabled=new_unclean and not old_unclean,
        unclean_changed=new_unclean != old_unclean,
        rebalance_paused=old_rebalance and not new_rebalance,
        rebalance_resumed=new_rebalance and not old_rebalance,
    )
