"""``ControllerContext.load_partition_leadership_infos``: a failover's leadership cache filled at C
speed caches what ``put_partition_leadership_infos`` caches, with the same imbalance count, and
declines (caching nothing) whenever its shortcut would not give exactly that."""

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


def _state(leader: int, isr: tuple[int, ...]) -> LeaderIsrAndControllerEpoch:
    return LeaderIsrAndControllerEpoch(LeaderAndIsr(leader, 1, isr, 0), 1)


def _loaded(
    rng: random.Random,
) -> tuple[ControllerContext, dict[TopicPartition, LeaderIsrAndControllerEpoch]]:
    """A context loaded as a failover loads it, and a state for each of its partitions in order."""
    ctx = ControllerContext()
    ctx.set_all_topics([f"t{t}" for t in range(4)])
    for t in range(4):
        decoded = {
            TopicPartition(f"t{t}", p): ReplicaAssignment(tuple(rng.sample((1, 2, 3, 4), rng.randint(1, 3))))
            for p in rng.sample(range(20), rng.randint(1, 20))
        }
        ctx.load_topic_assignment(f"t{t}", decoded)
    states = {}
    for tp, assignment in ctx.iter_assignments():
        isr = tuple(rng.sample(assignment.replicas, rng.randint(1, len(assignment.replicas))))
        states[tp] = _state(rng.choice(isr), isr)
    return ctx, states


def _one_at_a_time(
    ctx: ControllerContext, states: dict[TopicPartition, LeaderIsrAndControllerEpoch]
) -> ControllerContext:
    expected = ControllerContext()
    expected.partition_assignments.update(ctx.partition_assignments)
    expected.topics_to_be_deleted |= ctx.topics_to_be_deleted
    for tp, state in states.items():
        expected.put_partition_leadership_info(tp, state)
    return expected


@pytest.mark.parametrize("seed", range(30))
def test_caches_what_caching_each_state_caches(seed: int) -> None:
    ctx, states = _loaded(random.Random(seed))
    assert ctx.load_partition_leadership_infos(states)
    expected = _one_at_a_time(ctx, states)
    assert list(ctx.partitions_leadership_info.items()) == list(expected.partitions_leadership_info.items())
    assert ctx.preferred_replica_imbalance_count == expected.preferred_replica_imbalance_count


def test_counts_each_partition_whose_leader_is_not_its_first_replica() -> None:
    ctx = ControllerContext()
    ctx.set_all_topics(["t"])
    ctx.load_topic_assignment("t", {TopicPartition("t", p): ReplicaAssignment((1, 2, 3)) for p in range(4)})
    states = dict(
        zip(
            ctx.all_partitions,
            (_state(1, (1, 2)), _state(2, (2,)), _state(3, (3,)), _state(1, (1,))),
            strict=True,
        )
    )
    assert ctx.load_partition_leadership_infos(states)
    assert ctx.preferred_replica_imbalance_count == 2


def _declined(ctx: ControllerContext, states: dict[TopicPartition, LeaderIsrAndControllerEpoch]) -> None:
    before = dict(ctx.partitions_leadership_info)
    count = ctx.preferred_replica_imbalance_count
    assert not ctx.load_partition_leadership_infos(states)
    assert dict(ctx.partitions_leadership_info) == before
    assert ctx.preferred_replica_imbalance_count == count


def test_declines_when_a_leadership_is_already_cached() -> None:
    ctx, states = _loaded(random.Random(1))
    first = next(iter(states))
    ctx.put_partition_leadership_info(first, states[first])
    _declined(ctx, states)


def test_declines_when_a_topic_is_queued_for_deletion() -> None:
    ctx, states = _loaded(random.Random(2))
    ctx.queue_topic_deletion(["t0"])
    _declined(ctx, states)


def test_declines_states_not_in_the_contexts_order_or_not_its_partitions() -> None:
    ctx, states = _loaded(random.Random(3))
    _declined(ctx, dict(reversed(list(states.items()))))
    _declined(
        ctx, {TopicPartition(tp.topic, tp.partition): s for tp, s in states.items()}
    )  # equal, not shared
    _declined(ctx, dict(list(states.items())[:-1]))


@pytest.mark.parametrize(
    "assignment",
    [ReplicaAssignment(()), ReplicaAssignment((1, 2, 3), adding_replicas=(3,), removing_replicas=(4,))],
)
def test_declines_an_empty_assignment_or_one_adding_replicas(assignment: ReplicaAssignment) -> None:
    ctx, states = _loaded(random.Random(4))
    tp = next(iter(states))
    ctx.partition_assignments[tp.topic][tp.partition] = assignment
    _declined(ctx, states)
