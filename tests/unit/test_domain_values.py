"""Domain values: ReplicaAssignment arithmetic (ControllerContextTest cases 6-8) and LeaderAndIsr."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_controller.domain.values import (
    LeaderAndIsr,
    PartitionAndReplica,
    ReplicaAssignment,
    TopicPartition,
    seq_diff,
)

RA = ReplicaAssignment.of


def test_seq_diff_removes_one_occurrence_per_element_and_keeps_order() -> None:
    assert seq_diff([1, 2, 3, 2], [2]) == (1, 3, 2)
    assert seq_diff([4, 2, 5, 3, 1], [5, 1]) == (4, 2, 3)
    assert seq_diff([1, 2], [7]) == (1, 2)


@pytest.mark.parametrize(
    ("assignment", "being_reassigned", "target"),
    [
        (RA([1, 2, 3, 4, 5, 6], [2, 3, 4], [1, 5, 6]), True, (2, 3, 4)),
        (RA([1, 2, 3, 4], [], [1, 4]), True, (2, 3)),
        (RA([1, 2, 3, 4], [4], [2]), True, (1, 3, 4)),
        (RA([1, 2, 3, 4, 5, 6]), False, (1, 2, 3, 4, 5, 6)),
    ],
)
def test_partition_replica_assignment(
    assignment: ReplicaAssignment, being_reassigned: bool, target: tuple[int, ...]
) -> None:
    assert assignment.is_being_reassigned is being_reassigned
    assert assignment.target_replicas == target


def test_reassign_to_examples_from_kafka() -> None:
    a = RA([1, 2, 3, 4]).reassign_to([4, 2, 5, 3])
    assert a == RA([4, 2, 5, 3, 1], [5], [1])
    assert a.target_replicas == (4, 2, 5, 3)
    assert a.is_being_reassigned
    b = RA([1, 2, 3]).reassign_to([4, 5, 6])
    assert b == RA([4, 5, 6, 1, 2, 3], [4, 5, 6], [1, 2, 3])
    c = RA([1, 2, 3]).reassign_to([3, 1, 2])
    assert c == RA([3, 1, 2])
    assert not c.is_being_reassigned


def test_reassign_to() -> None:
    original = RA([1, 2, 3])
    first = original.reassign_to([4, 5, 6])
    assert first == RA([4, 5, 6, 1, 2, 3], [4, 5, 6], [1, 2, 3])
    retarget = first.reassign_to([7, 8, 9])
    assert retarget == RA([7, 8, 9, 1, 2, 3], [7, 8, 9], [1, 2, 3])
    assert retarget == original.reassign_to([7, 8, 9])
    assert first.reassign_to([1, 2, 3]) == original  # reassigning back to the origin cancels


@pytest.mark.parametrize(
    "assignment", [RA([1, 2, 3]), RA([4, 5, 6, 1, 2, 3], [4, 5, 6], [1, 2, 3]), RA([4, 2, 3, 1], [4], [1])]
)
def test_reassign_to_idempotence(assignment: ReplicaAssignment) -> None:
    assert assignment.reassign_to(assignment.target_replicas) == assignment


def test_remove_replica_filters_all_three_lists() -> None:
    assert RA([1, 2, 3], [3], [1]).remove_replica(3) == RA([1, 2], [], [1])


replica_lists = st.lists(st.integers(0, 20), min_size=1, max_size=6, unique=True)


@given(replica_lists, replica_lists)
def test_reassign_to_properties(current: list[int], target: list[int]) -> None:
    r = RA(current).reassign_to(target)
    assert r.target_replicas == tuple(target)
    assert sorted(r.origin_replicas) == sorted(current)  # same replicas; Kafka may reorder them
    assert len(set(r.replicas)) == len(r.replicas)
    assert r.reassign_to(r.target_replicas) == r
    assert r.reassign_to(current) == RA(current)


def test_leader_and_isr_epoch_and_version_rules() -> None:
    lai = LeaderAndIsr(5, 3, (5, 6), 7)
    moved = lai.new_leader_and_isr(6, [6])
    assert (moved.leader, moved.leader_epoch, moved.isr, moved.zk_version) == (6, 4, (6,), 7)
    assert lai.new_leader(6).isr == (5, 6)
    assert lai.new_epoch_and_zk_version() == LeaderAndIsr(5, 4, (5, 6), 7)
    assert lai.with_zk_version(9) == LeaderAndIsr(5, 3, (5, 6), 9)
    assert LeaderAndIsr.initial(5, [5]) == LeaderAndIsr(5, 0, (5,), 0)
    assert LeaderAndIsr.during_delete([1, 2]) == LeaderAndIsr(-2, 0, (1, 2), 0)
    assert lai.equals_ignore_zk(lai.with_zk_version(1))
    assert not lai.equals_ignore_zk(moved)


def test_names_print_like_kafka() -> None:
    tp = TopicPartition("t", 0)
    assert str(tp) == "t-0"
    assert str(PartitionAndReplica(tp, 5)) == "[Topic=t,Partition=0,Replica=5]"
