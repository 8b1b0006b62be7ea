"""Topic creation planning: Kafka's replica placement, the ``--replica-assignment`` syntax, and
``--config K=V`` checked against Kafka 2.8's topic configs (``LogConfig``).

Everything here is pure and raises ``InvalidArgumentError`` with one line naming the bad input, so
the CLI can refuse a request before it writes anything to ZooKeeper.
"""

from __future__ import annotations

import difflib
import random
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field

from kafka_controller.admin.znode_size import (
    DEFAULT_JUTE_MAXBUFFER,
    assignment_znode_size,
    check_partition_count,
    check_topic_znode,
    config_size,
)
from kafka_controller.domain.errors import InvalidArgumentError, brief
from kafka_controller.zk.paths import validate_topic_name

MAX_REPLICATION_FACTOR = 32767
_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1
_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1
_VERSION = re.compile(r"^\d+\.\d+(\.\d+)?(-IV\d+)?$")
_THROTTLED = re.compile(r"^\s*\d+\s*:\s*\d+\s*$")

Validator = Callable[[str, str], None]


def _integer(low: int, high: int, kind: str) -> Validator:
    def check(key: str, value: str) -> None:
        try:
            number = int(value.strip())
        except ValueError:
            raise InvalidArgumentError(
                f"invalid value {brief(value)} for topic config {key}: expected {kind}"
            ) from None
        if number < low:
            raise InvalidArgumentError(
                f"invalid value {number} for topic config {key}: must be at least {low}"
            )
        if number > high:
            raise InvalidArgumentError(
                f"invalid value {number} for topic config {key}: must be at most {high}"
            )

    return check


def _int(low: int = 0) -> Validator:
    return _integer(low, _INT_MAX, "an integer")


def _long(low: int = 0) -> Validator:
    return _integer(low, _LONG_MAX, "an integer")


def _boolean(key: str, value: str) -> None:
    if value.strip().lower() not in ("true", "false"):
        raise InvalidArgumentError(
            f"invalid value {brief(value)} for topic config {key}: expected true or false"
        )


def _one_of(*choices: str) -> Validator:
    def check(key: str, value: str) -> None:
        if value.strip() not in choices:
            raise InvalidArgumentError(
                f"invalid value {brief(value)} for topic config {key}: expected one of {', '.join(choices)}"
            )

    return check


def _cleanup_policy(key: str, value: str) -> None:
    items = [v.strip() for v in value.split(",")]
    if not value.strip() or any(v not in ("compact", "delete") for v in items):
        raise InvalidArgumentError(
            f"invalid value {brief(value)} for topic config {key}: expected compact, delete or compact,delete"
        )


def _ratio(key: str, value: str) -> None:
    try:
        number = float(value.strip())
    except ValueError:
        raise InvalidArgumentError(
            f"invalid value {brief(value)} for topic config {key}: expected a number"
        ) from None
    if not 0.0 <= number <= 1.0:
        raise InvalidArgumentError(f"invalid value {number} for topic config {key}: must be between 0 and 1")


def _throttled_replicas(key: str, value: str) -> None:
    text = value.strip()
    if text in ("", "*") or all(_THROTTLED.match(item) for item in text.split(",")):
        return
    raise InvalidArgumentError(
        f"invalid value {brief(value)} for topic config {key}: expected * or a list of PARTITION:BROKER"
    )


def _message_format(key: str, value: str) -> None:
    if not _VERSION.match(value.strip()):
        raise InvalidArgumentError(
            f"invalid value {brief(value)} for topic config {key}: expected a version like 2.8"
        )


