"""A broker decommission plan: every replica off the given brokers, replication factors kept,
rack-aware and balanced (``reassign --generate --decommission-brokers 3``).

Pure. Only partitions with a replica on a leaving broker move, and only those replicas: the others
stay, first in the list, so the preferred leader stays on a full copy. Each replacement is, in
order of preference: a broker on a rack the partition does not use yet (when every candidate
broker has a rack; otherwise racks are ignored, and the caller says so), then the one holding the
fewest replicas so far (counting the plan's own placements), then the lowest id. Partitions are
placed in topic-partition order, so the plan is deterministic.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping, Sequence

from kafka_controller.domain.errors import InvalidArgumentError
from kafka_controller.domain.values import TopicPartition

Plan = dict[TopicPartition, tuple[int, ...]]


def rack_aware(candidates: Collection[int], racks: Mapping[int, str | None]) -> bool:
    """Racks are used only when every candidate broker has one (Kafka's tools refuse a mix)."""
    return bool(candidates) and all(racks.get(b) for b in candidates)


def decommission_plan(
    current: Mapping[TopicPartition, Sequence[int]],
    leaving: Collection[int],
    candidates: Collection[int],
    racks: Mapping[int, str | None],
) -> Plan:
    """The plan moving every replica on ``leaving`` to ``candidates`` (which must not overlap)."""
    out = set(leaving)
    allowed = sorted(set(candidates) - out)
    if not allowed:
        raise InvalidArgumentError("no broker is left to move the replicas to")
    use_racks = rack_aware(allowed, racks)
    load: Counter[int] = Counter(dict.fromkeys(allowed, 0))
    for replicas in current.values():
        load.update(r for r in replicas if r in load)
    plan: Plan = {}
    for tp in sorted(current):
        replicas = tuple(current[tp])
        if not out.intersection(replicas):
            continue
        kept = [r for r in replicas if r not in out]
        for _ in range(len(replicas) - len(kept)):
            used = {racks.get(r) for r in kept} if use_racks else set()
            choices = [b for b in allowed if b not in kept]
            if not choices:
                raise InvalidArgumentError(
                    f"{tp} has replication factor {len(replicas)}, more than the {len(allowed)} "
                    f"brokers left ({','.join(map(str, allowed))})"
                )
            choice = min(choices, key=lambda b: (racks.get(b) in used, load[b], b))
            load[choice] += 1
            kept.append(choice)
        plan[tp] = tuple(kept)
    return plan
