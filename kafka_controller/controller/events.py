"""Every controller event of Kafka 2.8 (docs/controller-behaviour.md §8.1), with its state and its
preempt behaviour.

An event is only data: the controller's ``process`` dispatches on its type. Events that someone
waits on (admin requests, controlled shutdown) carry a callback, and their ``preempt`` answers it
with NOT_CONTROLLER (or ``ControllerMovedError``) when the queue is cleared on resignation or
shutdown, so no caller hangs (KAFKA-10193). Admin events also carry the ``operation_id`` of the
audit-store operation that caused them; the auditing decorator tags their transitions with it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, ClassVar

from kafka_controller.controller.controller_state import ControllerState
from kafka_controller.controller.event_manager import ControllerEvent
from kafka_controller.domain.errors import ControllerMovedError, InvalidArgumentError
from kafka_controller.domain.requests import (
    Errors,
    LeaderAndIsrResponse,
    UpdateMetadataResponse,
)
from kafka_controller.domain.values import LeaderAndIsr, ReplicaAssignment, TopicPartition

_S = ControllerState


class ElectionType(Enum):
    PREFERRED = "preferred"
    UNCLEAN = "unclean"

    @staticmethod
    def parse(value: ElectionType | str) -> ElectionType:
        if isinstance(value, ElectionType):
            return value
        try:
            return ElectionType(str(value).strip().lower())
        except ValueError:
            raise InvalidArgumentError(
                f"invalid election type {value!r}: expected 'preferred' or 'unclean'"
            ) from None


class ElectionTrigger(Enum):
    ZK_TRIGGERED = "ZkTriggered"
    ADMIN_CLIENT_TRIGGERED = "AdminClientTriggered"
    AUTO_TRIGGERED = "AutoTriggered"


@dataclass(frozen=True, slots=True)
class ApiError:
    """Kafka's ``ApiError``: a protocol error with an optional message (``NONE`` = success)."""

    error: Errors
    message: str | None = None

    @property
    def is_success(self) -> bool:
        return self.error is Errors.NONE

    def __str__(self) -> str:
        return self.error.value if self.message is None else f"{self.error.value}: {self.message}"


API_ERROR_NONE = ApiError(Errors.NONE)

#: ``{partition: new leader id or the error}`` (Kafka's ``Map[tp, Either[ApiError, Int]]``).
ElectLeadersCallback = Callable[[dict[TopicPartition, "int | ApiError"]], None]
#: Per-partition results, or one top-level error (NOT_CONTROLLER).
AlterReassignmentsCallback = Callable[["dict[TopicPartition, ApiError] | ApiError"], None]
ListReassignmentsCallback = Callable[["dict[TopicPartition, ReplicaAssignment] | ApiError"], None]
#: The partitions the broker still leads, or the failure (Kafka's ``Try[Set[TopicPartition]]``).
ControlledShutdownCallback = Callable[["set[TopicPartition] | Exception"], None]
#: Per-partition new state or error, or one top-level error (NOT_CONTROLLER, STALE_BROKER_EPOCH).
AlterIsrCallback = Callable[["dict[TopicPartition, LeaderAndIsr | Errors] | Errors"], None]
#: The columnar document of ``core.context_description``, or one top-level error (NOT_CONTROLLER).
DescribeControllerContextCallback = Callable[["dict[str, Any] | ApiError"], None]


class _Plain(ControllerEvent):
    """An event without data; its name is the class name, as Kafka's case objects print."""

    def __repr__(self) -> str:
        return type(self).__name__


# -- controller change ------------------------------------------------------------------------------
class Startup(_Plain):
    state = _S.CONTROLLER_CHANGE


class ControllerChange(_Plain):
    state = _S.CONTROLLER_CHANGE


class Reelect(_Plain):
    """``/controller`` was deleted. ``controller_gone_ms`` is when the watch fired: the new
    controller's first sign that the old one is gone, the start of the outage its failover ends."""

    state = _S.CONTROLLER_CHANGE

    def __init__(self, controller_gone_ms: int | None = None) -> None:
        self.controller_gone_ms = controller_gone_ms


class RegisterBrokerAndReelect(_Plain):
    state = _S.CONTROLLER_CHANGE


