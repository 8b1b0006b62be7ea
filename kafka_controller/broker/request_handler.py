"""Every request a broker serves (Kafka's ``KafkaApis``), dispatched by API name.

* Control requests from the controller: the broker-epoch check first (a known epoch smaller than
  this broker's current one is STALE_BROKER_EPOCH, whole request; -1 skips it, KIP-380), then a
  controller epoch newer than this broker knows is checked against ZooKeeper (``epoch_guard``;
  not Kafka's), then the replica manager's controller-epoch and leader-epoch fencing, or the
  metadata cache.
* Fetch from followers: the data plane.
* Controller APIs (ControlledShutdown, AlterIsr, ElectLeaders, partition reassignments,
  DescribeControllerContext): handed to the local controller candidate when it is the active
  controller, else NOT_CONTROLLER. The controller only enqueues; this thread waits for the event's
  callback, bounded by ``controller_timeout_s`` or the request's shorter ``timeout_ms`` (then
  REQUEST_TIMED_OUT).
* DescribeReplicas, Metadata, ShutdownBroker: answered from this broker's own state.

Runs on transport connection threads, several at once: everything it touches is locked by its
owner (replica manager, metadata cache) or only enqueues (controller).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, Protocol

from kafka_controller.broker import apis as A
from kafka_controller.broker.data_plane import DataPlane
from kafka_controller.broker.epoch_guard import ControllerEpochGuard
from kafka_controller.broker.metadata_cache import MetadataCache
from kafka_controller.broker.replica_manager import ReplicaManager
from kafka_controller.domain.errors import (
    BrokerNotAvailableError,
    ControllerMovedError,
    InvalidArgumentError,
    StaleBrokerEpochError,
    UnansweredRequestError,
    brief,
)
from kafka_controller.domain.requests import (
    ControlRequest,
    Errors,
    LeaderAndIsrRequest,
    StopReplicaRequest,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)
from kafka_controller.domain.values import UNKNOWN_BROKER_EPOCH, LeaderAndIsr, TopicPartition
from kafka_controller.transport.codec import LEADER_AND_ISR, STOP_REPLICA, UPDATE_METADATA, error_response
from kafka_controller.transport.errors import ProtocolError
from kafka_controller.transport.server import current_peer

log = logging.getLogger(__name__)


class ControllerEntryPoints(Protocol):
    """The entry points of ``KafkaController`` this handler calls; each only enqueues."""

    @property
    def is_active(self) -> bool: ...

    def controlled_shutdown(
        self,
        broker_id: int,
        broker_epoch: int,
        callback: Callable[[Any], None],
        operation_id: str | None = None,
    ) -> Any: ...

    def alter_isr(
        self,
        broker_id: int,
        broker_epoch: int,
        isrs: Mapping[TopicPartition, LeaderAndIsr],
        callback: Callable[[Any], None],
    ) -> Any: ...

    def elect_leaders(
        self,
        partitions: Collection[TopicPartition] | None,
        election_type: str,
        callback: Callable[[Any], None],
        operation_id: str | None = None,
    ) -> Any: ...

    def alter_partition_reassignments(
        self,
        reassignments: Mapping[TopicPartition, Sequence[int] | None],
        callback: Callable[[Any], None],
        operation_id: str | None = None,
    ) -> Any: ...

    def list_partition_reassignments(
        self, partitions: Collection[TopicPartition] | None, callback: Callable[[Any], None]
    ) -> Any: ...

    def describe_controller_context(self, callback: Callable[[Any], None]) -> Any: ...


class _Reply:
    """A one-shot slot the controller's callback fills from its event thread."""

    def __init__(self) -> None:
        self._done = threading.Event()
        self.value: Any = None

    def __call__(self, value: Any) -> None:
        if not self._done.is_set():
            self.value = value
            self._done.set()

    def wait(self, timeout_s: float) -> bool:
        return self._done.wait(timeout_s)