#: Kafka 2.8's topic-level configs (``LogConfig.configNames``) with their value checks.
TOPIC_CONFIGS: dict[str, Validator] = {
    "cleanup.policy": _cleanup_policy,
    "compression.type": _one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
    "delete.retention.ms": _long(0),
    "file.delete.delay.ms": _long(0),
    "flush.messages": _long(0),
    "flush.ms": _long(0),
    "follower.replication.throttled.replicas": _throttled_replicas,
    "index.interval.bytes": _int(0),
    "leader.replication.throttled.replicas": _throttled_replicas,
    "max.compaction.lag.ms": _long(1),
    "max.message.bytes": _int(0),
    "message.downconversion.enable": _boolean,
    "message.format.version": _message_format,
    "message.timestamp.difference.max.ms": _long(0),
    "message.timestamp.type": _one_of("CreateTime", "LogAppendTime"),
    "min.cleanable.dirty.ratio": _ratio,
    "min.compaction.lag.ms": _long(0),
    "min.insync.replicas": _int(1),
    "preallocate": _boolean,
    "retention.bytes": _integer(_LONG_MIN, _LONG_MAX, "an integer"),
    "retention.ms": _long(-1),
    "segment.bytes": _int(14),
    "segment.index.bytes": _int(4),
    "segment.jitter.ms": _long(0),
    "segment.ms": _long(1),
    "unclean.leader.election.enable": _boolean,
}
TOPIC_CONFIG_KEYS: tuple[str, ...] = tuple(sorted(TOPIC_CONFIGS))


def parse_config_pairs(pairs: Sequence[str] | None, *, option: str = "--config") -> dict[str, str]:
    """``["k=v", ...]`` -> ``{k: v}``; a missing ``=``, an empty key or a repeated key is refused."""
    out: dict[str, str] = {}
    for pair in pairs or ():
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise InvalidArgumentError(f"bad {option} {brief(pair)}: expected KEY=VALUE")
        if key in out:
            raise InvalidArgumentError(f"{option} {key if key.isprintable() else brief(key)} is given twice")
        out[key] = value
    return out


def validate_topic_config(config: Mapping[str, str]) -> dict[str, str]:
    """Check every key is a Kafka topic config and its value parses; returns the config unchanged."""
    for key, value in config.items():
        check = TOPIC_CONFIGS.get(key)
        if check is None:
            close = difflib.get_close_matches(key, TOPIC_CONFIG_KEYS, n=1)
            hint = f" (did you mean {brief(close[0])}?)" if close else ""
            raise InvalidArgumentError(f"unknown topic config {brief(key)}{hint}")
        check(key, value)
    return dict(config)


def parse_replica_assignment(text: str) -> dict[int, tuple[int, ...]]:
    """Kafka's ``--replica-assignment`` syntax: partitions split by ``,``, replicas by ``:``;
    ``"1:2,2:3"`` is partition 0 on [1, 2] and partition 1 on [2, 3]."""
    if not text or not text.strip():
        raise InvalidArgumentError("--replica-assignment is empty")
    out: dict[int, tuple[int, ...]] = {}
    for p, part in enumerate(text.split(",")):
        replicas: list[int] = []
        for item in part.split(":"):
            item = item.strip()
            if not re.fullmatch(r"-?\d+", item):
                raise InvalidArgumentError(
                    f"bad --replica-assignment {brief(text)}: partition {p} has {brief(item)}, "
                    "not a broker id"
                )
            broker = int(item)
            if broker < 0:
                raise InvalidArgumentError(
                    f"bad --replica-assignment {brief(text)}: negative broker id {broker}"
                )
            if broker in replicas:
                raise InvalidArgumentError(
                    f"bad --replica-assignment {brief(text)}: partition {p} lists broker {broker} twice"
                )
            replicas.append(broker)
        if out and len(replicas) != len(out[0]):
            raise InvalidArgumentError(
                f"bad --replica-assignment {brief(text)}: partition {p} has replication factor "
                f"{len(replicas)}, partition 0 has {len(out[0])}"
            )
        out[p] = tuple(replicas)
    return out


def assign_replicas_to_brokers(
    n_partitions: int,
    replication_factor: int,
    broker_ids: Collection[int],
    *,
    start_index: int = 0,
    replica_shift: int = 0,
    start_partition: int = 0,
) -> dict[int, tuple[int, ...]]:
    """Kafka's rack-unaware placement (``AdminUtils.assignReplicasToBrokersRackUnaware``).

    Leaders go round-robin over the sorted brokers from ``start_index``; each follower sits at a
    shift from its leader that grows by one every full round, so replicas spread evenly too.
    """
    brokers = sorted(broker_ids)
    n = len(brokers)
    if n_partitions <= 0:
        raise InvalidArgumentError(f"number of partitions must be larger than 0, got {n_partitions}")
    if replication_factor <= 0:
        raise InvalidArgumentError(f"replication factor must be larger than 0, got {replication_factor}")
    if replication_factor > n:
        raise InvalidArgumentError(
            f"replication factor {replication_factor} is larger than the {n} available brokers"
        )
    out: dict[int, tuple[int, ...]] = {}
    shift = replica_shift
    for p in range(max(0, start_partition), max(0, start_partition) + n_partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start_index) % n
        replicas = [brokers[first]]
        for j in range(replication_factor - 1):
            replicas.append(brokers[(first + 1 + (shift + j) % (n - 1)) % n])
        out[p] = tuple(replicas)
    return out


