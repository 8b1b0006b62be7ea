"""ControllerChannelManager over real sockets: retries, removal, per-broker FIFO
(docs/controller-behaviour.md §6)."""

from __future__ import annotations

import logging
import queue
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace

import pytest

from kafka_controller.domain.errors import InvalidArgumentError
from kafka_controller.domain.requests import (
    ControlResponse,
    Errors,
    LeaderAndIsrResponse,
    UpdateMetadataResponse,
)
from kafka_controller.domain.values import Broker, EndPoint, TopicPartition
from kafka_controller.ports import BrokerChannel, SystemClock
from kafka_controller.transport.channel_manager import ControllerChannelManager
from kafka_controller.transport.server import TransportServer
from tests.runtime.builders import leader_and_isr, update_metadata
from tests.runtime.fakes import DEADLINE_S, wait_until
from tests.runtime.test_transport import BrokerSide


class ObservedClock(SystemClock):
    """The real clock, counting back-off sleeps so a test can wait for failed attempts."""

    def __init__(self) -> None:
        self.sleeps: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        super().sleep(seconds)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def broker_at(broker_id: int, port: int) -> Broker:
    return Broker(broker_id, (EndPoint("127.0.0.1", port),))


class Responses:
    def __init__(self) -> None:
        self.items: queue.Queue[tuple[str, ControlResponse]] = queue.Queue()

    def callback(self, tag: str) -> Callable[[ControlResponse], None]:
        return lambda response: self.items.put((tag, response))

    def take(self) -> tuple[str, ControlResponse]:
        return self.items.get(timeout=DEADLINE_S)


@pytest.fixture
def clock() -> ObservedClock:
    return ObservedClock()


@pytest.fixture
def manager(clock: ObservedClock) -> Iterator[ControllerChannelManager]:
    cm = ControllerChannelManager(1, clock=clock, timeout_s=DEADLINE_S)
    yield cm
    cm.shutdown()


def test_retries_until_the_broker_starts_listening(
    manager: ControllerChannelManager, clock: ObservedClock
) -> None:
    port = free_port()
    responses = Responses()
    manager.add_broker(broker_at(2, port))
    request = leader_and_isr(2, 3)
    channel: BrokerChannel = manager  # the port the controller sees
    channel.send_request(2, request, responses.callback("lai"))
    wait_until(lambda: len(clock.sleeps) >= 1, what="a failed attempt and its back-off")
    assert clock.sleeps[0] == pytest.approx(0.1)
    handler = BrokerSide()
    server = TransportServer("127.0.0.1", port, handler).start()
    try:
        tag, response = responses.take()
        assert tag == "lai" and isinstance(response, LeaderAndIsrResponse)
        assert set(response.partition_errors) == {
            TopicPartition(s.topic, s.partition) for s in request.partition_states
        }
        assert handler.received == [("LeaderAndIsr", request)]  # earlier attempts never reached a server
    finally:
        server.stop()


def test_per_broker_fifo_order() -> None:
    handlers = {2: BrokerSide(), 3: BrokerSide()}
    servers = {b: TransportServer("127.0.0.1", 0, h).start() for b, h in handlers.items()}
    cm = ControllerChannelManager(1, timeout_s=DEADLINE_S)
    responses = Responses()
    try:
        cm.startup(broker_at(b, s.port) for b, s in servers.items())
        assert cm.broker_ids == [2, 3]
        base = update_metadata(2)
        sent: dict[int, list[int]] = {2: [], 3: []}
        for i in range(60):
            b = 2 + i % 2
            cm.send_request(b, replace(base, controller_epoch=i), responses.callback(f"{b}:{i}"))
            sent[b].append(i)
        tags = [responses.take()[0] for _ in range(60)]
        for b in (2, 3):
            got = [r.controller_epoch for _, r in handlers[b].received]
            assert got == sent[b]
            assert [int(t.split(":")[1]) for t in tags if t.startswith(f"{b}:")] == sent[b]
    finally:
        cm.shutdown()
        for s in servers.values():
            s.stop()
    assert cm.broker_ids == []


def test_request_for_a_broker_without_a_queue_is_dropped_with_a_warning(
    manager: ControllerChannelManager, caplog: pytest.LogCaptureFixture
) -> None:
    responses = Responses()
    with caplog.at_level(logging.WARNING):
        manager.send_request(42, update_metadata(), responses.callback("x"))
    assert "broker 42: it has no queue" in caplog.text
    assert responses.items.empty() and manager.queue_size(42) == 0


