"""Partition and replica states with Kafka's byte values and exact valid previous states
(docs/controller-behaviour.md §1; Kafka's ``PartitionStateMachine.scala``, ``ReplicaStateMachine.scala``).

The sets are the code's, not the scaladoc's: OfflinePartition accepts Offline -> Offline.
"""

from __future__ import annotations

from enum import Enum

from kafka_controller.hotpath import identity_hash


class PartitionState(Enum):
    NEW_PARTITION = 0
    ONLINE_PARTITION = 1
    OFFLINE_PARTITION = 2
    NON_EXISTENT_PARTITION = 3

    # state checks against frozensets run once per partition in every transition
    __hash__ = identity_hash

    @property
    def valid_previous_states(self) -> frozenset[PartitionState]:
        return _PARTITION_PREVIOUS[self]

    @property
    def kafka_name(self) -> str:
        return _KAFKA_NAMES[self]

    def __str__(self) -> str:
        return self.kafka_name


_PS = PartitionState
_PARTITION_PREVIOUS: dict[PartitionState, frozenset[PartitionState]] = {
    _PS.NEW_PARTITION: frozenset({_PS.NON_EXISTENT_PARTITION}),
    _PS.ONLINE_PARTITION: frozenset({_PS.NEW_PARTITION, _PS.ONLINE_PARTITION, _PS.OFFLINE_PARTITION}),
    _PS.OFFLINE_PARTITION: frozenset({_PS.NEW_PARTITION, _PS.ONLINE_PARTITION, _PS.OFFLINE_PARTITION}),
    _PS.NON_EXISTENT_PARTITION: frozenset({_PS.OFFLINE_PARTITION}),
}


class ReplicaState(Enum):
    NEW_REPLICA = 1
    ONLINE_REPLICA = 2
    OFFLINE_REPLICA = 3
    REPLICA_DELETION_STARTED = 4
    REPLICA_DELETION_SUCCESSFUL = 5
    REPLICA_DELETION_INELIGIBLE = 6
    NON_EXISTENT_REPLICA = 7

    __hash__ = identity_hash

    @property
    def valid_previous_states(self) -> frozenset[ReplicaState]:
        return _REPLICA_PREVIOUS[self]

    @property
    def kafka_name(self) -> str:
        return _KAFKA_NAMES[self]

    def __str__(self) -> str:
        return self.kafka_name


_RS = ReplicaState
_REPLICA_PREVIOUS: dict[ReplicaState, frozenset[ReplicaState]] = {
    _RS.NEW_REPLICA: frozenset({_RS.NON_EXISTENT_REPLICA}),
    _RS.ONLINE_REPLICA: frozenset(
        {_RS.NEW_REPLICA, _RS.ONLINE_REPLICA, _RS.OFFLINE_REPLICA, _RS.REPLICA_DELETION_INELIGIBLE}
    ),
    _RS.OFFLINE_REPLICA: frozenset(
        {_RS.NEW_REPLICA, _RS.ONLINE_REPLICA, _RS.OFFLINE_REPLICA, _RS.REPLICA_DELETION_INELIGIBLE}
    ),
    _RS.REPLICA_DELETION_STARTED: frozenset({_RS.OFFLINE_REPLICA}),
    _RS.REPLICA_DELETION_SUCCESSFUL: frozenset({_RS.REPLICA_DELETION_STARTED}),
    _RS.REPLICA_DELETION_INELIGIBLE: frozenset({_RS.OFFLINE_REPLICA, _RS.REPLICA_DELETION_STARTED}),
    _RS.NON_EXISTENT_REPLICA: frozenset({_RS.REPLICA_DELETION_SUCCESSFUL}),
}

_KAFKA_NAMES: dict[PartitionState | ReplicaState, str] = {
    _PS.NEW_PARTITION: "NewPartition",
    _PS.ONLINE_PARTITION: "OnlinePartition",
    _PS.OFFLINE_PARTITION: "OfflinePartition",
    _PS.NON_EXISTENT_PARTITION: "NonExistentPartition",
    _RS.NEW_REPLICA: "NewReplica",
    _RS.ONLINE_REPLICA: "OnlineReplica",
    _RS.OFFLINE_REPLICA: "OfflineReplica",
    _RS.REPLICA_DELETION_STARTED: "ReplicaDeletionStarted",
    _RS.REPLICA_DELETION_SUCCESSFUL: "ReplicaDeletionSuccessful",
    _RS.REPLICA_DELETION_INELIGIBLE: "ReplicaDeletionIneligible",
    _RS.NON_EXISTENT_REPLICA: "NonExistentReplica",
}
