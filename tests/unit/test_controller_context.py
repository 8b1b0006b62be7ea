"""Kafka's ControllerContextTest ported, plus the docs/controller-behaviour.md §5 rules Kafka's
suite does not pin down.

Setup as Kafka's: live brokers 1, 2, 3 (epoch 1); round-robin A-0 = [1,2,3], A-1 = [2,3,1],
B-0 = [3,1,2].
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_controller.core.context import ControllerContext
from kafka_controller.domain.errors import IllegalControllerStateError
from kafka_controller.domain.states import PartitionState, ReplicaState
from kafka_controller.domain.values import (
    NO_LEADER,
    Broker,
    EndPoint,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    PartitionAndReplica,
    ReplicaAssignment,
    TopicPartition,
)

BROKERS = (1, 2, 3)
TP1 = TopicPartition("A", 0)
TP2 = TopicPartition("A", 1)
TP3 = TopicPartition("B", 0)

OFFLINE = PartitionState.OFFLINE_PARTITION
ONLINE = PartitionState.ONLINE_PARTITION
NEW = PartitionState.NEW_PARTITION
NON_EXISTENT = PartitionState.NON_EXISTENT_PARTITION


def _broker(broker_id: int) -> Broker:
    return Broker(broker_id, (EndPoint("localhost", 9900 + broker_id),))


def _ra(*replicas: int) -> ReplicaAssignment:
    return ReplicaAssignment.of(replicas)


def _lice(leader: int, isr: tuple[int, ...], controller_epoch: int = 0) -> LeaderIsrAndControllerEpoch:
    return LeaderIsrAndControllerEpoch(LeaderAndIsr.initial(leader, isr), controller_epoch)


@pytest.fixture
def context() -> ControllerContext:
    ctx = ControllerContext()
    ctx.set_live_brokers({_broker(b): 1 for b in BROKERS})
    for leader_index, tp in enumerate((TP1, TP2, TP3)):  # simple round-robin assignment
        replicas = [BROKERS[(i + leader_index) % len(BROKERS)] for i in range(len(BROKERS))]
        ctx.update_partition_full_replica_assignment(tp, _ra(*replicas))
    return ctx


# --------------------------------------------------------------------------- Kafka's ControllerContextTest
def test_update_partition_full_replica_assignment_updates_replica_assignment(
    context: ControllerContext,
) -> None:
    context.update_partition_full_replica_assignment(TP1, _ra(4))
    full = context.partition_full_replica_assignment(TP1)
    assert full.replicas == (4,)
    assert full.adding_replicas == ()
    assert full.removing_replicas == ()

    expected = ReplicaAssignment((3,), (1,), (2,))  # a raw three-field value, not validated
    context.update_partition_full_replica_assignment(TP1, expected)
    updated = context.partition_full_replica_assignment(TP1)
    assert updated.replicas == expected.replicas
    assert updated.adding_replicas == expected.adding_replicas
    assert updated.removing_replicas == expected.removing_replicas


def test_partition_replica_assignment_returns_empty_seq_if_topic_or_partition_does_not_exist(
    context: ControllerContext,
) -> None:
    assert context.partition_replica_assignment(TopicPartition("NONEXISTENT", 0)) == ()
    assert context.partition_replica_assignment(TopicPartition("A", 100)) == ()


def test_partition_full_replica_assignment_returns_empty_assignment_if_topic_or_partition_does_not_exist(
    context: ControllerContext,
) -> None:
    empty = ReplicaAssignment((), (), ())
    assert context.partition_full_replica_assignment(TopicPartition("NONEXISTENT", 0)) == empty
    assert context.partition_full_replica_assignment(TopicPartition("A", 100)) == empty


def test_partition_replica_assignment_for_topic_returns_empty_map_if_topic_does_not_exist(
    context: ControllerContext,
) -> None:
    assert context.partition_replica_assignment_for_topic("NONEXISTENT") == {}


def test_partition_replica_assignment_for_topic_returns_expected_replica_assignments(
    context: ControllerContext,
) -> None:
    assert context.partition_replica_assignment_for_topic("A") == {TP1: (1, 2, 3), TP2: (2, 3, 1)}


def test_partition_replica_assignment() -> None:
    reassigning = ReplicaAssignment.of([1, 2, 3, 4, 5, 6], [2, 3, 4], [1, 5, 6])
    assert reassigning.is_being_reassigned
    assert reassigning.target_replicas == (2, 3, 4)

    reassigning2 = ReplicaAssignment.of([1, 2, 3, 4], [], [1, 4])
    assert reassigning2.is_being_reassigned
    assert reassigning2.target_replicas == (2, 3)

    reassigning3 = ReplicaAssignment.of([1, 2, 3, 4], [4], [2])
    assert reassigning3.is_being_reassigned
    assert reassigning3.target_replicas == (1, 3, 4)

    partition = ReplicaAssignment.of([1, 2, 3, 4, 5, 6])
    assert not partition.is_being_reassigned
    assert partition.target_replicas == (1, 2, 3, 4, 5, 6)

    reassigning4 = _ra(1, 2, 3, 4).reassign_to([4, 2, 5, 3])
    assert reassigning4.replicas == (4, 2, 5, 3, 1)
    assert reassigning4.target_replicas == (4, 2, 5, 3)
    assert reassigning4.adding_replicas == (5,)
    assert reassigning4.removing_replicas == (1,)
    assert reassigning4.is_being_reassigned

    reassigning5 = _ra(1, 2, 3).reassign_to([4, 5, 6])
    assert reassigning5.replicas == (4, 5, 6, 1, 2, 3)
    assert reassigning5.target_replicas == (4, 5, 6)
    assert reassigning5.adding_replicas == (4, 5, 6)
    assert reassigning5.removing_replicas == (1, 2, 3)
    assert reassigning5.is_being_reassigned

    non_reassigning = _ra(1, 2, 3).reassign_to([3, 1, 2])
    assert non_reassigning.replicas == (3, 1, 2)
    assert non_reassigning.target_replicas == (3, 1, 2)
    assert non_reassigning.adding_replicas == ()
    assert non_reassigning.removing_replicas == ()
    assert not non_reassigning.is_being_reassigned


def test_reassign_to_idempotence() -> None:
    for assignment in (
        _ra(1, 2, 3),
        ReplicaAssignment.of([4, 5, 6, 1, 2, 3], [4, 5, 6], [1, 2, 3]),
        ReplicaAssignment.of([4, 2, 3, 1], [4], [1]),
    ):
        assert assignment.reassign_to(assignment.target_replicas) == assignment


def test_reassign_to() -> None:
    assignment = _ra(1, 2, 3)
    first = assignment.reassign_to([4, 5, 6])
    assert first == ReplicaAssignment.of([4, 5, 6, 1, 2, 3], [4, 5, 6], [1, 2, 3])
    retargeted = ReplicaAssignment.of([7, 8, 9, 1, 2, 3], [7, 8, 9], [1, 2, 3])
    assert first.reassign_to([7, 8, 9]) == retargeted
    assert assignment.reassign_to([7, 8, 9]) == retargeted
    assert first.reassign_to([1, 2, 3]) == assignment  # reassigning back to the origin cancels


def test_preferred_replica_imbalance_metric(context: ControllerContext) -> None:
    for tp in (TP1, TP2, TP3):
        context.update_partition_full_replica_assignment(tp, _ra(1, 2, 3))
    assert context.preferred_replica_imbalance_count == 0

    context.put_partition_leadership_info(TP1, _lice(1, (1, 2, 3)))
    assert context.preferred_replica_imbalance_count == 0
    context.put_partition_leadership_info(TP2, _lice(2, (2, 3, 1)))
    assert context.preferred_replica_imbalance_count == 1
    context.put_partition_leadership_info(TP3, _lice(3, (3, 1, 2)))
    assert context.preferred_replica_imbalance_count == 2

    context.update_partition_full_replica_assignment(TP1, _ra(2, 3, 1))
    context.update_partition_full_replica_assignment(TP2, _ra(2, 3, 1))
    assert context.preferred_replica_imbalance_count == 2

    context.queue_topic_deletion({TP3.topic})
    assert context.preferred_replica_imbalance_count == 1

    context.put_partition_leadership_info(TP3, _lice(1, (3, 1, 2)))
    assert context.preferred_replica_imbalance_count == 1

    context.remove_topic(TP1.topic)
    context.remove_topic(TP2.topic)
    context.remove_topic(TP3.topic)
    assert context.preferred_replica_imbalance_count == 0


def test_preferred_replica_imbalance_metric_on_concurrent_topic_deletion(context: ControllerContext) -> None:
    """Kafka 3.2.3+'s test: we take the KAFKA-13572 fix over 2.8's behaviour.

    On 2.8, deleting B while A's deletion is still pending re-queues A (the controller enqueues
    every child of /admin/delete_topics), A's non-preferred partitions are subtracted a second
    time and the metric reads -1. A count can never be negative, so the fix is adopted.
    """
    tp_a, tp_b = TopicPartition("A", 0), TopicPartition("B", 0)
    context.update_partition_full_replica_assignment(tp_a, _ra(1, 2, 3))
    context.update_partition_full_replica_assignment(tp_b, _ra(1, 2, 3))
    assert context.preferred_replica_imbalance_count == 0

    context.queue_topic_deletion({"A"})
    # Every partition of a topic being deleted ends up without a leader.
    context.put_partition_leadership_info(tp_a, _lice(NO_LEADER, (1, 2, 3)))
    assert context.preferred_replica_imbalance_count == 0

    context.queue_topic_deletion({"A", "B"})
    assert context.preferred_replica_imbalance_count == 0


# ------------------------------------------------- docs/controller-behaviour.md §5.4 offline partition count
def test_offline_partition_count_first_insertion_counts_from_non_existent(context: ControllerContext) -> None:
    context.put_partition_state_if_not_exists(TP1, OFFLINE)
    assert context.offline_partition_count == 1
    context.put_partition_state_if_not_exists(TP1, OFFLINE)  # present already: no change, no count
    context.put_partition_state_if_not_exists(TP2, NON_EXISTENT)
    assert context.offline_partition_count == 1
    context.put_partition_state(TP3, OFFLINE)  # a first put_partition_state also starts at NonExistent
    assert context.offline_partition_count == 2
    context.put_partition_state(TP3, OFFLINE)  # Offline -> Offline is not a second offline partition
    assert context.offline_partition_count == 2
    context.put_partition_state(TP1, ONLINE)
    assert context.offline_partition_count == 1
    context.put_partition_state(TP3, NON_EXISTENT)
    assert context.offline_partition_count == 0
    context.put_partition_state(TP3, NEW)
    assert context.offline_partition_count == 0


def test_offline_partition_count_excludes_topics_whose_deletion_started(context: ControllerContext) -> None:
    context.put_partition_state(TP1, OFFLINE)
    context.put_partition_state(TP2, OFFLINE)
    context.queue_topic_deletion({"A"})  # queued only: still counted
    context.put_partition_state(TP3, OFFLINE)
    assert context.offline_partition_count == 3

    # Offline -> NonExistent before begin_topic_deletion (what the deletion manager does) decrements...
    context.put_partition_state(TP1, NON_EXISTENT)
    assert context.offline_partition_count == 2
    context.begin_topic_deletion({"A"})
    # ...after it, nothing of topic A moves the count any more, either way.
    context.put_partition_state(TP2, NON_EXISTENT)
    context.put_partition_state(TP1, NEW)
    context.put_partition_state(TP1, OFFLINE)
    assert context.offline_partition_count == 2
    assert context.is_topic_deletion_in_progress("A")
    assert not context.is_topic_deletion_in_progress("B")


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from([TP1, TP2, TP3]), st.sampled_from(list(PartitionState)), st.booleans()),
        max_size=40,
    )
)
def test_offline_partition_count_matches_offline_states(
    moves: list[tuple[TopicPartition, PartitionState, bool]],
) -> None:
    """Without deletions the incremental count always equals the number of Offline partitions."""
    ctx = ControllerContext()
    for tp, state, if_absent in moves:
        if if_absent:
            ctx.put_partition_state_if_not_exists(tp, state)
        else:
            ctx.put_partition_state(tp, state)
        assert ctx.offline_partition_count == len(ctx.partitions_in_state(OFFLINE))


# ------------------------------------------------- docs/controller-behaviour.md §5.3 leadership helpers
def test_partitions_with_offline_leader(context: ControllerContext) -> None:
    c0 = TopicPartition("C", 0)
    context.update_partition_full_replica_assignment(c0, _ra(3, 1))
    context.put_partition_leadership_info(TP1, _lice(1, (1, 2, 3)))
    context.put_partition_leadership_info(TP2, _lice(2, (2, 3, 1)))
    context.put_partition_leadership_info(TP3, _lice(NO_LEADER, (3,)))
    context.put_partition_leadership_info(c0, _lice(3, (3, 1)))
    assert context.partitions_with_offline_leader == {TP3}  # a leader of -1 is never online

    context.shutting_down_broker_ids.add(2)  # shutting down is not online
    context.replicas_on_offline_dirs[3] = {c0}  # nor is a replica on an offline log dir
    assert context.partitions_with_offline_leader == {TP2, TP3, c0}

    context.queue_topic_deletion({"B"})  # queued topics are left out
    assert context.partitions_with_offline_leader == {TP2, c0}
    context.remove_live_brokers([1])
    assert context.partitions_with_offline_leader == {TP1, TP2, c0}


def test_partition_leaders_on_broker(context: ControllerContext) -> None:
    single = TopicPartition("C", 0)
    context.update_partition_full_replica_assignment(single, _ra(1))
    context.put_partition_leadership_info(TP1, _lice(1, (1, 2, 3)))
    context.put_partition_leadership_info(TP2, _lice(1, (2, 3, 1)))
    context.put_partition_leadership_info(TP3, _lice(3, (3, 1, 2)))
    context.put_partition_leadership_info(single, _lice(1, (1,)))
    # RS of size 1 is left out: controlled shutdown cannot move such a leader anyway.
    assert context.partition_leaders_on_broker(1) == {TP1, TP2}
    assert context.partition_leaders_on_broker(3) == {TP3}
    assert context.partition_leaders_on_broker(2) == set()
    context.queue_topic_deletion({"A"})
    assert context.partition_leaders_on_broker(1) == set()
    assert context.partitions_with_leaders == {TP3, single}
    assert context.partition_with_leaders_count == 4


def test_live_brokers_and_replica_online(context: ControllerContext) -> None:
    context.shutting_down_broker_ids.add(2)
    assert context.live_broker_ids == {1, 3}
    assert context.live_or_shutting_down_broker_ids == {1, 2, 3}
    assert not context.is_replica_online(2, TP1)
    assert context.is_replica_online(2, TP1, include_shutting_down_brokers=True)
    context.replicas_on_offline_dirs[1] = {TP1}
    assert not context.is_replica_online(1, TP1)
    assert context.is_replica_online(1, TP2)
    assert not context.is_replica_online(4, TP1, include_shutting_down_brokers=True)
    online, offline = context.online_and_offline_replicas()
    assert set(offline) == {PartitionAndReplica(TP1, 1)} | {
        PartitionAndReplica(tp, 2) for tp in (TP1, TP2, TP3)
    }
    assert len(online) + len(offline) == 9


def test_check_valid_state_changes_keep_input_order(context: ControllerContext) -> None:
    context.put_partition_state(TP2, OFFLINE)
    context.put_partition_state(TP3, ONLINE)
    valid, invalid = context.check_valid_partition_state_change([TP3, TP2, TP1], NON_EXISTENT)
    assert (valid, invalid) == ([TP2], [TP3, TP1])
    valid, invalid = context.check_valid_partition_state_change([TP3, TP1, TP2], ONLINE)
    assert (valid, invalid) == ([TP3, TP2], [TP1])

    r1, r2 = PartitionAndReplica(TP1, 1), PartitionAndReplica(TP1, 2)
    context.put_replica_state(r2, ReplicaState.OFFLINE_REPLICA)
    valid_r, invalid_r = context.check_valid_replica_state_change(
        [r1, r2], ReplicaState.REPLICA_DELETION_STARTED
    )
    assert (valid_r, invalid_r) == ([r2], [r1])


def test_replicas_in_state_requires_every_replica_to_have_a_state(context: ControllerContext) -> None:
    replicas = context.replicas_for_topic("B")
    for r in replicas[:-1]:
        context.put_replica_state(r, ReplicaState.ONLINE_REPLICA)
    with pytest.raises(IllegalControllerStateError, match="has no state"):
        context.replicas_in_state("B", ReplicaState.ONLINE_REPLICA)
    context.put_replica_state(replicas[-1], ReplicaState.OFFLINE_REPLICA)
    assert context.replicas_in_state("B", ReplicaState.ONLINE_REPLICA) == set(replicas[:-1])
    assert context.is_any_replica_in_state("B", ReplicaState.OFFLINE_REPLICA)
    assert not context.are_all_replicas_in_state("B", ReplicaState.ONLINE_REPLICA)


# --------------------------------------------------------------------------- topics
def test_remove_topic_touches_only_topic_membership_assignment_and_leadership(
    context: ControllerContext,
) -> None:
    context.set_all_topics({"A", "B"})
    context.add_topic_id("A", "id-a")
    context.add_topic_id("B", "id-b")
    context.put_partition_leadership_info(TP1, _lice(1, (1, 2, 3)))
    context.put_partition_leadership_info(TP3, _lice(3, (3, 1, 2)))
    context.put_partition_state(TP1, OFFLINE)
    replica = PartitionAndReplica(TP1, 1)
    context.put_replica_state(replica, ReplicaState.REPLICA_DELETION_SUCCESSFUL)
    context.partitions_being_reassigned.add(TP1)
    context.queue_topic_deletion({"A"})
    context.begin_topic_deletion({"A"})
    context.topics_ineligible_for_deletion.add("A")

    context.remove_topic("A")

    assert context.all_topics == {"B"}
    assert context.topic_ids == {"B": "id-b"}
    assert context.topic_names == {"id-b": "B"}
    assert context.partitions_for_topic("A") == []
    assert context.partition_leadership_info(TP1) is None
    assert context.partition_leadership_info(TP3) is not None
    assert not context.is_topic_queued_up_for_deletion("A")
    assert not context.is_topic_deletion_in_progress("A")
    # Not touched (docs/controller-behaviour.md §5.3): states, reassignments and the ineligible set.
    assert context.partition_states[TP1] is OFFLINE
    assert context.replica_states[replica] is ReplicaState.REPLICA_DELETION_SUCCESSFUL
    assert TP1 in context.partitions_being_reassigned
    assert "A" in context.topics_ineligible_for_deletion
    assert context.partitions_for_topic("B") == [TP3]


def test_remove_topic_not_queued_removes_its_imbalance(context: ControllerContext) -> None:
    context.put_partition_leadership_info(TP1, _lice(2, (1, 2, 3)))  # preferred is 1
    context.put_partition_leadership_info(TP3, _lice(1, (3, 1, 2)))  # preferred is 3
    assert context.preferred_replica_imbalance_count == 2
    context.remove_topic("A")
    assert context.preferred_replica_imbalance_count == 1
    context.remove_topic("A")  # unknown by now: nothing left to subtract
    assert context.preferred_replica_imbalance_count == 1


def test_add_topic_id_conflicts(context: ControllerContext) -> None:
    with pytest.raises(IllegalControllerStateError, match="C"):
        context.add_topic_id("C", "id-c")  # not in all_topics
    context.set_all_topics({"A", "B"})
    context.add_topic_id("A", "id-a")
    context.add_topic_id("A", "id-a")  # the same pair again is fine
    with pytest.raises(IllegalControllerStateError, match="id-other"):
        context.add_topic_id("A", "id-other")  # another id for A
    with pytest.raises(IllegalControllerStateError, match="id-a"):
        context.add_topic_id("B", "id-a")  # A's id for B
    # Nothing was written by the refused calls.
    assert context.topic_ids == {"A": "id-a"}
    assert context.topic_names == {"id-a": "A"}


def test_queue_topic_deletion_and_eligibility(context: ControllerContext) -> None:
    context.queue_topic_deletion({"A", "B"})
    context.topics_ineligible_for_deletion.add("B")
    assert context.is_topic_eligible_for_deletion("A")
    assert not context.is_topic_eligible_for_deletion("B")
    assert not context.is_topic_eligible_for_deletion("C")
    snapshot = context.topics_queued_for_deletion
    snapshot.add("C")  # a copy: the context is not changed through it
    assert context.topics_to_be_deleted == {"A", "B"}


def test_reset_context(context: ControllerContext) -> None:
    context.epoch, context.epoch_zk_version = 7, 9
    context.set_all_topics({"A", "B"})
    context.add_topic_id("A", "id-a")
    context.put_partition_leadership_info(TP2, _lice(3, (2, 3, 1)))
    context.put_partition_state(TP1, OFFLINE)
    context.put_replica_state(PartitionAndReplica(TP1, 1), ReplicaState.ONLINE_REPLICA)
    context.partitions_being_reassigned.add(TP1)
    context.replicas_on_offline_dirs[1] = {TP1}
    context.shutting_down_broker_ids.add(2)
    context.queue_topic_deletion({"B"})
    context.begin_topic_deletion({"B"})
    context.topics_ineligible_for_deletion.add("B")
    assert context.offline_partition_count == 1
    assert context.preferred_replica_imbalance_count == 1

    context.reset_context()

    assert (context.epoch, context.epoch_zk_version) == (0, 0)
    assert context.all_topics == set()
    assert context.topic_ids == {} and context.topic_names == {}
    assert context.partition_assignments == {}
    assert context.partitions_leadership_info == {}
    assert context.partition_states == {} and context.replica_states == {}
    assert context.partitions_being_reassigned == set()
    assert context.replicas_on_offline_dirs == {}
    assert context.shutting_down_broker_ids == set()
    assert context.topics_to_be_deleted == set()
    assert context.topics_with_deletion_started == set()
    assert context.topics_ineligible_for_deletion == set()
    assert context.offline_partition_count == 0
    assert context.preferred_replica_imbalance_count == 0
    assert context.live_or_shutting_down_broker_ids == set()
    assert context.live_or_shutting_down_brokers == []