class SessionReconnected(_Plain):
    """Not a Kafka event: the session reconnected after SUSPENDED (the same session). Kafka's
    ZooKeeper requests wait for the connection; ours fail fast, so an event handled meanwhile may
    have stopped half-way. Idle: no Kafka rate-and-time timer counts it."""

    state = _S.IDLE


class Expire(_Plain):
    state = _S.CONTROLLER_CHANGE


# -- brokers ------------------------------------------------------------------------------------------
class BrokerChange(_Plain):
    state = _S.BROKER_CHANGE


@dataclass(eq=False)
class BrokerModifications(ControllerEvent):
    state: ClassVar[ControllerState] = _S.BROKER_CHANGE
    broker_id: int


@dataclass(eq=False)
class LeaderAndIsrResponseReceived(ControllerEvent):
    state: ClassVar[ControllerState] = _S.LEADER_AND_ISR_RESPONSE_RECEIVED
    response: LeaderAndIsrResponse
    broker_id: int


@dataclass(eq=False)
class UpdateMetadataResponseReceived(ControllerEvent):
    state: ClassVar[ControllerState] = _S.UPDATE_METADATA_RESPONSE_RECEIVED
    response: UpdateMetadataResponse
    broker_id: int


class LogDirEventNotification(_Plain):
    state = _S.LOG_DIR_CHANGE


# -- topics --------------------------------------------------------------------------------------------
class TopicChange(_Plain):
    state = _S.TOPIC_CHANGE


@dataclass(eq=False)
class PartitionModifications(ControllerEvent):
    state: ClassVar[ControllerState] = _S.TOPIC_CHANGE
    topic: str


class TopicDeletion(_Plain):
    state = _S.TOPIC_DELETION


@dataclass(eq=False)
class TopicDeletionStopReplicaResponseReceived(ControllerEvent):
    state: ClassVar[ControllerState] = _S.TOPIC_DELETION
    replica_id: int
    request_error: Errors
    partition_errors: dict[TopicPartition, Errors]


# -- reassignment ------------------------------------------------------------------------------------
class ZkPartitionReassignment(_Plain):
    state = _S.ALTER_PARTITION_REASSIGNMENT


@dataclass(eq=False)
class ApiPartitionReassignment(ControllerEvent):
    """``reassignments[tp]`` is the target replicas, or None to cancel."""

    state: ClassVar[ControllerState] = _S.ALTER_PARTITION_REASSIGNMENT
    reassignments: Mapping[TopicPartition, Sequence[int] | None]
    callback: AlterReassignmentsCallback
    operation_id: str | None = None

    def preempt(self) -> None:
        self.callback(ApiError(Errors.NOT_CONTROLLER))


@dataclass(eq=False)
class PartitionReassignmentIsrChange(ControllerEvent):
    state: ClassVar[ControllerState] = _S.ALTER_PARTITION_REASSIGNMENT
    partition: TopicPartition


@dataclass(eq=False)
class ListPartitionReassignments(ControllerEvent):
    state: ClassVar[ControllerState] = _S.LIST_PARTITION_REASSIGNMENT
    partitions: Collection[TopicPartition] | None
    callback: ListReassignmentsCallback
    operation_id: str | None = None

    def preempt(self) -> None:
        self.callback(ApiError(Errors.NOT_CONTROLLER))


@dataclass(eq=False)
class DescribeControllerContext(ControllerEvent):
    """This project's read-only admin request (Kafka has none): the whole context, described on
    the event thread so that it is one consistent moment. Its state is Idle: it changes nothing,
    and a state of its own would add a metric Kafka does not have."""

    state: ClassVar[ControllerState] = _S.IDLE
    callback: DescribeControllerContextCallback

    def preempt(self) -> None:
        self.callback(ApiError(Errors.NOT_CONTROLLER))


# -- leader elections ----------------------------------------------------------------------------------
class AutoPreferredReplicaLeaderElection(_Plain):
    state = _S.AUTO_LEADER_BALANCE


