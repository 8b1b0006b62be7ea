"""``put_partition_leadership_infos`` (``has_preferred_leader`` inlined for partitions
without a replica being added) keeps the cache and the preferred-replica imbalance count that
``put_partition_leadership_info`` one partition at a time keeps, on random layouts: reassignments
adding or removing replicas, topics queued for deletion, partitions without an assignment, states
replaced by a second load."""

from __future__ import annotations

import random

import pytest

from kafka_controller.core.context import ControllerContext
from kafka_controller.domain.values import (
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
    TopicPartition,
)

BROKERS = (1, 2, 3, 4, 5)


def _assignment(rng: random.Random) -> ReplicaAssignment:
    replicas = tuple(rng.sample(BROKERS, rng.randint(0, 3)))
    kind = rng.random()
    if kind < 0.15 and replicas:  # the first replica (or another one) being added
        return ReplicaAssignment(replicas, (rng.choice(replicas),), ())
    if kind < 0.25 and replicas:
        return ReplicaAssignment(replicas, (), (replicas[-1],))
    return ReplicaAssignment(replicas)


def _states(
    rng: random.Random, tps: list[TopicPartition]
) -> list[tuple[TopicPartition, LeaderIsrAndControllerEpoch]]:
    out = []
    for tp in rng.sample(tps, rng.randint(0, len(tps))):
        isr = tuple(rng.sample(BROKERS, rng.randint(1, 3)))
        leader = rng.choice((*isr, -1))
        out.append((tp, LeaderIsrAndControllerEpoch(LeaderAndIsr(leader, rng.randint(0, 9), isr, 0), 1)))
    return out


@pytest.mark.parametrize("seed", range(80))
def test_bulk_keeps_the_cache_and_count_of_one_at_a_time(seed: int) -> None:
    rng = random.Random(seed)
    tps = [TopicPartition(f"t{t}", p) for t in range(4) for p in range(rng.randint(1, 12))]
    assigned = {tp: _assignment(rng) for tp in tps if rng.random() < 0.9}
    deleting = {"t3"} if rng.random() < 0.4 else set()
    loads = [_states(rng, tps) for _ in range(rng.randint(1, 3))]

    contexts = []
    for bulk in (True, False):
        ctx = ControllerContext()
        for tp, a in assigned.items():
            ctx.update_partition_full_replica_assignment(tp, a)
        ctx.topics_to_be_deleted.update(deleting)
        for load in loads:
            if bulk:
                ctx.put_partition_leadership_infos(load)
            else:
                for tp, info in load:
                    ctx.put_partition_leadership_info(tp, info)
        contexts.append(ctx)

    bulk_ctx, one_ctx = contexts
    assert list(bulk_ctx.partitions_leadership_info.items()) == list(
        one_ctx.partitions_leadership_info.items()
    )
    assert bulk_ctx.preferred_replica_imbalance_count == one_ctx.preferred_replica_imbalance_count