def test_remove_broker_drops_queued_requests_and_stops_retrying(
    manager: ControllerChannelManager, clock: ObservedClock
) -> None:
    responses = Responses()
    manager.add_broker(broker_at(5, free_port()))  # nobody listens: every attempt fails
    for i in range(3):
        manager.send_request(5, replace(update_metadata(1), controller_epoch=i), responses.callback(str(i)))
    wait_until(lambda: len(clock.sleeps) >= 2, what="retries against the silent broker")
    assert manager.queue_size(5) == 2  # one is being retried, two wait behind it
    threads = [t for t in threading.enumerate() if t.name.endswith("to-broker-5-send-thread")]
    assert len(threads) == 1
    manager.remove_broker(5)
    assert not threads[0].is_alive()
    assert manager.queue_size(5) == 0 and manager.broker_ids == []
    manager.send_request(5, update_metadata(1), responses.callback("late"))
    assert responses.items.empty()


def test_remove_broker_aborts_a_request_blocked_in_flight(manager: ControllerChannelManager) -> None:
    handler = BrokerSide()
    handler.gate = threading.Event()
    server = TransportServer("127.0.0.1", 0, handler).start()
    responses = Responses()
    try:
        manager.add_broker(broker_at(6, server.port))
        manager.send_request(6, update_metadata(1), responses.callback("blocked"))
        assert handler.entered.wait(DEADLINE_S)
        manager.remove_broker(6)  # returns although the broker has not answered
        assert responses.items.empty()
    finally:
        handler.gate.set()
        server.stop()


def test_error_envelope_becomes_kafkas_error_response(manager: ControllerChannelManager) -> None:
    def failing(api: str, request: object) -> object:
        raise RuntimeError("disk on fire")

    server = TransportServer("127.0.0.1", 0, failing).start()
    responses = Responses()
    try:
        manager.add_broker(broker_at(7, server.port))
        request = leader_and_isr(1, 2)
        manager.send_request(7, request, responses.callback("lai"))
        manager.send_request(7, update_metadata(1), responses.callback("um"))
        _, lai = responses.take()
        _, um = responses.take()
    finally:
        server.stop()
    assert isinstance(lai, LeaderAndIsrResponse) and lai.error is Errors.UNKNOWN_SERVER_ERROR
    assert lai.partition_errors == {
        TopicPartition(s.topic, s.partition): Errors.UNKNOWN_SERVER_ERROR for s in request.partition_states
    }
    assert um == UpdateMetadataResponse(Errors.UNKNOWN_SERVER_ERROR)


def test_bad_input_is_refused(manager: ControllerChannelManager) -> None:
    with pytest.raises(InvalidArgumentError, match="broker 9 has no endpoint"):
        manager.add_broker(Broker(9))
    manager.add_broker(broker_at(8, free_port()))
    with pytest.raises(InvalidArgumentError, match="str is not a controller-to-broker request"):
        manager.send_request(8, "LeaderAndIsr")  # type: ignore[arg-type]


def test_requests_to_the_hosting_broker_go_straight_to_its_handler_in_order() -> None:
    """The controller's own broker gets the very request objects, in FIFO order, with no socket
    (its endpoint's port is closed); other brokers still go over the wire."""
    seen: list[tuple[str, object]] = []

    def handler(api: str, request: object) -> object:
        seen.append((api, request))
        if api == "LeaderAndIsr":
            return LeaderAndIsrResponse(Errors.NONE, {})
        return UpdateMetadataResponse(Errors.NONE)

    remote = TransportServer("127.0.0.1", 0, BrokerSide()).start()
    cm = ControllerChannelManager(1, timeout_s=DEADLINE_S, local_handler=handler)
    responses = Responses()
    try:
        cm.add_broker(broker_at(1, free_port()))
        cm.add_broker(broker_at(2, remote.port))
        lai, um = leader_and_isr(1, 2), update_metadata(1)
        cm.send_request(1, lai, responses.callback("local-lai"))
        cm.send_request(1, um, responses.callback("local-um"))
        cm.send_request(2, update_metadata(1), responses.callback("remote-um"))
        answers = dict(responses.take() for _ in range(3))
    finally:
        cm.shutdown()
        remote.stop()
    assert [api for api, _ in seen] == ["LeaderAndIsr", "UpdateMetadata"]
    assert seen[0][1] is lai and seen[1][1] is um
    assert answers["local-lai"] == LeaderAndIsrResponse(Errors.NONE, {})
    assert answers["remote-um"] == UpdateMetadataResponse(Errors.NONE)


def test_a_failing_local_handler_answers_as_the_wire_would() -> None:
    def failing(api: str, request: object) -> object:
        raise RuntimeError("disk on fire")

    cm = ControllerChannelManager(1, timeout_s=DEADLINE_S, local_handler=failing)
    responses = Responses()
    try:
        cm.add_broker(broker_at(1, free_port()))
        request = leader_and_isr(1, 2)
        cm.send_request(1, request, responses.callback("lai"))
        _, lai = responses.take()
    finally:
        cm.shutdown()
    assert isinstance(lai, LeaderAndIsrResponse) and lai.error is Errors.UNKNOWN_SERVER_ERROR
    assert set(lai.partition_errors.values()) == {Errors.UNKNOWN_SERVER_ERROR}
    assert len(lai.partition_errors) == len(request.partition_states)