def random_assignment(
    n_partitions: int, replication_factor: int, broker_ids: Collection[int], rng: random.Random
) -> dict[int, tuple[int, ...]]:
    """Kafka's placement with its random start index and shift (so topics don't all lead on one broker)."""
    n = max(1, len(broker_ids))
    return assign_replicas_to_brokers(
        n_partitions,
        replication_factor,
        broker_ids,
        start_index=rng.randrange(n),
        replica_shift=rng.randrange(n),
    )


@dataclass(frozen=True, slots=True)
class TopicCreationPlan:
    topic: str
    assignment: dict[int, tuple[int, ...]]
    config: dict[str, str] = field(default_factory=dict)

    @property
    def replication_factor(self) -> int:
        return len(self.assignment[0])


def plan_topic_creation(
    topic: str,
    *,
    partitions: int | None,
    replication_factor: int | None,
    replica_assignment: str | None,
    config_pairs: Sequence[str] | None,
    live_brokers: Collection[int],
    existing_topics: Collection[str],
    rng: random.Random | None = None,
    jute_maxbuffer: int = DEFAULT_JUTE_MAXBUFFER,
) -> TopicCreationPlan:
    """Everything ``topics create`` checks before writing (Kafka's ``TopicCommand`` + ``AdminZkClient``),
    the topic znode's size under ZooKeeper's ``jute_maxbuffer`` included: a count that cannot fit is
    refused before any placement is computed."""
    validate_topic_name(topic)
    if topic in existing_topics:
        raise InvalidArgumentError(f"topic {brief(topic)} already exists")
    clash = sorted(t for t in existing_topics if t.replace(".", "_") == topic.replace(".", "_"))
    if clash:
        raise InvalidArgumentError(
            f"topic {brief(topic)} collides with existing topic {brief(clash[0])} ('.' and '_' clash)"
        )
    config = validate_topic_config(parse_config_pairs(config_pairs))
    if replica_assignment is not None:
        if partitions is not None or replication_factor is not None:
            raise InvalidArgumentError(
                "--replica-assignment cannot be combined with --partitions or --replication-factor"
            )
        explicit = parse_replica_assignment(replica_assignment)
        check_topic_znode(
            topic,
            assignment_znode_size(explicit),
            extra=config_size(config),
            jute_maxbuffer=jute_maxbuffer,
            what=f"{len(explicit):,} partitions in --replica-assignment",
        )
        return TopicCreationPlan(topic, explicit, config)
    if partitions is None:
        raise InvalidArgumentError("missing --partitions (or give --replica-assignment)")
    if replication_factor is None:
        raise InvalidArgumentError("missing --replication-factor (or give --replica-assignment)")
    if partitions <= 0:
        raise InvalidArgumentError(f"--partitions must be greater than 0, got {partitions}")
    if not 0 < replication_factor <= MAX_REPLICATION_FACTOR:
        raise InvalidArgumentError(
            f"--replication-factor must be between 1 and {MAX_REPLICATION_FACTOR}, got {replication_factor}"
        )
    if replication_factor > len(live_brokers):
        raise InvalidArgumentError(
            f"--replication-factor {replication_factor} is larger than the {len(live_brokers)} live brokers"
        )
    check_partition_count(
        topic,
        partitions,
        replication_factor,
        live_brokers,
        extra=config_size(config),
        jute_maxbuffer=jute_maxbuffer,
    )
    assignment = random_assignment(partitions, replication_factor, live_brokers, rng or random.Random())
    return TopicCreationPlan(topic, assignment, config)
