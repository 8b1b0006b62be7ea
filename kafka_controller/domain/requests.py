"""Controller-to-broker requests and their responses, as plain values (docs/controller-behaviour.md §6).

The batch (``core.request_batch``) builds these; the broker-channel port carries them; the
transport encodes them. Field names follow Kafka's request schemas in Python spelling.
"""

from __future__ import annotations

from collections.abc import ItemsView, Iterator, KeysView, Mapping, Sequence, ValuesView
from dataclasses import dataclass, field
from enum import StrEnum
from typing import NamedTuple

from kafka_controller.domain.values import Broker, TopicPartition, topic_partitions
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


class PartitionErrors(Mapping[TopicPartition, Errors]):
    """A response's error per partition, kept as its decoder read it: dictionary-encoded columns
    (indexes into a topic table and an error table, ``transport.codec``), made a dict on first use.

    Why: after a failover each broker answers LeaderAndIsr with an error for every partition it
    was sent (60,000 at RF 3), and the controller only asks whether one error, KAFKA_STORAGE_ERROR,
    is among them (``error in errors.values()``). Building 60,000 keys and a dict for that cost
    12-40 ms per response on a channel thread, under the GIL the failover's event thread needs.
    ``values()``'s membership test answers from the error table when no entry lists the error, or
    every entry does, exactly as the dict would (where a partition is listed twice the dict keeps
    its last error; any other question builds the dict). The decoder checks the columns (lengths,
    types, indexes within their tables) before it makes one.
    """

    __slots__ = ("_built", "_error_codes", "_errors", "_partitions", "_topic_codes", "_topics")

    def __init__(
        self,
        topics: Sequence[str],
        topic_codes: Sequence[int],
        partitions: Sequence[int],
        errors: Sequence[Errors],
        error_codes: Sequence[int],
    ) -> None:
        self._topics = topics
        self._topic_codes = topic_codes
        self._partitions = partitions
        self._errors = errors
        self._error_codes = error_codes
        self._built: dict[TopicPartition, Errors] | None = None

    def _dict(self) -> dict[TopicPartition, Errors]:
        built = self._built
        if built is None:
            names = map(self._topics.__getitem__, self._topic_codes)
            errors = map(self._errors.__getitem__, self._error_codes)
            built = self._built = dict(zip(topic_partitions(names, self._partitions), errors, strict=True))
        return built

    def listed_errors(self) -> frozenset[Errors]:
        """The errors some entry lists, without building the dict (a superset of its values only
        where a partition is listed twice with different errors)."""
        if self._built is not None:
            return frozenset(self._built.values())
        return frozenset(map(self._errors.__getitem__, set(self._error_codes)))

    def __getitem__(self, key: TopicPartition) -> Errors:
        return self._dict()[key]

    def __iter__(self) -> Iterator[TopicPartition]:
        return iter(self._dict())

    def __len__(self) -> int:
        return len(self._dict())

    def __contains__(self, key: object) -> bool:
        return key in self._dict()

    def keys(self) -> KeysView[TopicPartition]:
        return self._dict().keys()

    def items(self) -> ItemsView[TopicPartition, Errors]:
        return self._dict().items()

    def values(self) -> ValuesView[Errors]:
        return _ListedErrors(self)

    def __repr__(self) -> str:
        return f"PartitionErrors({self._dict()!r})"


class _ListedErrors(ValuesView[Errors]):
    """``PartitionErrors.values()``: an error no entry lists is answered absent from the columns."""

    _mapping: PartitionErrors

    def __contains__(self, value: object) -> bool:
        errors = self._mapping
        listed = errors.listed_errors()
        if value not in listed:
            return False
        if len(listed) == 1:  # every entry lists it (a failover's answers: NONE everywhere)
            return True
        return value in errors._dict().values()

    def __iter__(self) -> Iterator[Errors]:
        return iter(self._mapping._dict().values())


@dataclass(frozen=True, slots=True)
class LeaderAndIsrResponse:
    """``partition_errors``: a dict where built here, a ``PartitionErrors`` where decoded."""

    error: Errors
    partition_errors: Mapping[TopicPartition, Errors] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class UpdateMetadataResponse:
    error: Errors


@dataclass(frozen=True, slots=True)
class StopReplicaResponse:
    error: Errors
    partition_errors: Mapping[TopicPartition, Errors] = field(default_factory=dict)


ControlResponse = LeaderAndIsrResponse | UpdateMetadataResponse | StopReplicaResponse
