"""Reassignment planning, pure: a minimal-movement plan, batches under concurrency caps, throttles.

* ``generate_plan`` keeps every replica that may stay (first, so leadership stays on a full copy)
  and fills the gaps with the least-loaded allowed brokers. Kafka's ``--generate`` re-places every replica at
  random; moving only what must move is what operators want from a drain (Cruise Control does the same).
* ``plan_batches`` splits a plan so that no batch moves more than ``max_per_broker`` replicas into or
  out of any one broker, nor ``max_cluster`` in all (Cruise Control's
  ``num.concurrent.partition.movements.per.broker`` = 5 and ``max.num.cluster.movements`` = 1250).
  A partition is never split; one that alone exceeds a cap gets a batch of its own.
* ``throttle_configs`` (from ``admin.throttle``) is what ``kafka-reassign-partitions.sh --throttle``
  writes: a rate on every broker involved and the throttled-replica lists on every topic moved.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

import orjson

from kafka_controller.admin.reassignment import parse_reassignment_json
from kafka_controller.domain.errors import InvalidArgumentError
from kafka_controller.domain.values import TopicPartition

Plan = dict[TopicPartition, tuple[int, ...]]
__all__ = [
    "Movement",
    "Plan",
    "generate_plan",
    "movement",
    "movements",
    "plan_batches",
    "plan_from_json",
    "plan_to_json",
]

DEFAULT_MAX_PER_BROKER = 5
DEFAULT_MAX_CLUSTER = 1250


@dataclass(frozen=True, slots=True)
class Movement:
    """What reassigning one partition copies and drops."""

    adding: tuple[int, ...]
    removing: tuple[int, ...]

    @property
    def brokers(self) -> tuple[int, ...]:
        return self.adding + self.removing


def movement(current: Sequence[int], target: Sequence[int]) -> Movement:
    return Movement(
        tuple(r for r in target if r not in current), tuple(r for r in current if r not in target)
    )


def movements(
    current: Mapping[TopicPartition, Sequence[int]], plan: Mapping[TopicPartition, Sequence[int]]
) -> dict[TopicPartition, Movement]:
    return {tp: movement(current.get(tp, ()), target) for tp, target in plan.items()}


def generate_plan(
    current: Mapping[TopicPartition, Sequence[int]],
    topics: Iterable[str],
    broker_list: Collection[int],
) -> Plan:
    """Move the named topics' replicas onto ``broker_list`` with as few copies as possible; only
    partitions that change are in the plan. Deterministic (ties go to the lowest broker id)."""
    allowed = sorted(set(broker_list))
    if not allowed:
        raise InvalidArgumentError("the broker list is empty")
    wanted = list(dict.fromkeys(topics))
    known = {tp.topic for tp in current}
    for t in wanted:
        if t not in known:
            raise InvalidArgumentError(f"unknown topic {t!r}")
    load: Counter[int] = Counter({b: 0 for b in allowed})
    for replicas in current.values():
        load.update(r for r in replicas if r in load)
    plan: Plan = {}
    for tp in sorted(tp for tp in current if tp.topic in wanted):
        replicas = tuple(current[tp])
        if len(replicas) > len(allowed):
            raise InvalidArgumentError(
                f"{tp} has replication factor {len(replicas)}, more than the {len(allowed)} allowed brokers"
            )
        kept = [r for r in replicas if r in load]  # survivors first: leadership stays on a full copy
        for _ in range(len(replicas) - len(kept)):
            choice = min((b for b in allowed if b not in kept), key=lambda b: (load[b], b))
            load[choice] += 1
            kept.append(choice)
        target = tuple(kept)
        if target != replicas:
            plan[tp] = target
    return plan


class _Batch:
    __slots__ = ("members", "per_broker", "total")

    def __init__(self) -> None:
        self.members: list[TopicPartition] = []
        self.per_broker: Counter[int] = Counter()
        self.total = 0

    def fits(self, per_broker: Counter[int], cost: int, max_per_broker: int, max_cluster: int) -> bool:
        return self.total + cost <= max_cluster and all(
            self.per_broker[b] + n <= max_per_broker for b, n in per_broker.items()
        )

    def add(self, tp: TopicPartition, per_broker: Counter[int], cost: int) -> None:
        self.members.append(tp)
        self.per_broker.update(per_broker)
        self.total += cost


def plan_batches(
    plan: Mapping[TopicPartition, Sequence[int]],
    current: Mapping[TopicPartition, Sequence[int]],
    *,
    max_per_broker: int = DEFAULT_MAX_PER_BROKER,
    max_cluster: int = DEFAULT_MAX_CLUSTER,
) -> list[list[TopicPartition]]:
    """Batches in plan order (first fit). A replica move counts on the broker it leaves and the
    one it joins; a partition that only reorders its replicas counts nothing."""
    if max_per_broker < 1:
        raise InvalidArgumentError(f"max movements per broker must be at least 1, got {max_per_broker}")
    if max_cluster < 1:
        raise InvalidArgumentError(f"max cluster movements must be at least 1, got {max_cluster}")
    moves = movements(current, plan)
    batches: list[_Batch] = []
    for tp in plan:
        m = moves[tp]
        per_broker = Counter(m.brokers)
        for batch in batches:
            if batch.fits(per_broker, len(m.adding), max_per_broker, max_cluster):
                break
        else:
            batch = _Batch()
            batches.append(batch)
        batch.add(tp, per_broker, len(m.adding))
    return [b.members for b in batches]


def plan_to_json(plan: Mapping[TopicPartition, Sequence[int]]) -> list[dict[str, object]]:
    """XCom-friendly form (Kafka's entry shape), sorted."""
    return [
        {"topic": tp.topic, "partition": tp.partition, "replicas": list(rs)}
        for tp, rs in sorted(plan.items())
    ]


def plan_from_json(entries: object, what: str = "reassignment plan") -> Plan:
    """Inverse of ``plan_to_json``; also accepts Kafka's ``{"version": 1, "partitions": [...]}``."""
    doc = entries if isinstance(entries, dict) else {"version": 1, "partitions": entries}
    if isinstance(doc, dict) and isinstance(doc.get("partitions"), list) and not doc["partitions"]:
        return {}
    try:
        text = orjson.dumps(doc)
    except TypeError as e:
        raise InvalidArgumentError(f"{what} is not JSON-serialisable: {e}") from None
    return parse_reassignment_json(text, what)
