"""The failover event thread's bulk paths against the per-partition definitions they replace."""

from __future__ import annotations

import random

import pytest

from kafka_controller.core.context import ControllerContext
from kafka_controller.core.partition_state_machine import AbstractPartitionStateMachine
from kafka_controller.core.request_batch_states import (
    leader_and_isr_and_metadata_states,
    leader_and_isr_states,
    update_metadata_states_like,
)
from kafka_controller.domain.requests import LeaderAndIsrPartitionState, UpdateMetadataPartitionState
from kafka_controller.domain.states import PartitionState
from kafka_controller.domain.values import (
    Broker,
    EndPoint,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
    TopicPartition,
)


def _context(seed: int, all_led: bool) -> tuple[ControllerContext, list[TopicPartition]]:
    rng = random.Random(seed)
    ctx = ControllerContext()
    ctx.set_live_brokers({Broker(b, (EndPoint("h", b),)): b for b in (1, 2, 3, 4) if rng.random() < 0.8})
    tps = [TopicPartition(f"t{t}", p) for t in range(3) for p in range(6)]
    for tp in rng.sample(tps, len(tps)):
        replicas = tuple(rng.sample([1, 2, 3, 4, 5], rng.randint(1, 3)))
        adding = replicas[-1:] if rng.random() < 0.1 else ()
        ctx.partition_assignments.setdefault(tp.topic, {})[tp.partition] = ReplicaAssignment(replicas, adding)
        if all_led or rng.random() < 0.85:
            isr = replicas[: rng.randint(1, len(replicas))]
            leader = -1 if rng.random() < 0.1 else isr[0]
            ctx.put_partition_leadership_info(
                tp, LeaderIsrAndControllerEpoch(LeaderAndIsr(leader, rng.randint(0, 3), isr, 0), 1)
            )
    if rng.random() < 0.3:
        ctx.replicas_on_offline_dirs[rng.choice([1, 2, 3])] = set(rng.sample(tps, 4))
    if rng.random() < 0.3:
        ctx.topics_to_be_deleted.add("t1")
    return ctx, tps


@pytest.mark.parametrize("seed", range(30))
def test_one_pass_states_are_leader_and_isr_states_then_update_metadata_states_like(seed: int) -> None:
    """The same LeaderAndIsr states and the same UpdateMetadata map, in the same order (a partition
    queued before keeps its place), with or without an offline log dir or a topic being deleted."""
    ctx, tps = _context(seed, all_led=seed % 3 == 0)
    rng = random.Random(seed)
    led = [tp for tp in tps if ctx.partition_leadership_info(tp) is not None]
    order = rng.sample(led, len(led)) if seed % 2 else led
    earlier = rng.sample(tps, 3)
    for is_new in (False, True):
        want_queued: dict[TopicPartition, UpdateMetadataPartitionState] = dict.fromkeys(earlier)  # type: ignore[misc]
        got_queued = dict(want_queued)
        want = leader_and_isr_states(order, ctx.partitions_leadership_info, ctx.partition_assignments, is_new)
        update_metadata_states_like(ctx, want, want_queued)
        got = leader_and_isr_and_metadata_states(ctx, order, is_new, got_queued)
        assert list(got.items()) == list(want.items())
        assert list(got_queued.items()) == list(want_queued.items())
        assert all(type(s) is LeaderAndIsrPartitionState for s in got.values())
        assert all(type(got_queued[tp]) is UpdateMetadataPartitionState for tp in order)


class _Machine(AbstractPartitionStateMachine):
    def handle_state_changes(self, partitions, target, strategy=None):  # type: ignore[no-untyped-def]
        raise AssertionError("not called")


@pytest.mark.parametrize("seed", range(30))
def test_initial_partition_states_are_kafkas_loop(seed: int) -> None:
    """New without a cached leadership, else Online iff the leader is online (live broker, log dir
    online; leader -1 never), set in the assignments' order, every partition led or not."""
    ctx, _ = _context(seed, all_led=seed % 2 == 0)
    want: dict[TopicPartition, PartitionState] = {}
    for topic, parts in ctx.partition_assignments.items():
        for p in parts:
            tp = TopicPartition(topic, p)
            info = ctx.partition_leadership_info(tp)
            if info is None:
                want[tp] = PartitionState.NEW_PARTITION
            elif ctx.is_replica_online(info.leader_and_isr.leader, tp):
                want[tp] = PartitionState.ONLINE_PARTITION
            else:
                want[tp] = PartitionState.OFFLINE_PARTITION
    _Machine(ctx).initialize_partition_state()
    assert list(ctx.partition_states.items()) == list(want.items())
    offline = list(want.values()).count(PartitionState.OFFLINE_PARTITION)
    assert ctx.offline_partition_count == offline


def test_shared_topic_partitions_are_handed_out_again_and_new_ones_made() -> None:
    ctx = ControllerContext()
    ctx.partition_assignments["t"] = {0: ReplicaAssignment((1,)), 1: ReplicaAssignment((2,))}
    first = ctx.partitions_for_topic("t")
    again = ctx.partitions_for_topic("t")
    assert again == first and all(a is b for a, b in zip(again, first, strict=True))
    ctx.partition_assignments["t"][2] = ReplicaAssignment((3,))
    grown = ctx.partitions_for_topic("t")
    assert grown == [TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("t", 2)]
    assert grown[0] is first[0] and grown[2] is ctx.partitions_for_topic("t")[2]
