"""The per-partition election wrappers (docs/controller-behaviour.md §2.3; Kafka's ``Election``):
new ISR and recipients per strategy."""

from __future__ import annotations

from kafka_controller.core.context import ControllerContext
from kafka_controller.core.election import (
    ElectionResult,
    leader_for_controlled_shutdown,
    leader_for_offline,
    leader_for_preferred_replica,
    leader_for_reassign,
)
from kafka_controller.domain.values import Broker, EndPoint, LeaderAndIsr, ReplicaAssignment, TopicPartition

TP = TopicPartition("t", 0)
RA = ReplicaAssignment.of


def _ctx(
    assignment: ReplicaAssignment, live: set[int], shutting_down: set[int] | None = None
) -> ControllerContext:
    ctx = ControllerContext()
    ctx.set_live_brokers({Broker(b, (EndPoint("localhost", 9000 + b),)): 1 for b in live})
    ctx.shutting_down_broker_ids |= shutting_down or set()
    ctx.update_partition_full_replica_assignment(TP, assignment)
    return ctx


def _lai(leader: int, isr: list[int], epoch: int = 7, zk_version: int = 3) -> LeaderAndIsr:
    return LeaderAndIsr(leader, epoch, tuple(isr), zk_version)


# --------------------------------------------------------------------------- offline
def test_offline_election_keeps_the_online_part_of_the_old_isr_in_order() -> None:
    ctx = _ctx(RA([1, 2, 3]), live={1, 3})
    [result] = leader_for_offline(ctx, [(TP, _lai(2, [2, 3, 1]), False)])
    assert result == ElectionResult(TP, LeaderAndIsr(1, 8, (3, 1), 3), (1, 3), unclean=False)
    assert ctx.stats.unclean_leader_elections == 0


def test_offline_election_after_an_unclean_choice_has_isr_of_the_leader_only() -> None:
    ctx = _ctx(RA([1, 2, 3]), live={1, 3})
    [result] = leader_for_offline(ctx, [(TP, _lai(2, [2]), True)])
    assert result == ElectionResult(TP, LeaderAndIsr(1, 8, (1,), 3), (1, 3), unclean=True)
    assert ctx.stats.unclean_leader_elections == 1


def test_offline_election_marks_the_unclean_meter_once_per_unclean_leader() -> None:
    ctx = _ctx(RA([1, 2]), live={2})
    tp1 = TopicPartition("t", 1)
    tp2 = TopicPartition("t", 2)
    for tp in (tp1, tp2):
        ctx.update_partition_full_replica_assignment(tp, RA([1, 2]))
    results = leader_for_offline(
        ctx,
        [(TP, _lai(1, [1]), True), (tp1, _lai(1, [1, 2]), True), (tp2, _lai(1, [1]), True)],
    )
    assert [r.unclean for r in results] == [True, False, True]
    assert ctx.stats.unclean_leader_elections == 2


def test_offline_election_recipients_exclude_shutting_down_and_offline_dir_replicas() -> None:
    ctx = _ctx(RA([1, 2, 3, 4]), live={1, 2, 3, 4}, shutting_down={1})
    ctx.replicas_on_offline_dirs[2] = {TP}
    [result] = leader_for_offline(ctx, [(TP, _lai(1, [1, 2, 3]), False)])
    assert result.live_replicas == (3, 4)
    assert result.leader_and_isr == LeaderAndIsr(3, 8, (3,), 3)


def test_offline_election_without_a_leader_and_isr_gives_no_leader_but_live_recipients() -> None:
    ctx = _ctx(RA([1, 2]), live={2})
    assert leader_for_offline(ctx, [(TP, None, True)]) == [ElectionResult(TP, None, (2,))]
    assert ctx.stats.unclean_leader_elections == 0


def test_offline_election_without_eligible_replica_gives_no_leader() -> None:
    ctx = _ctx(RA([1, 2]), live={2})
    assert leader_for_offline(ctx, [(TP, _lai(1, [1]), False)]) == [ElectionResult(TP, None, (2,))]


def test_offline_election_candidates_are_the_full_replica_set_including_adding_replicas() -> None:
    ctx = _ctx(RA([4, 1, 2], adding=[4], removing=[2]), live={1, 2, 4})
    [result] = leader_for_offline(ctx, [(TP, _lai(9, [4, 1]), False)])
    assert result.leader_and_isr == LeaderAndIsr(4, 8, (4, 1), 3)
    assert result.live_replicas == (4, 1, 2)