class BrokerRequestHandler:
    """``handle(api, request)`` is the ``TransportServer`` handler of one broker."""

    def __init__(
        self,
        broker_id: int,
        broker_epoch: Callable[[], int],
        replica_manager: ReplicaManager,
        metadata_cache: MetadataCache,
        data_plane: DataPlane,
        *,
        controller: ControllerEntryPoints | None = None,
        controller_timeout_s: float = 30.0,
        on_shutdown_requested: Callable[[], None] | None = None,
        epoch_guard: ControllerEpochGuard | None = None,
    ) -> None:
        """``epoch_guard``: checks a newer controller epoch against ZooKeeper (None: trusted, as
        Kafka does; unit tests without a ZooKeeper)."""
        self.broker_id = broker_id
        self.broker_epoch = broker_epoch
        self.replica_manager = replica_manager
        self.metadata_cache = metadata_cache
        self.data_plane = data_plane
        self.controller = controller
        self.controller_timeout_s = controller_timeout_s
        self.on_shutdown_requested = on_shutdown_requested
        self.epoch_guard = epoch_guard
        self._routes: dict[str, Callable[[Any], Any]] = {
            LEADER_AND_ISR: self._leader_and_isr,
            UPDATE_METADATA: self._update_metadata,
            STOP_REPLICA: self._stop_replica,
            A.FETCH: self.data_plane.handle_fetch,
            A.CONTROLLED_SHUTDOWN: self._controlled_shutdown,
            A.ALTER_ISR: self._alter_isr,
            A.ELECT_LEADERS: self._elect_leaders,
            A.ALTER_PARTITION_REASSIGNMENTS: self._alter_reassignments,
            A.LIST_PARTITION_REASSIGNMENTS: self._list_reassignments,
            A.DESCRIBE_CONTROLLER_CONTEXT: self._describe_controller_context,
            A.DESCRIBE_REPLICAS: self._describe_replicas,
            A.METADATA: self._metadata,
            A.SHUTDOWN_BROKER: self._shutdown_broker,
        }

    def handle(self, api: str, request: Any) -> Any:
        route = self._routes.get(api)
        if route is None:
            raise ProtocolError(f"broker {self.broker_id} does not serve {brief(api)}")
        return route(request)

    # -- control requests ----------------------------------------------------------------------------
    def _is_broker_epoch_stale(self, request: ControlRequest) -> bool:
        epoch = request.broker_epoch
        return epoch != UNKNOWN_BROKER_EPOCH and epoch < self.broker_epoch()

    def _refuse_stale(self, request: ControlRequest) -> Any:
        log.info(
            "Refusing %s from controller %d: broker epoch %d is older than the current %d",
            type(request).__name__,
            request.controller_id,
            request.broker_epoch,
            self.broker_epoch(),
        )
        return error_response(request, Errors.STALE_BROKER_EPOCH)

    def _refusal(self, request: ControlRequest) -> Any | None:
        """The whole-request refusal of a stale broker epoch or of a controller epoch ZooKeeper
        does not back, or None when the request may go on."""
        if self._is_broker_epoch_stale(request):
            return self._refuse_stale(request)
        guard = self.epoch_guard
        if guard is None:
            return None
        api = type(request).__name__.removesuffix("Request")
        try:
            why = guard.unbacked(request.controller_epoch, self.replica_manager.controller_epoch)
        except UnansweredRequestError as e:  # the server closes the connection; the controller resends
            unchecked = f"{e}; closing the connection so that it is sent again"
            guard.log_refusal(api, current_peer(), request.controller_id, request.controller_epoch, unchecked)
            raise
        if why is None:
            return None
        guard.log_refusal(api, current_peer(), request.controller_id, request.controller_epoch, why)
        return error_response(request, Errors.STALE_CONTROLLER_EPOCH)

    def _leader_and_isr(self, request: LeaderAndIsrRequest) -> Any:
        if (refused := self._refusal(request)) is not None:
            return refused
        return self.replica_manager.become_leader_or_follower(request)

    def _stop_replica(self, request: StopReplicaRequest) -> Any:
        if (refused := self._refusal(request)) is not None:
            return refused
        return self.replica_manager.stop_replicas(request)

    def _update_metadata(self, request: UpdateMetadataRequest) -> Any:
        if (refused := self._refusal(request)) is not None:
            return refused
        if not self.replica_manager.check_controller_epoch(request.controller_epoch, request.controller_id):
            log.warning(
                "Refusing UpdateMetadata from controller %d with stale epoch %d",
                request.controller_id,
                request.controller_epoch,
            )
            return UpdateMetadataResponse(Errors.STALE_CONTROLLER_EPOCH)
        self.metadata_cache.update_metadata(request)
        return UpdateMetadataResponse(Errors.NONE)

    # -- controller APIs -------------------------------------------------------------------------------
    def _active_controller(self) -> ControllerEntryPoints | None:
        controller = self.controller
        return controller if controller is not None and controller.is_active else None

    def _call(self, start: Callable[[_Reply], Any], timeout_s: float | None = None) -> tuple[bool, Any]:
        """Start a controller request and wait for its answer (at most ``controller_timeout_s``,
        or ``timeout_s`` if shorter): ``(answered, value)``."""
        reply = _Reply()
        start(reply)
        limit = self.controller_timeout_s if timeout_s is None else min(timeout_s, self.controller_timeout_s)
        if not reply.wait(limit):
            return False, None
        return True, reply.value

    def _controlled_shutdown(self, r: A.ControlledShutdownRequest) -> A.ControlledShutdownResponse:
        controller = self._active_controller()
        if controller is None:
            return A.ControlledShutdownResponse(Errors.NOT_CONTROLLER)
        answered, value = self._call(
            lambda cb: controller.controlled_shutdown(r.broker_id, r.broker_epoch, cb, r.operation_id)
        )
        if not answered:
            return A.ControlledShutdownResponse(Errors.REQUEST_TIMED_OUT)
        if isinstance(value, Exception):
            return A.ControlledShutdownResponse(_error_for(value), message=str(value) or None)
        return A.ControlledShutdownResponse(Errors.NONE, tuple(sorted(value)))

    def _alter_isr(self, r: A.AlterIsrRequest) -> A.AlterIsrResponse:
        controller = self._active_controller()
        if controller is None:
            return A.AlterIsrResponse(Errors.NOT_CONTROLLER)
        answered, value = self._call(lambda cb: controller.alter_isr(r.broker_id, r.broker_epoch, r.isrs, cb))
        if not answered:
            return A.AlterIsrResponse(Errors.REQUEST_TIMED_OUT)
        if not isinstance(value, dict):
            return A.AlterIsrResponse(str(value))
        return A.AlterIsrResponse(
            Errors.NONE, {tp: v if isinstance(v, LeaderAndIsr) else str(v) for tp, v in value.items()}
        )

    def _elect_leaders(self, r: A.ElectLeadersRequest) -> A.ElectLeadersResponse:
        controller = self._active_controller()
        if controller is None:
            return A.ElectLeadersResponse(Errors.NOT_CONTROLLER)
        try:
            answered, value = self._call(
                lambda cb: controller.elect_leaders(r.partitions, r.election_type, cb, r.operation_id)
            )
        except InvalidArgumentError as e:
            return A.ElectLeadersResponse(Errors.INVALID_REQUEST, message=str(e))
        if not answered:
            return A.ElectLeadersResponse(Errors.REQUEST_TIMED_OUT)
        results = {}
        for tp, outcome in value.items():
            if isinstance(outcome, int):
                results[tp] = A.PartitionElectionResult(Errors.NONE, outcome)
            else:
                results[tp] = A.PartitionElectionResult(str(outcome.error), -1, outcome.message)
        if results and all(x.error == Errors.NOT_CONTROLLER for x in results.values()):
            return A.ElectLeadersResponse(Errors.NOT_CONTROLLER)  # preempted: let the client retry
        return A.ElectLeadersResponse(Errors.NONE, results)

    def _alter_reassignments(
        self, r: A.AlterPartitionReassignmentsRequest
    ) -> A.AlterPartitionReassignmentsResponse:
        controller = self._active_controller()
        if controller is None:
            return A.AlterPartitionReassignmentsResponse(Errors.NOT_CONTROLLER)
        try:
            answered, value = self._call(
                lambda cb: controller.alter_partition_reassignments(r.reassignments, cb, r.operation_id)
            )
        except InvalidArgumentError as e:
            return A.AlterPartitionReassignmentsResponse(Errors.INVALID_REQUEST, message=str(e))
        if not answered:
            return A.AlterPartitionReassignmentsResponse(Errors.REQUEST_TIMED_OUT)
        if not isinstance(value, dict):
            return A.AlterPartitionReassignmentsResponse(str(value.error), message=value.message)
        results = {tp: A.ReassignmentResult(str(e.error), e.message) for tp, e in value.items()}
        return A.AlterPartitionReassignmentsResponse(Errors.NONE, results)

    def _list_reassignments(
        self, r: A.ListPartitionReassignmentsRequest
    ) -> A.ListPartitionReassignmentsResponse:
        controller = self._active_controller()
        if controller is None:
            return A.ListPartitionReassignmentsResponse(Errors.NOT_CONTROLLER)
        answered, value = self._call(lambda cb: controller.list_partition_reassignments(r.partitions, cb))
        if not answered:
            return A.ListPartitionReassignmentsResponse(Errors.REQUEST_TIMED_OUT)
        if not isinstance(value, dict):
            return A.ListPartitionReassignmentsResponse(str(value.error), message=value.message)
        return A.ListPartitionReassignmentsResponse(Errors.NONE, value)

    def _describe_controller_context(
        self, r: A.DescribeControllerContextRequest
    ) -> A.DescribeControllerContextResponse:
        controller = self._active_controller()
        if controller is None:
            return A.DescribeControllerContextResponse(Errors.NOT_CONTROLLER)
        timeout_s = None if r.timeout_ms is None else r.timeout_ms / 1000
        answered, value = self._call(controller.describe_controller_context, timeout_s)
        if not answered:
            return A.DescribeControllerContextResponse(Errors.REQUEST_TIMED_OUT)
        if not isinstance(value, dict):
            return A.DescribeControllerContextResponse(str(value.error), message=value.message)
        return A.DescribeControllerContextResponse(Errors.NONE, value)

    # -- local APIs --------------------------------------------------------------------------------------
    def _describe_replicas(self, tps: tuple[TopicPartition, ...] | None) -> A.DescribeReplicasResponse:
        rm = self.replica_manager
        with rm.lock:
            now = rm.now_ms()
            infos = tuple(
                A.ReplicaInfo(
                    p.tp.topic,
                    p.tp.partition,
                    p.leader,
                    p.leader_epoch,
                    p.isr,
                    p.zk_version,
                    p.replicas,
                    p.is_leader,
                    p.log_end_offset(now),
                    p.high_watermark(now),
                )
                for p in rm.snapshot(tps)
            )
            epoch = rm.controller_epoch
            acted_on = tuple((e, tuple(sorted(ids))) for e, ids in sorted(rm.acted_on.items()))
        return A.DescribeReplicasResponse(
            Errors.NONE, self.broker_id, self.broker_epoch(), epoch, infos, acted_on
        )

    def _metadata(self, _request: Any) -> A.MetadataCacheResponse:
        cache = self.metadata_cache
        return A.MetadataCacheResponse(
            Errors.NONE, cache.controller_id, tuple(cache.alive_brokers()), tuple(cache.partition_states())
        )

    def _shutdown_broker(self, _request: Any) -> A.SimpleResponse:
        if self.on_shutdown_requested is None:
            return A.SimpleResponse(Errors.INVALID_REQUEST, "this broker cannot be shut down remotely")
        log.info("Controlled shutdown requested through the ShutdownBroker API")
        self.on_shutdown_requested()
        return A.SimpleResponse(Errors.NONE)


def _error_for(e: Exception) -> str:
    if isinstance(e, StaleBrokerEpochError):
        return Errors.STALE_BROKER_EPOCH
    if isinstance(e, BrokerNotAvailableError):
        return Errors.BROKER_NOT_AVAILABLE
    if isinstance(e, ControllerMovedError):
        return Errors.NOT_CONTROLLER
    return Errors.UNKNOWN_SERVER_ERROR
