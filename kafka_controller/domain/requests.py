"""Controller-to-broker requests and their responses, as plain values (docs/controller-behaviour.md §6).

The batch (``core.request_batch``) builds these; the broker-channel port carries them; the
transport encodes them. Field names follow Kafka's request schemas in Python spelling.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import NamedTuple

from kafka_controller.domain.values import Broker, TopicPartition
from kafka_controller.hotpath import new_tuple


class Errors(StrEnum):
    """Kafka's protocol error names used between controller, brokers and admin clients."""

    NONE = "NONE"
    UNKNOWN_SERVER_ERROR = "UNKNOWN_SERVER_ERROR"
    NOT_CONTROLLER = "NOT_CONTROLLER"
    STALE_CONTROLLER_EPOCH = "STALE_CONTROLLER_EPOCH"
    STALE_BROKER_EPOCH = "STALE_BROKER_EPOCH"
    KAFKA_STORAGE_ERROR = "KAFKA_STORAGE_ERROR"
    UNKNOWN_TOPIC_OR_PARTITION = "UNKNOWN_TOPIC_OR_PARTITION"
    INVALID_TOPIC_EXCEPTION = "INVALID_TOPIC_EXCEPTION"
    INVALID_REPLICA_ASSIGNMENT = "INVALID_REPLICA_ASSIGNMENT"
    INVALID_REQUEST = "INVALID_REQUEST"
    INVALID_UPDATE_VERSION = "INVALID_UPDATE_VERSION"
    NO_REASSIGNMENT_IN_PROGRESS = "NO_REASSIGNMENT_IN_PROGRESS"
    ELECTION_NOT_NEEDED = "ELECTION_NOT_NEEDED"
    PREFERRED_LEADER_NOT_AVAILABLE = "PREFERRED_LEADER_NOT_AVAILABLE"
    ELIGIBLE_LEADERS_NOT_AVAILABLE = "ELIGIBLE_LEADERS_NOT_AVAILABLE"
    FENCED_LEADER_EPOCH = "FENCED_LEADER_EPOCH"
    BROKER_NOT_AVAILABLE = "BROKER_NOT_AVAILABLE"
    TOPIC_ALREADY_EXISTS = "TOPIC_ALREADY_EXISTS"
    TOPIC_DELETION_DISABLED = "TOPIC_DELETION_DISABLED"
    INVALID_CONFIG = "INVALID_CONFIG"
    REQUEST_TIMED_OUT = "REQUEST_TIMED_OUT"
    CLUSTER_AUTHORIZATION_FAILED = "CLUSTER_AUTHORIZATION_FAILED"


class LeaderAndIsrPartitionState(NamedTuple):
    topic: str
    partition: int
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    zk_version: int
    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    removing_replicas: tuple[int, ...]
    is_new: bool


class UpdateMetadataPartitionState(NamedTuple):
    topic: str
    partition: int
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    zk_version: int
    replicas: tuple[int, ...]
    offline_replicas: tuple[int, ...]


class StopReplicaPartitionState(NamedTuple):
    partition: int
    leader_epoch: int
    delete_partition: bool


# Positional constructors for the hot paths (the request batch, the transport's decoder): the
# objects ``cls(...)`` builds, by ``hotpath.new_tuple`` over the fields in declaration order.
def build_leader_and_isr_partition_state(
    topic: str,
    partition: int,
    controller_epoch: int,
    leader: int,
    leader_epoch: int,
    isr: tuple[int, ...],
    zk_version: int,
    replicas: tuple[int, ...],
    adding_replicas: tuple[int, ...],
    removing_replicas: tuple[int, ...],
    is_new: bool,
) -> LeaderAndIsrPartitionState:
    return new_tuple(
        LeaderAndIsrPartitionState,
        (
            topic, partition, controller_epoch, leader, leader_epoch, isr, zk_version, replicas,
            adding_replicas, removing_replicas, is_new,
        ),
    )  # fmt: skip


def build_update_metadata_partition_state(
    topic: str,
    partition: int,
    controller_epoch: int,
    leader: int,
    leader_epoch: int,
    isr: tuple[int, ...],
    zk_version: int,
    replicas: tuple[int, ...],
    offline_replicas: tuple[int, ...],
) -> UpdateMetadataPartitionState:
    return new_tuple(
        UpdateMetadataPartitionState,
        (
            topic,
            partition,
            controller_epoch,
            leader,
            leader_epoch,
            isr,
            zk_version,
            replicas,
            offline_replicas,
        ),
    )


def build_stop_replica_partition_state(
    partition: int, leader_epoch: int, delete_partition: bool
) -> StopReplicaPartitionState:
    return new_tuple(StopReplicaPartitionState, (partition, leader_epoch, delete_partition))


@dataclass(frozen=True, slots=True)
class LeaderAndIsrRequest:
    version: int
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    # A tuple when built; a decoded request's columns (``transport.state_columns``), equal to it.
    partition_states: Sequence[LeaderAndIsrPartitionState]
    topic_ids: dict[str, str] = field(default_factory=dict)
    live_leaders: tuple[Broker, ...] = ()


@dataclass(frozen=True, slots=True)
class UpdateMetadataRequest:
    version: int
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    # A tuple when built; a decoded request's columns (``transport.state_columns``), equal to it.
    partition_states: Sequence[UpdateMetadataPartitionState]
    live_brokers: tuple[Broker, ...]
    topic_ids: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class StopReplicaRequest:
    version: int
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    delete_partitions: bool
    partition_states: dict[TopicPartition, StopReplicaPartitionState]


ControlRequest = LeaderAndIsrRequest | UpdateMetadataRequest | StopReplicaRequest


@dataclass(frozen=True, slots=True)
class LeaderAndIsrResponse:
    error: Errors
    partition_errors: dict[TopicPartition, Errors] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class UpdateMetadataResponse:
    error: Errors


@dataclass(frozen=True, slots=True)
class StopReplicaResponse:
    error: Errors
    partition_errors: dict[TopicPartition, Errors] = field(default_factory=dict)


ControlResponse = LeaderAndIsrResponse | UpdateMetadataResponse | StopReplicaResponse
