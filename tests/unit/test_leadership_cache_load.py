"""``services.update_leader_and_isr_cache`` caches every state read in one pass when each read
is a state (a failover's context load), and skips missing and failed reads otherwise: the
same cache, in the same order, and imbalance count as caching each read state one at a time, on
random layouts. Handed states already read (a failover reads them with the topics), it reads only
the partitions they lack, and caches in the context's order whatever order they came in."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import pytest

from kafka_controller.controller.services import update_leader_and_isr_cache
from kafka_controller.core.context import ControllerContext
from kafka_controller.domain.errors import MetadataStoreError
from kafka_controller.domain.values import (
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
    TopicPartition,
)


class _Store:
    def __init__(self, reads: dict[TopicPartition, Any]) -> None:
        self.reads = reads
        self.asked: list[TopicPartition] = []

    def get_partition_states(self, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, Any]:
        self.asked.extend(partitions)
        return {tp: self.reads[tp] for tp in partitions if tp in self.reads}


@pytest.mark.parametrize("seed", range(40))
def test_caches_the_read_states_as_one_at_a_time(seed: int) -> None:
    rng = random.Random(seed)
    tps = [TopicPartition(f"t{t}", p) for t in range(3) for p in range(rng.randint(1, 15))]
    reads: dict[TopicPartition, Any] = {}
    for tp in tps:
        isr = tuple(rng.sample((1, 2, 3, 4), rng.randint(1, 3)))
        reads[tp] = LeaderIsrAndControllerEpoch(LeaderAndIsr(rng.choice(isr), 1, isr, 0), 1)
        if seed % 2 and rng.random() < 0.2:
            reads[tp] = rng.choice((None, MetadataStoreError("boom")))
    ctx = ControllerContext()
    ctx.set_all_topics(["t0", "t1", "t2"])
    for tp in tps:
        ctx.update_partition_full_replica_assignment(
            tp, ReplicaAssignment(tuple(rng.sample((1, 2, 3, 4), 2)))
        )
    expected = ControllerContext()
    expected.partition_assignments.update(ctx.partition_assignments)

    store = _Store(reads)
    if seed % 4 < 2:
        update_leader_and_isr_cache(ctx, store)  # type: ignore[arg-type]
    else:  # a failover: most states read with the topics (in another order), the rest read now
        if seed % 8 == 6:  # all of them, in the context's order: taken as they are
            given = {tp: reads[tp] for tp in ctx.all_partitions}
        else:
            given = {tp: reads[tp] for tp in rng.sample(tps, len(tps)) if seed % 4 == 2 or rng.random() < 0.8}
            given[TopicPartition("gone", 0)] = None  # not in the context: not cached
        update_leader_and_isr_cache(ctx, store, already_read=given)  # type: ignore[arg-type]
        assert store.asked == [tp for tp in tps if tp not in given]

    for tp in tps:
        if isinstance(reads[tp], LeaderIsrAndControllerEpoch):
            expected.put_partition_leadership_info(tp, reads[tp])
    assert list(ctx.partitions_leadership_info.items()) == list(expected.partitions_leadership_info.items())
    assert ctx.preferred_replica_imbalance_count == expected.preferred_replica_imbalance_count