# --------------------------------------------------------------------------- reassign
def test_reassign_election_elects_from_target_replicas_and_sends_to_all_of_them() -> None:
    ctx = _ctx(RA([1, 2, 3, 4], adding=[4], removing=[1]), live={1, 3, 4})
    [result] = leader_for_reassign(ctx, [(TP, _lai(1, [1, 2, 3, 4]))])
    assert result == ElectionResult(TP, LeaderAndIsr(3, 8, (1, 2, 3, 4), 3), (2, 3, 4))


def test_reassign_election_ignores_a_live_isr_member_that_is_being_removed() -> None:
    ctx = _ctx(RA([1, 2, 3], adding=[3], removing=[1]), live={1})
    [result] = leader_for_reassign(ctx, [(TP, _lai(1, [1]))])
    assert result == ElectionResult(TP, None, (2, 3))


# --------------------------------------------------------------------------- preferred
def test_preferred_election_keeps_the_isr_and_sends_to_the_whole_assignment() -> None:
    ctx = _ctx(RA([2, 1, 3]), live={1, 2})
    [result] = leader_for_preferred_replica(ctx, [(TP, _lai(1, [1, 2]))])
    assert result == ElectionResult(TP, LeaderAndIsr(2, 8, (1, 2), 3), (2, 1, 3))


def test_preferred_election_does_not_fall_back_to_another_replica() -> None:
    ctx = _ctx(RA([2, 1]), live={1, 2})
    [result] = leader_for_preferred_replica(ctx, [(TP, _lai(1, [1]))])
    assert result == ElectionResult(TP, None, (2, 1))


def test_preferred_election_of_a_shutting_down_preferred_replica_fails() -> None:
    ctx = _ctx(RA([2, 1]), live={1, 2}, shutting_down={2})
    [result] = leader_for_preferred_replica(ctx, [(TP, _lai(1, [1, 2]))])
    assert result.leader_and_isr is None


# --------------------------------------------------------------------------- controlled shutdown
def test_controlled_shutdown_election_sends_to_the_shutting_down_broker_kafka_7482() -> None:
    ctx = _ctx(RA([5, 6]), live={5, 6}, shutting_down={5})
    [result] = leader_for_controlled_shutdown(ctx, [(TP, _lai(5, [5, 6]))])
    assert result == ElectionResult(TP, LeaderAndIsr(6, 8, (6,), 3), (5, 6))


def test_controlled_shutdown_election_drops_every_shutting_down_broker_from_the_isr() -> None:
    ctx = _ctx(RA([1, 2, 3, 4]), live={1, 2, 3, 4}, shutting_down={1, 3})
    [result] = leader_for_controlled_shutdown(ctx, [(TP, _lai(1, [1, 2, 3, 4]))])
    assert result == ElectionResult(TP, LeaderAndIsr(2, 8, (2, 4), 3), (1, 2, 3, 4))


def test_controlled_shutdown_election_recipients_exclude_dead_brokers() -> None:
    ctx = _ctx(RA([1, 2, 3]), live={1, 3}, shutting_down={1})
    [result] = leader_for_controlled_shutdown(ctx, [(TP, _lai(1, [1, 2, 3]))])
    assert result == ElectionResult(TP, LeaderAndIsr(3, 8, (2, 3), 3), (1, 3))


def test_controlled_shutdown_election_without_eligible_leader_leaves_the_isr_alone() -> None:
    ctx = _ctx(RA([1, 2]), live={1, 2}, shutting_down={1})
    [result] = leader_for_controlled_shutdown(ctx, [(TP, _lai(1, [1]))])
    assert result == ElectionResult(TP, None, (1, 2))


def test_wrappers_keep_input_order_over_a_batch() -> None:
    ctx = _ctx(RA([1, 2]), live={1, 2})
    tps = [TopicPartition("t", p) for p in (3, 1, 2)]
    for tp in tps:
        ctx.update_partition_full_replica_assignment(tp, RA([1, 2]))
    results = leader_for_preferred_replica(ctx, [(tp, _lai(2, [1, 2])) for tp in tps])
    assert [r.topic_partition for r in results] == tps
    assert all(r.leader_and_isr == LeaderAndIsr(1, 8, (1, 2), 3) for r in results)
