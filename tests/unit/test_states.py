"""docs/controller-behaviour.md §1: byte values and the exact transition matrices."""

from __future__ import annotations

from kafka_controller.domain.states import PartitionState, ReplicaState

P = PartitionState
R = ReplicaState


def test_partition_state_bytes() -> None:
    assert [s.value for s in (P.NEW_PARTITION, P.ONLINE_PARTITION, P.OFFLINE_PARTITION)] == [0, 1, 2]
    assert P.NON_EXISTENT_PARTITION.value == 3


def test_replica_state_bytes_start_at_one() -> None:
    assert [s.value for s in R] == [1, 2, 3, 4, 5, 6, 7]


def test_partition_transition_matrix_is_the_codes_not_the_scaladocs() -> None:
    valid = {(f, t) for t in P for f in t.valid_previous_states}
    expected = {
        (P.NON_EXISTENT_PARTITION, P.NEW_PARTITION),
        (P.NEW_PARTITION, P.ONLINE_PARTITION),
        (P.NEW_PARTITION, P.OFFLINE_PARTITION),
        (P.ONLINE_PARTITION, P.ONLINE_PARTITION),
        (P.ONLINE_PARTITION, P.OFFLINE_PARTITION),
        (P.OFFLINE_PARTITION, P.ONLINE_PARTITION),
        (P.OFFLINE_PARTITION, P.OFFLINE_PARTITION),  # allowed by the code, not by the scaladoc
        (P.OFFLINE_PARTITION, P.NON_EXISTENT_PARTITION),
    }
    assert valid == expected


def test_replica_transition_matrix() -> None:
    valid = {(f, t) for t in R for f in t.valid_previous_states}
    online_like = {R.NEW_REPLICA, R.ONLINE_REPLICA, R.OFFLINE_REPLICA, R.REPLICA_DELETION_INELIGIBLE}
    expected = {(R.NON_EXISTENT_REPLICA, R.NEW_REPLICA)}
    expected |= {(f, R.ONLINE_REPLICA) for f in online_like}
    expected |= {(f, R.OFFLINE_REPLICA) for f in online_like}
    expected |= {
        (R.OFFLINE_REPLICA, R.REPLICA_DELETION_STARTED),
        (R.REPLICA_DELETION_STARTED, R.REPLICA_DELETION_SUCCESSFUL),
        (R.OFFLINE_REPLICA, R.REPLICA_DELETION_INELIGIBLE),
        (R.REPLICA_DELETION_STARTED, R.REPLICA_DELETION_INELIGIBLE),
        (R.REPLICA_DELETION_SUCCESSFUL, R.NON_EXISTENT_REPLICA),
    }
    assert valid == expected
    assert len(valid) == 14


def test_kafka_names() -> None:
    assert str(P.ONLINE_PARTITION) == "OnlinePartition"
    assert str(R.REPLICA_DELETION_INELIGIBLE) == "ReplicaDeletionIneligible"
