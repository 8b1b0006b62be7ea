"""Config entries as Kafka 2.8's DescribeConfigs reports them (``ConfigHelper``), pure.

A topic config's value is its override in ``/config/topics/<t>``, else the broker's value of its
synonym (``retention.ms`` <- ``log.retention.ms``: per-broker dynamic, cluster-default dynamic,
static), else Kafka's default. Its synonyms list those sources in that order, and its source is the
first synonym's (``DEFAULT_CONFIG`` when there is none). A broker config of this broker has the same
chain without the topic level; the cluster-default entity (``""``) lists only what
``/config/brokers/<default>`` holds. Values are strings, as Kafka's ``ConfigDef.convertToString``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kafka_controller.controller.config import KNOWN_KEYS, KafkaConfig
from kafka_controller.controller.dynamic_config import DYNAMIC_KEYS

# ConfigSource ids (DescribeConfigsResponse.ConfigSource).
TOPIC_CONFIG = 1
DYNAMIC_BROKER_CONFIG = 2
DYNAMIC_DEFAULT_BROKER_CONFIG = 3
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5

# ConfigType ids (DescribeConfigsResponse.ConfigType, DescribeConfigs v3+).
BOOLEAN, STRING, INT, LONG, DOUBLE, LIST = 1, 2, 3, 5, 6, 7
LONG_MAX = "9223372036854775807"


@dataclass(frozen=True, slots=True)
class TopicConfigDef:
    broker_synonym: str | None
    default: str  # LogConfig's value when neither the topic nor the broker sets it
    type: int
    broker_default: str | None  # the synonym's own default in KafkaConfig (None: no default)


def _d(synonym: str | None, default: str, kind: int, broker_default: str | None = "") -> TopicConfigDef:
    return TopicConfigDef(synonym, default, kind, default if broker_default == "" else broker_default)


#: Kafka 2.8's topic configs (``LogConfig``): broker synonym, default, type.
TOPIC_CONFIG_DEFS: dict[str, TopicConfigDef] = {
    "cleanup.policy": _d("log.cleanup.policy", "delete", LIST),
    "compression.type": _d("compression.type", "producer", STRING),
    "delete.retention.ms": _d("log.cleaner.delete.retention.ms", "86400000", LONG),
    "file.delete.delay.ms": _d("log.segment.delete.delay.ms", "60000", LONG),
    "flush.messages": _d("log.flush.interval.messages", LONG_MAX, LONG),
    "flush.ms": _d("log.flush.interval.ms", LONG_MAX, LONG, None),
    "follower.replication.throttled.replicas": _d(None, "", LIST),
    "index.interval.bytes": _d("log.index.interval.bytes", "4096", INT),
    "leader.replication.throttled.replicas": _d(None, "", LIST),
    "max.compaction.lag.ms": _d("log.cleaner.max.compaction.lag.ms", LONG_MAX, LONG),
    "max.message.bytes": _d("message.max.bytes", "1048588", INT),
    "message.downconversion.enable": _d("log.message.downconversion.enable", "true", BOOLEAN),
    "message.format.version": _d("log.message.format.version", "2.8-IV1", STRING),
    "message.timestamp.difference.max.ms": _d("log.message.timestamp.difference.max.ms", LONG_MAX, LONG),
    "message.timestamp.type": _d("log.message.timestamp.type", "CreateTime", STRING),
    "min.cleanable.dirty.ratio": _d("log.cleaner.min.cleanable.ratio", "0.5", DOUBLE),
    "min.compaction.lag.ms": _d("log.cleaner.min.compaction.lag.ms", "0", LONG),
    "min.insync.replicas": _d("min.insync.replicas", "1", INT),
    "preallocate": _d("log.preallocate", "false", BOOLEAN),
    "retention.bytes": _d("log.retention.bytes", "-1", LONG),
    "retention.ms": _d("log.retention.ms", "604800000", LONG, None),
    "segment.bytes": _d("log.segment.bytes", "1073741824", INT),
    "segment.index.bytes": _d("log.index.size.max.bytes", "10485760", INT),
    "segment.jitter.ms": _d("log.roll.jitter.ms", "0", LONG, None),
    "segment.ms": _d("log.roll.ms", "604800000", LONG, None),
    "unclean.leader.election.enable": _d("unclean.leader.election.enable", "false", BOOLEAN),
}

#: Kafka's list-typed configs (IncrementalAlterConfigs APPEND/SUBTRACT apply to these only).
LIST_CONFIGS = frozenset(k for k, d in TOPIC_CONFIG_DEFS.items() if d.type == LIST)

#: Broker keys a dynamic config may set in Kafka 2.8 (``DynamicBrokerConfig.AllDynamicConfigs``, the
#: part this project knows): the log synonyms but the message format, and the controller's dynamic
#: keys (``dynamic_config``; ``auto.leader.rebalance.enable`` is this project's documented deviation).
DYNAMIC_BROKER_KEYS: frozenset[str] = (
    frozenset(
        {d.broker_synonym for d in TOPIC_CONFIG_DEFS.values() if d.broker_synonym}
        - {"log.message.format.version"}
    )
    | DYNAMIC_KEYS
)

_BROKER_TYPES = {
    "inter.broker.protocol.version": STRING,
    "unclean.leader.election.enable": BOOLEAN,
    "auto.leader.rebalance.enable": BOOLEAN,
    "delete.topic.enable": BOOLEAN,
    "controlled.shutdown.enable": BOOLEAN,
    "replica.lag.time.max.ms": LONG,
    "zookeeper.session.timeout.ms": INT,
    "connections.max.idle.ms": LONG,
    "queued.max.request.bytes": LONG,
    "max.connections.per.ip.overrides": STRING,
}


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    """One config as DescribeConfigs reports it; ``synonyms`` are ``(name, value, source)``."""

    name: str
    value: str | None
    source: int
    read_only: bool
    type: int
    synonyms: tuple[tuple[str, str | None, int], ...] = ()
    is_sensitive: bool = False

    @property
    def is_default(self) -> bool:
        return self.source == DEFAULT_CONFIG


@dataclass(frozen=True, slots=True)
class BrokerLevels:
    """The broker config levels a value may come from, most specific first."""

    per_broker: Mapping[str, str]
    cluster_default: Mapping[str, str]
    static: Mapping[str, str]

    def synonyms(self, name: str, kafka_default: str | None) -> list[tuple[str, str | None, int]]:
        out: list[tuple[str, str | None, int]] = []
        for level, source in (
            (self.per_broker, DYNAMIC_BROKER_CONFIG),
            (self.cluster_default, DYNAMIC_DEFAULT_BROKER_CONFIG),
            (self.static, STATIC_BROKER_CONFIG),
        ):
            if name in level:
                out.append((name, level[name], source))
        if kafka_default is not None:
            out.append((name, kafka_default, DEFAULT_CONFIG))
        return out


def topic_config_entries(overrides: Mapping[str, str], broker: BrokerLevels) -> list[ConfigEntry]:
    """Every Kafka topic config of a topic, sorted by name."""
    entries = []
    for name in sorted(TOPIC_CONFIG_DEFS):
        d = TOPIC_CONFIG_DEFS[name]
        synonyms = [] if d.broker_synonym is None else broker.synonyms(d.broker_synonym, d.broker_default)
        if name in overrides:
            synonyms.insert(0, (name, overrides[name], TOPIC_CONFIG))
        value = synonyms[0][1] if synonyms else d.default
        source = synonyms[0][2] if synonyms else DEFAULT_CONFIG
        entries.append(ConfigEntry(name, value, source, False, d.type, tuple(synonyms)))
    return entries


def _broker_default(name: str) -> str | None:
    if name not in KNOWN_KEYS:
        return None
    value = getattr(KafkaConfig.of(0), name.replace(".", "_"))
    return str(value).lower() if isinstance(value, bool) else str(value)


def broker_config_entries(broker: BrokerLevels) -> list[ConfigEntry]:
    """This broker's configs: the keys it knows and every key set at one of its levels."""
    names: set[str] = (
        set(KNOWN_KEYS) | set(broker.static) | set(broker.per_broker) | set(broker.cluster_default)
    )
    entries = []
    for name in sorted(names):
        synonyms = broker.synonyms(name, _broker_default(name))
        if name in KNOWN_KEYS and name not in DYNAMIC_BROKER_KEYS:
            # a non-dynamic key's dynamic value is ignored (dynamic_config), so it is no source
            synonyms = [
                s for s in synonyms if s[2] not in (DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG)
            ]
        if not synonyms:
            continue
        entries.append(_broker_entry(name, synonyms))
    return entries


def default_broker_config_entries(cluster_default: Mapping[str, str]) -> list[ConfigEntry]:
    """The cluster-default entity: only what ``/config/brokers/<default>`` holds."""
    return [
        _broker_entry(name, [(name, value, DYNAMIC_DEFAULT_BROKER_CONFIG)])
        for name, value in sorted(cluster_default.items())
    ]


def _broker_entry(name: str, synonyms: list[tuple[str, str | None, int]]) -> ConfigEntry:
    kind = _BROKER_TYPES.get(name, INT if name in KNOWN_KEYS else STRING)
    topic_types = {d.broker_synonym: d.type for d in TOPIC_CONFIG_DEFS.values()}
    kind = topic_types.get(name, kind)
    return ConfigEntry(
        name, synonyms[0][1], synonyms[0][2], name not in DYNAMIC_BROKER_KEYS, kind, tuple(synonyms)
    )


def select(entries: Iterable[ConfigEntry], keys: Iterable[str] | None) -> list[ConfigEntry]:
    """The entries named in ``keys``; all when ``keys`` is None (Kafka's null key list)."""
    if keys is None:
        return list(entries)
    wanted = set(keys)
    return [e for e in entries if e.name in wanted]
