"""The broker's request handler: broker-epoch checks, metadata, routing to the controller, wire codecs."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from kafka_controller.broker import apis as A
from kafka_controller.broker.admin_client import AdminClient, ControllerNotAvailableError
from kafka_controller.broker.alter_isr import AlterIsrManager
from kafka_controller.broker.data_plane import DataPlane
from kafka_controller.broker.metadata_cache import MetadataCache
from kafka_controller.broker.replica_manager import ReplicaManager
from kafka_controller.broker.request_handler import BrokerRequestHandler
from kafka_controller.controller.events import ApiError
from kafka_controller.core.context import ControllerContext
from kafka_controller.core.context_description import describe_context
from kafka_controller.domain.errors import (
    BrokerNotAvailableError,
    ControllerMovedError,
    StaleBrokerEpochError,
)
from kafka_controller.domain.requests import Errors, LeaderAndIsrResponse, UpdateMetadataResponse
from kafka_controller.domain.values import (
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
    TopicPartition,
)
from kafka_controller.dryrun.memory_store import InMemoryMetadataStore
from kafka_controller.testing.clock import ManualClock
from kafka_controller.transport.client import TransportClient
from kafka_controller.transport.codec import ApiRegistry
from kafka_controller.transport.errors import ProtocolError, RemoteError
from kafka_controller.transport.server import TransportServer
from tests.broker.helpers import broker, leader_and_isr, state, stop_replica, um_state, update_metadata

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)
BROKER_EPOCH = 100


class FakeController:
    """Records calls; answers each with ``answers[name]`` (a value, or a callable of the args)."""

    def __init__(self, active: bool = True, answers: dict[str, Any] | None = None) -> None:
        self.is_active = active
        self.answers = answers or {}
        self.calls: list[tuple[str, tuple[Any, ...]]] = []
        self.operation_ids: list[str | None] = []

    def _answer(self, name: str, callback: Callable[[Any], None], *args: Any) -> None:
        self.calls.append((name, args))
        if name in self.answers:  # answer from another thread, as the event thread does
            value = self.answers[name]
            threading.Thread(target=callback, args=(value(*args) if callable(value) else value,)).start()

    def controlled_shutdown(
        self,
        broker_id: int,
        broker_epoch: int,
        callback: Callable[[Any], None],
        operation_id: str | None = None,
    ) -> None:
        self.operation_ids.append(operation_id)
        self._answer("controlled_shutdown", callback, broker_id, broker_epoch)

    def alter_isr(
        self, broker_id: int, broker_epoch: int, isrs: Any, callback: Callable[[Any], None]
    ) -> None:
        self._answer("alter_isr", callback, broker_id, broker_epoch, isrs)

    def elect_leaders(
        self,
        partitions: Any,
        election_type: str,
        callback: Callable[[Any], None],
        operation_id: str | None = None,
    ) -> None:
        self.operation_ids.append(operation_id)
        self._answer("elect_leaders", callback, partitions, election_type)

    def alter_partition_reassignments(
        self, reassignments: Any, callback: Callable[[Any], None], operation_id: str | None = None
    ) -> None:
        self.operation_ids.append(operation_id)
        self._answer("alter_partition_reassignments", callback, reassignments)

    def list_partition_reassignments(self, partitions: Any, callback: Callable[[Any], None]) -> None:
        self._answer("list_partition_reassignments", callback, partitions)

    def describe_controller_context(self, callback: Callable[[Any], None]) -> None:
        self._answer("describe_controller_context", callback)


def handler(controller: FakeController | None = None, timeout_s: float = 5.0) -> BrokerRequestHandler:
    rm = ReplicaManager(1, ManualClock().time_ms, produce_rate_per_s=10.0)
    plane = DataPlane(
        rm,
        AlterIsrManager(rm, lambda: BROKER_EPOCH, lambda r, f: A.AlterIsrResponse("NONE")),
        start_threads=False,
    )
    return BrokerRequestHandler(
        1,
        lambda: BROKER_EPOCH,
        rm,
        MetadataCache(1),
        plane,
        controller=controller,
        controller_timeout_s=timeout_s,
    )


# -- broker epoch (KIP-380) -----------------------------------------------------------------------
@pytest.mark.parametrize(
    "epoch, accepted", [(-1, True), (BROKER_EPOCH, True), (BROKER_EPOCH + 5, True), (BROKER_EPOCH - 1, False)]
)
def test_control_requests_with_an_older_broker_epoch_are_refused(epoch: int, accepted: bool) -> None:
    h = handler()
    lai = h.handle("LeaderAndIsr", leader_and_isr([state("t", 0, 1, 0, (1, 2))], broker_epoch=epoch))
    um = h.handle("UpdateMetadata", update_metadata([um_state("t", 0, 1, (1, 2))], broker_epoch=epoch))
    sr = h.handle("StopReplica", stop_replica({T1: (-2, True)}, broker_epoch=epoch))
    expected = Errors.NONE if accepted else Errors.STALE_BROKER_EPOCH
    assert (lai.error, um.error, sr.error) == (expected, expected, expected)
    assert isinstance(lai, LeaderAndIsrResponse)
    assert (h.replica_manager.get(T0) is not None) == accepted
    assert (h.metadata_cache.get_partition_info(T0) is not None) == accepted


def test_update_metadata_fills_the_cache_and_refuses_an_older_controller() -> None:
    h = handler()
    request = update_metadata(
        [um_state("t", 0, 2, (2, 1)), um_state("t", 1, 1, (1,))],
        controller_id=2,
        controller_epoch=3,
        brokers=[broker(1, 9001), broker(2, 9002)],
    )
    assert h.handle("UpdateMetadata", request) == UpdateMetadataResponse(Errors.NONE)
    cache = h.metadata_cache
    assert cache.controller_id == 2
    assert cache.endpoint(2) is not None and cache.endpoint(2).port == 9002  # type: ignore[union-attr]
    assert sorted(cache.all_partitions()) == [T0, T1]
    stale = update_metadata([um_state("t", 0, 3, (3,))], controller_id=3, controller_epoch=2)
    assert h.handle("UpdateMetadata", stale).error is Errors.STALE_CONTROLLER_EPOCH
    assert cache.controller_id == 2
    deleting = update_metadata([um_state("t", 1, -2, (1,))], controller_epoch=3)
    assert h.handle("UpdateMetadata", deleting).error is Errors.NONE
    assert cache.all_partitions() == [T0]  # leader -2: the topic is being deleted
    assert [b.id for b in cache.alive_brokers()] == []  # the live list is replaced every time


# -- controller APIs -----------------------------------------------------------------------------------
@pytest.mark.parametrize("controller", [None, FakeController(active=False)])
def test_controller_apis_answer_not_controller_unless_the_local_controller_is_active(
    controller: FakeController | None,
) -> None:
    h = handler(controller)
    assert h.handle(A.CONTROLLED_SHUTDOWN, A.ControlledShutdownRequest(2, 7)).error == Errors.NOT_CONTROLLER
    assert h.handle(A.ALTER_ISR, A.AlterIsrRequest(2, 7, {})).error == Errors.NOT_CONTROLLER
    assert h.handle(A.ELECT_LEADERS, A.ElectLeadersRequest("preferred", None)).error == Errors.NOT_CONTROLLER
    assert h.handle(A.LIST_PARTITION_REASSIGNMENTS, A.ListPartitionReassignmentsRequest(None)).error == (
        Errors.NOT_CONTROLLER
    )
    assert h.handle(A.ALTER_PARTITION_REASSIGNMENTS, A.AlterPartitionReassignmentsRequest({})).error == (
        Errors.NOT_CONTROLLER
    )
    assert h.handle(A.DESCRIBE_CONTROLLER_CONTEXT, A.DescribeControllerContextRequest()).error == (
        Errors.NOT_CONTROLLER
    )
    assert controller is None or controller.calls == []


@pytest.mark.parametrize(
    "outcome, error, remaining",
    [
        ({T1, T0}, Errors.NONE, (T0, T1)),
        (set(), Errors.NONE, ()),
        (StaleBrokerEpochError("old"), Errors.STALE_BROKER_EPOCH, ()),
        (BrokerNotAvailableError("gone"), Errors.BROKER_NOT_AVAILABLE, ()),
        (ControllerMovedError("moved"), Errors.NOT_CONTROLLER, ()),
        (RuntimeError("boom"), Errors.UNKNOWN_SERVER_ERROR, ()),
    ],
)
def test_controlled_shutdown_is_routed_and_its_outcome_translated(
    outcome: Any, error: Errors, remaining: tuple[TopicPartition, ...]
) -> None:
    controller = FakeController(answers={"controlled_shutdown": outcome})
    response = handler(controller).handle(A.CONTROLLED_SHUTDOWN, A.ControlledShutdownRequest(2, 7))
    assert controller.calls == [("controlled_shutdown", (2, 7))]
    assert (response.error, response.partitions_remaining) == (error, remaining)


def test_alter_isr_is_routed_with_per_partition_results() -> None:
    done = LeaderAndIsr(2, 3, (2, 1), 9)
    controller = FakeController(answers={"alter_isr": {T0: done, T1: Errors.FENCED_LEADER_EPOCH}})
    request = A.AlterIsrRequest(2, 7, {T0: LeaderAndIsr(2, 3, (2, 1), 8), T1: LeaderAndIsr(2, 1, (2,), 4)})
    response = handler(controller).handle(A.ALTER_ISR, request)
    assert controller.calls == [("alter_isr", (2, 7, request.isrs))]
    assert response == A.AlterIsrResponse("NONE", {T0: done, T1: "FENCED_LEADER_EPOCH"})
    stale = FakeController(answers={"alter_isr": Errors.STALE_BROKER_EPOCH})
    assert handler(stale).handle(A.ALTER_ISR, request).error == Errors.STALE_BROKER_EPOCH


def test_elections_and_reassignments_are_routed() -> None:
    controller = FakeController(
        answers={
            "elect_leaders": {T0: 2, T1: ApiError(Errors.ELECTION_NOT_NEEDED)},
            "alter_partition_reassignments": {T0: ApiError(Errors.NONE)},
            "list_partition_reassignments": {T0: ReplicaAssignment.of((2, 3, 1), (3,), (1,))},
        }
    )
    h = handler(controller)
    elect = h.handle(A.ELECT_LEADERS, A.ElectLeadersRequest("preferred", (T0, T1)))
    assert elect.error == Errors.NONE
    assert elect.results == {
        T0: A.PartitionElectionResult("NONE", 2),
        T1: A.PartitionElectionResult("ELECTION_NOT_NEEDED"),
    }
    alter = h.handle(A.ALTER_PARTITION_REASSIGNMENTS, A.AlterPartitionReassignmentsRequest({T0: (2, 3)}))
    assert alter.results == {T0: A.ReassignmentResult("NONE")}
    listed = h.handle(A.LIST_PARTITION_REASSIGNMENTS, A.ListPartitionReassignmentsRequest(None))
    assert listed.reassignments[T0].adding_replicas == (3,)
    assert [c[0] for c in controller.calls] == [
        "elect_leaders",
        "alter_partition_reassignments",
        "list_partition_reassignments",
    ]
    assert controller.calls[0][1] == ((T0, T1), "preferred")


def test_a_preempted_election_is_a_top_level_not_controller() -> None:
    controller = FakeController(answers={"elect_leaders": {T0: ApiError(Errors.NOT_CONTROLLER)}})
    response = handler(controller).handle(A.ELECT_LEADERS, A.ElectLeadersRequest("preferred", (T0,)))
    assert response.error == Errors.NOT_CONTROLLER


def test_a_controller_that_never_answers_times_out() -> None:
    response = handler(FakeController(), timeout_s=0.05).handle(
        A.CONTROLLED_SHUTDOWN, A.ControlledShutdownRequest(2, 7)
    )
    assert response.error == Errors.REQUEST_TIMED_OUT


# -- over the wire ----------------------------------------------------------------------------------------
def test_broker_apis_round_trip_over_a_real_connection() -> None:
    done = LeaderAndIsr(2, 3, (2, 1), 9)
    controller = FakeController(
        answers={"controlled_shutdown": {T0}, "alter_isr": lambda _b, _e, isrs: dict.fromkeys(isrs, done)}
    )
    h = handler(controller)
    h.handle("LeaderAndIsr", leader_and_isr([state("t", 0, 1, 4, (1, 2), replicas=(1, 2), zk_version=2)]))
    shutdowns: list[bool] = []
    h.on_shutdown_requested = lambda: shutdowns.append(True)
    with (
        TransportServer("127.0.0.1", 0, h.handle) as server,
        TransportClient("127.0.0.1", server.port) as client,
    ):
        cs = client.request(A.CONTROLLED_SHUTDOWN, A.ControlledShutdownRequest(2, 7))
        assert cs == A.ControlledShutdownResponse("NONE", (T0,))
        isr = client.request(A.ALTER_ISR, A.AlterIsrRequest(2, 7, {T1: LeaderAndIsr(2, 3, (2, 1), 8)}))
        assert isr == A.AlterIsrResponse("NONE", {T1: done})
        described = client.request(A.DESCRIBE_REPLICAS, None)
        assert described.broker_id == 1 and described.broker_epoch == BROKER_EPOCH
        (replica,) = described.replicas
        assert (replica.topic, replica.partition, replica.leader_epoch, replica.isr, replica.is_leader) == (
            "t",
            0,
            4,
            (1, 2),
            True,
        )
        fetch = client.request(A.FETCH, A.FetchRequest(2, ("t", "t"), (0, 1), (0, 0), (4, 0)))
        assert fetch.errors == ("NONE", A.NOT_LEADER_OR_FOLLOWER)
        assert client.request(A.SHUTDOWN_BROKER, None).error == "NONE" and shutdowns == [True]
        assert client.request(A.METADATA, None).controller_id == -1
    raw_apis = ApiRegistry()
    raw_apis.register_json(A.ALTER_ISR)  # sends any JSON body as it is
    with (
        TransportServer("127.0.0.1", 0, h.handle) as server,
        TransportClient("127.0.0.1", server.port, apis=raw_apis) as raw,
    ):
        with pytest.raises(RemoteError) as bad:
            raw.request(A.ALTER_ISR, {"broker_id": "two", "broker_epoch": 1, "topics": []})
        assert bad.value.code == "INVALID_REQUEST" and "AlterIsr" in str(bad.value)
        assert len(controller.calls) == 2  # the bad request never reached the controller


def test_operation_ids_travel_with_admin_requests_and_bad_ones_are_refused() -> None:
    controller = FakeController(
        answers={
            "controlled_shutdown": set(),
            "elect_leaders": {T0: 2},
            "alter_partition_reassignments": {T0: ApiError(Errors.NONE)},
        }
    )
    with (
        TransportServer("127.0.0.1", 0, handler(controller).handle) as server,
        TransportClient("127.0.0.1", server.port) as client,
    ):
        client.request(A.CONTROLLED_SHUTDOWN, A.ControlledShutdownRequest(2, 7, "op-cs"))
        client.request(A.ELECT_LEADERS, A.ElectLeadersRequest("preferred", (T0,), "op-elect"))
        client.request(
            A.ALTER_PARTITION_REASSIGNMENTS, A.AlterPartitionReassignmentsRequest({T0: (2, 3)}, "op-re")
        )
        client.request(A.ELECT_LEADERS, A.ElectLeadersRequest("preferred", (T0,)))  # an older client: none
        assert controller.operation_ids == ["op-cs", "op-elect", "op-re", None]
        with pytest.raises(RemoteError, match="operation_id must be a printable string"):
            client.request(A.ELECT_LEADERS, A.ElectLeadersRequest("preferred", (T0,), "x" * 37))
    assert len(controller.calls) == 4  # the refused request never reached the controller


# -- DescribeControllerContext ------------------------------------------------------------------------
def _context_document() -> dict[str, Any]:
    ctx = ControllerContext()
    ctx.epoch, ctx.epoch_zk_version = 3, 3
    ctx.update_partition_full_replica_assignment(T0, ReplicaAssignment.of((1, 2)))
    ctx.update_partition_full_replica_assignment(T1, ReplicaAssignment.of((2, 3, 1), (3,), (1,)))
    ctx.partitions_being_reassigned.add(T1)
    ctx.put_partition_leadership_info(T0, LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 4, (1, 2), 6), 3))
    return describe_context(ctx, 1)


def test_describe_controller_context_is_routed_and_crosses_the_wire() -> None:
    doc = _context_document()
    controller = FakeController(answers={"describe_controller_context": doc})
    with (
        TransportServer("127.0.0.1", 0, handler(controller).handle) as server,
        TransportClient("127.0.0.1", server.port) as client,
    ):
        answer = client.request(A.DESCRIBE_CONTROLLER_CONTEXT, A.DescribeControllerContextRequest(5_000))
    assert answer == A.DescribeControllerContextResponse("NONE", doc)
    assert controller.calls == [("describe_controller_context", ())]
    failed = FakeController(
        answers={"describe_controller_context": ApiError(Errors.UNKNOWN_SERVER_ERROR, "context is broken")}
    )
    response = handler(failed).handle(A.DESCRIBE_CONTROLLER_CONTEXT, A.DescribeControllerContextRequest())
    assert (response.error, response.context, response.message) == (
        "UNKNOWN_SERVER_ERROR",
        None,
        "context is broken",
    )


def test_describe_controller_context_waits_no_longer_than_the_request_asks() -> None:
    silent = FakeController()  # enqueues, never answers (a controller stuck on a long event)
    response = handler(silent, timeout_s=600.0).handle(
        A.DESCRIBE_CONTROLLER_CONTEXT, A.DescribeControllerContextRequest(50)
    )
    assert response == A.DescribeControllerContextResponse(Errors.REQUEST_TIMED_OUT)


def test_describe_controller_context_bodies_are_checked() -> None:
    apis = ApiRegistry(A.BROKER_API_CODECS)
    with pytest.raises(ProtocolError, match=r"DescribeControllerContext request body: .*timeout_ms must be"):
        apis.decode_request(A.DESCRIBE_CONTROLLER_CONTEXT, {"timeout_ms": 0})
    with pytest.raises(ProtocolError, match="expected an integer"):
        apis.decode_request(A.DESCRIBE_CONTROLLER_CONTEXT, {"timeout_ms": "5"})
    with pytest.raises(ProtocolError, match=r"between 1 and 2147483647, got <int of \d+ bits>$"):
        apis.decode_request(A.DESCRIBE_CONTROLLER_CONTEXT, {"timeout_ms": 10**5000})
    with pytest.raises(ProtocolError, match=r"between 1 and 2147483647, got 0$"):
        apis.decode_request(A.DESCRIBE_CONTROLLER_CONTEXT, {"timeout_ms": 0})
    assert apis.decode_request(A.DESCRIBE_CONTROLLER_CONTEXT, {}) == A.DescribeControllerContextRequest()
    doc = _context_document()
    doc["partitions"]["leader"] = ["one", None]
    with pytest.raises(ProtocolError, match=r"response body: .*column partitions.leader must hold int") as e:
        apis.decode_response(A.DESCRIBE_CONTROLLER_CONTEXT, {"error": "NONE", "context": doc})
    assert "\n" not in str(e.value)
    with pytest.raises(ProtocolError, match="expected a JSON object, got NoneType"):
        apis.decode_response(A.DESCRIBE_CONTROLLER_CONTEXT, {"error": "NONE"})
    with pytest.raises(ProtocolError, match="a NOT_CONTROLLER answer carries no context"):
        apis.decode_response(A.DESCRIBE_CONTROLLER_CONTEXT, {"error": "NOT_CONTROLLER", "context": {}})


def test_the_admin_client_finds_the_controller_that_describes_its_context() -> None:
    doc = _context_document()
    retired = FakeController(active=False)
    active = FakeController(answers={"describe_controller_context": doc})
    store = InMemoryMetadataStore()
    clock = ManualClock()
    with (
        TransportServer("127.0.0.1", 0, handler(retired).handle) as old,
        TransportServer("127.0.0.1", 0, handler(active).handle) as new,
    ):
        where = {False: old.port, True: new.port}  # a stale locate names the old controller
        client = AdminClient(
            store,
            locator=lambda fresh: (1, "127.0.0.1", where[fresh]),
            sleep=clock.sleep,
            monotonic=clock.monotonic,
        )
        with client:
            assert client.describe_controller_context(timeout_s=5.0).context == doc
            where[True] = old.port  # now nobody is the controller
            with pytest.raises(
                ControllerNotAvailableError, match=r"DescribeControllerContext: .*NOT_CONTROLLER"
            ):
                client.describe_controller_context(timeout_s=1.0)
    assert retired.calls == [] and active.calls == [("describe_controller_context", ())]
