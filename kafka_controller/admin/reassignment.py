"""Partition reassignment, as ``kafka-reassign-partitions.sh`` plans it: parse and check Kafka's
reassignment JSON, generate a plan over a broker list, and verify a plan against ZooKeeper's state.

The reassignment file is Kafka's tool format::

    {"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [1, 2],
                                   "log_dirs": ["any", "any"]}]}

Parsing is strict (unknown keys, wrong types, duplicates are refused) because a typo in a plan
that moves data should stop the operator, not be ignored. Every error is one line that names the
entry, and it is raised before anything is written.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from kafka_controller.admin.topics import random_assignment
from kafka_controller.domain.errors import InvalidArgumentError, brief, cut
from kafka_controller.domain.values import ReplicaAssignment, TopicPartition

Plan = dict[TopicPartition, tuple[int, ...]]

_ENTRY_KEYS = frozenset({"topic", "partition", "replicas", "log_dirs"})


def load_json(text: str | bytes, what: str) -> Any:
    """Parse JSON text; an error names ``what`` and orjson's position, on one line."""
    if isinstance(text, str):
        text = text.encode()
    if not text.strip():
        raise InvalidArgumentError(f"{what} is empty")
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as e:
        raise InvalidArgumentError(f"{what} is not valid JSON: {' '.join(str(e).split())}") from None


def _object(value: Any, what: str, allowed: Collection[str]) -> dict[str, Any]:
    if type(value) is not dict:
        raise InvalidArgumentError(f"{what} must be a JSON object")
    unknown = sorted(set(value) - set(allowed))
    if unknown:
        raise InvalidArgumentError(f"{what} has unknown field {brief(unknown[0])}")
    return value


def _version(doc: Mapping[str, Any], what: str) -> None:
    if "version" in doc and doc["version"] != 1:
        raise InvalidArgumentError(f"{what}: unsupported version {brief(doc['version'])} (expected 1)")


def _json_brief(value: Any) -> str:
    """``value`` as it appeared in the JSON file, cut like ``brief``."""
    try:
        text = orjson.dumps(value).decode()
    except (TypeError, orjson.JSONEncodeError):
        return brief(value)
    return cut(text)


def _int_field(entry: Mapping[str, Any], key: str, where: str) -> int:
    if key not in entry:
        raise InvalidArgumentError(f"{where}: missing {brief(key)}")
    value = entry[key]
    if type(value) is not int:
        raise InvalidArgumentError(f"{where}: {brief(key)} must be an integer, got {_json_brief(value)}")
    return value


def _topic_field(entry: Mapping[str, Any], where: str) -> str:
    if "topic" not in entry:
        raise InvalidArgumentError(f"{where}: missing 'topic'")
    topic = entry["topic"]
    if type(topic) is not str or not topic:
        raise InvalidArgumentError(f"{where}: 'topic' must be a non-empty string")
    return topic


def parse_reassignment_json(text: str | bytes, what: str = "reassignment JSON") -> Plan:
    """Kafka's reassignment JSON -> ``{tp: replicas}``, in file order; structure only (see
    ``validate_reassignment`` for checks against the cluster)."""
    doc = _object(load_json(text, what), what, ("version", "partitions"))
    _version(doc, what)
    entries = doc.get("partitions")
    if type(entries) is not list:
        raise InvalidArgumentError(f"{what}: 'partitions' must be a list")
    if not entries:
        raise InvalidArgumentError(f"{what}: 'partitions' is empty")
    plan: Plan = {}
    for i, raw in enumerate(entries):
        where = f"{what}: partitions[{i}]"
        entry = _object(raw, where, _ENTRY_KEYS)
        tp = TopicPartition(_topic_field(entry, where), _int_field(entry, "partition", where))
        where = f"{what}: {tp}"
        if tp.partition < 0:
            raise InvalidArgumentError(f"{where}: negative partition")
        if tp in plan:
            raise InvalidArgumentError(f"{what}: {tp} is listed twice")
        replicas = entry.get("replicas")
        if "replicas" not in entry:
            raise InvalidArgumentError(f"{where}: missing 'replicas'")
        if type(replicas) is not list or any(type(r) is not int for r in replicas):
            raise InvalidArgumentError(f"{where}: 'replicas' must be a list of broker ids")
        if not replicas:
            raise InvalidArgumentError(f"{where}: the replica list is empty")
        negative = [r for r in replicas if r < 0]
        if negative:
            raise InvalidArgumentError(f"{where}: negative broker id {negative[0]}")
        seen: set[int] = set()
        for r in replicas:
            if r in seen:
                raise InvalidArgumentError(f"{where}: broker {r} is listed twice in replicas {replicas}")
            seen.add(r)
        if "log_dirs" in entry:
            _check_log_dirs(entry["log_dirs"], len(replicas), where)
        plan[tp] = tuple(replicas)
    return plan