@dataclass(eq=False)
class ReplicaLeaderElection(ControllerEvent):
    """``partitions`` None: only those named by ``/admin/preferred_replica_election`` (ZK trigger)."""

    state: ClassVar[ControllerState] = _S.MANUAL_LEADER_BALANCE
    partitions: Collection[TopicPartition] | None
    election_type: ElectionType
    trigger: ElectionTrigger
    callback: ElectLeadersCallback = field(default=lambda _results: None)
    operation_id: str | None = None

    def preempt(self) -> None:
        error = ApiError(Errors.NOT_CONTROLLER)
        self.callback(dict.fromkeys(self.partitions or (), error))


@dataclass(eq=False)
class ControlledShutdown(ControllerEvent):
    state: ClassVar[ControllerState] = _S.CONTROLLED_SHUTDOWN
    broker_id: int
    broker_epoch: int
    callback: ControlledShutdownCallback
    operation_id: str | None = None

    def preempt(self) -> None:
        self.callback(ControllerMovedError("Controller moved to another broker"))


class UncleanLeaderElectionEnable(_Plain):
    state = _S.UNCLEAN_LEADER_ELECTION_ENABLE


@dataclass(eq=False)
class TopicUncleanLeaderElectionEnable(ControllerEvent):
    state: ClassVar[ControllerState] = _S.TOPIC_UNCLEAN_LEADER_ELECTION_ENABLE
    topic: str


@dataclass(eq=False)
class DynamicBrokerConfigChange(ControllerEvent):
    """``/config/brokers/<default>`` or ``/config/brokers/<this id>`` changed; each level is the
    znode's config as read, or None to keep the controller's last known one (unreadable).

    Not a Kafka event (there the broker's ``DynamicBrokerConfig`` updates the shared config object
    directly): Idle, so that no Kafka rate-and-time timer counts it. A default raised to unclean
    goes on as Kafka's UncleanLeaderElectionEnable."""

    state: ClassVar[ControllerState] = _S.IDLE
    cluster_default: Mapping[str, str] | None
    per_broker: Mapping[str, str] | None


# -- ISR -----------------------------------------------------------------------------------------------
class IsrChangeNotification(_Plain):
    state = _S.ISR_CHANGE


@dataclass(eq=False)
class AlterIsrReceived(ControllerEvent):
    """``isrs[tp]``: the leader's requested state (leader epoch, new ISR, the zk version it read)."""

    state: ClassVar[ControllerState] = _S.ISR_CHANGE
    broker_id: int
    broker_epoch: int
    isrs: Mapping[TopicPartition, LeaderAndIsr]
    callback: AlterIsrCallback
    operation_id: str | None = None

    def preempt(self) -> None:
        self.callback(Errors.NOT_CONTROLLER)

    def supersede_key(self) -> Hashable:
        """A broker has one AlterIsr in flight and resends what is pending only after giving up
        on it (``broker.alter_isr``), so its newer request replaces its queued older one."""
        return ("AlterIsr", self.broker_id)


# -- features, tests -----------------------------------------------------------------------------------
@dataclass(eq=False)
class UpdateFeatures(ControllerEvent):
    """KIP-584's UpdateFeatures: not supported by this controller (2.8 finalizes no features);
    answered INVALID_REQUEST."""

    state: ClassVar[ControllerState] = _S.UPDATE_FEATURES
    updates: Mapping[str, int]
    callback: Callable[[ApiError], None]
    operation_id: str | None = None


class MockEvent(ControllerEvent):
    """Kafka's ``MockEvent``: runs ``action`` on the event thread (tests, barriers), or
    ``on_preempt`` if it is preempted instead."""

    def __init__(
        self,
        action: Callable[[], None],
        state: ControllerState = _S.IDLE,
        on_preempt: Callable[[], None] | None = None,
    ) -> None:
        self.action = action
        self.on_preempt = on_preempt
        self.state = state  # type: ignore[misc]

    def process(self) -> None:
        self.action()

    def preempt(self) -> None:
        if self.on_preempt is not None:
            self.on_preempt()

    def __repr__(self) -> str:
        return f"MockEvent({self.state})"


def event_name(event: ControllerEvent) -> str:
    """The event's Kafka name (``BrokerChange``, ``ReplicaLeaderElection``) for logs and audit."""
    return type(event).__name__