def _check_log_dirs(log_dirs: Any, n: int, where: str) -> None:
    """Simulated brokers have one log dir, so only Kafka's ``"any"`` can be honoured."""
    if type(log_dirs) is not list or len(log_dirs) != n:
        raise InvalidArgumentError(f"{where}: 'log_dirs' must list one entry per replica")
    if any(d != "any" for d in log_dirs):
        raise InvalidArgumentError(f"{where}: 'log_dirs' other than \"any\" are not supported")


def validate_reassignment(
    plan: Mapping[TopicPartition, Sequence[int]],
    partitions_by_topic: Mapping[str, Collection[int]],
    brokers: Collection[int] | None,
    what: str = "reassignment JSON",
) -> None:
    """Every partition must exist and, when ``brokers`` is given, every replica be a registered broker."""
    for tp, replicas in plan.items():
        existing = partitions_by_topic.get(tp.topic)
        if existing is None:
            raise InvalidArgumentError(f"{what}: unknown topic {brief(tp.topic)}")
        if tp.partition not in existing:
            raise InvalidArgumentError(
                f"{what}: unknown partition {tp} (topic {brief(tp.topic)} has {len(existing)})"
            )
        if brokers is not None:
            unknown = [r for r in replicas if r not in brokers]
            if unknown:
                known = ", ".join(map(str, sorted(brokers))) or "none"
                raise InvalidArgumentError(
                    f"{what}: {tp}: unknown broker id {unknown[0]} (registered: {known})"
                )


def encode_reassignment_json(plan: Mapping[TopicPartition, Sequence[int]]) -> str:
    """Kafka's tool format, sorted by topic and partition, with ``log_dirs`` of ``"any"``."""
    entries = [
        {"topic": tp.topic, "partition": tp.partition, "replicas": list(rs), "log_dirs": ["any"] * len(rs)}
        for tp, rs in sorted(plan.items())
    ]
    return orjson.dumps({"version": 1, "partitions": entries}).decode()


def parse_topics_to_move_json(text: str | bytes, what: str = "topics-to-move JSON") -> list[str]:
    """``{"version": 1, "topics": [{"topic": "t"}, ...]}`` -> topic names, in order."""
    doc = _object(load_json(text, what), what, ("version", "topics"))
    _version(doc, what)
    entries = doc.get("topics")
    if type(entries) is not list:
        raise InvalidArgumentError(f"{what}: 'topics' must be a list")
    if not entries:
        raise InvalidArgumentError(f"{what}: 'topics' is empty")
    topics: list[str] = []
    for i, raw in enumerate(entries):
        topic = _topic_field(_object(raw, f"{what}: topics[{i}]", ("topic",)), f"{what}: topics[{i}]")
        if topic in topics:
            raise InvalidArgumentError(f"{what}: topic {brief(topic)} is listed twice")
        topics.append(topic)
    return topics


def parse_broker_list(text: str, registered: Collection[int] | None = None) -> tuple[int, ...]:
    """``--broker-list 1,2,3``: distinct non-negative ids, registered ones when ``registered`` is given."""
    out: list[int] = []
    for item in (text or "").split(","):
        item = item.strip()
        if not item.lstrip("-").isdigit():
            raise InvalidArgumentError(f"bad --broker-list {brief(text)}: {brief(item)} is not a broker id")
        broker = int(item)
        if broker < 0:
            raise InvalidArgumentError(f"bad --broker-list {brief(text)}: negative broker id {broker}")
        if broker in out:
            raise InvalidArgumentError(f"bad --broker-list {brief(text)}: broker {broker} is listed twice")
        if registered is not None and broker not in registered:
            raise InvalidArgumentError(f"bad --broker-list {brief(text)}: broker {broker} is not registered")
        out.append(broker)
    return tuple(out)


def generate_reassignment(
    current: Mapping[TopicPartition, Sequence[int]],
    topics: Iterable[str],
    broker_list: Collection[int],
    rng: random.Random | None = None,
) -> tuple[Plan, Plan]:
    """Kafka's ``--generate``: for each topic, a fresh placement of its partitions over
    ``broker_list`` with the topic's replication factor. Returns ``(current, proposed)``, both
    restricted to the topics to move."""
    rng = rng or random.Random()
    wanted = list(dict.fromkeys(topics))
    by_topic: dict[str, dict[int, tuple[int, ...]]] = {t: {} for t in wanted}
    for tp, replicas in current.items():
        if tp.topic in by_topic:
            by_topic[tp.topic][tp.partition] = tuple(replicas)
    old: Plan = {}
    new: Plan = {}
    for topic in wanted:
        parts = by_topic[topic]
        if not parts:
            raise InvalidArgumentError(f"topics-to-move JSON: unknown topic {brief(topic)}")
        rf = len(parts[min(parts)])
        if rf > len(broker_list):
            raise InvalidArgumentError(
                f"topic {brief(topic)} has replication factor {rf}, more than the {len(broker_list)} brokers "
                f"in --broker-list"
            )
        for p, replicas in random_assignment(len(parts), rf, broker_list, rng).items():
            tp = TopicPartition(topic, p)
            old[tp] = parts[p]
            new[tp] = replicas
    return old, new


# -- verify ------------------------------------------------------------------------------------------

COMPLETE = "complete"
IN_PROGRESS = "in progress"
MISMATCH = "mismatch"
MISSING = "missing"


@dataclass(frozen=True, slots=True)
class PartitionVerification:
    topic_partition: TopicPartition
    target: tuple[int, ...]
    current: tuple[int, ...]
    status: str  # COMPLETE | IN_PROGRESS | MISMATCH | MISSING
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    def describe(self) -> str:
        tp = self.topic_partition
        if self.status == COMPLETE:
            return f"Reassignment of partition {tp} is complete."
        if self.status == IN_PROGRESS:
            return (
                f"Reassignment of partition {tp} is still in progress (replicas {list(self.current)}, "
                f"adding {list(self.adding)}, removing {list(self.removing)})."
            )
        if self.status == MISSING:
            return f"Partition {tp} does not exist."
        return (
            f"There is no active reassignment of partition {tp}, but its replica set is "
            f"{list(self.current)} rather than {list(self.target)}."
        )


def verify_reassignment(
    plan: Mapping[TopicPartition, Sequence[int]],
    assignments: Mapping[TopicPartition, ReplicaAssignment],
    legacy_pending: Collection[TopicPartition] = (),
) -> list[PartitionVerification]:
    """Each planned partition against the topic znodes' full assignments (RS/AR/RR) and the
    legacy ``/admin/reassign_partitions`` request not yet picked up by the controller."""
    out: list[PartitionVerification] = []
    for tp, target in plan.items():
        ra = assignments.get(tp)
        target = tuple(target)
        if ra is None:
            out.append(PartitionVerification(tp, target, (), MISSING))
            continue
        if ra.is_being_reassigned or tp in legacy_pending:
            status = IN_PROGRESS
        elif ra.replicas == target:
            status = COMPLETE
        else:
            status = MISMATCH
        out.append(
            PartitionVerification(tp, target, ra.replicas, status, ra.adding_replicas, ra.removing_replicas)
        )
    return out
