"""The bounded connection layer: frame reading, the memory budget, quotas, idle expiry, the pools.

Real sockets on 127.0.0.1 against an in-process ``TransportServer``; every wait polls a condition
with a deadline. The process-level checks (RSS, thread counts, descriptors) are in tests/hostile.
"""

from __future__ import annotations

import logging
import socket
import struct
import threading
import tracemalloc
from collections.abc import Iterator
from contextlib import ExitStack, closing
from typing import Any

import pytest

from kafka_controller.domain.requests import Errors
from kafka_controller.transport import framing
from kafka_controller.transport.codec import DEFAULT_APIS, UPDATE_METADATA
from kafka_controller.transport.errors import TransportConnectionError
from kafka_controller.transport.limits import (
    ConnectionQuotas,
    MemoryPool,
    SocketSettings,
    TooManyConnectionsError,
)
from kafka_controller.transport.server import (
    TransportServer,
    current_connection,
    current_peer,
    is_control_frame,
)
from tests.broker.helpers import wait_until
from tests.runtime.builders import update_metadata
from tests.runtime.fakes import DEADLINE_S

HUNDRED_MIB = 100 * 1024 * 1024
LOGGER = "kafka_controller.transport.server"
ONLY_TWO = {"127.0.0.2": 2}


# -- the frame reader ---------------------------------------------------------------------------------
def test_a_length_prefix_alone_allocates_nothing_of_the_announced_size() -> None:
    left, right = socket.socketpair()
    with closing(left), closing(right):
        right.setblocking(False)
        left.sendall(struct.pack(">I", HUNDRED_MIB) + b"{")
        reader = framing.FrameReader()
        assert reader.read_header(right) is True and reader.length == HUNDRED_MIB
        assert reader.read_body(right) is False
        assert reader.received == 5 and reader.buffered == 64 * 1024  # not the announced 100 MiB
        left.sendall(b"x" * 100_000)
        while reader.received < 100_005:
            assert reader.read_body(right) is False
        assert reader.buffered == 128 * 1024  # doubled as the bytes came
        left.close()
        assert reader.read_body(right) is None  # end of stream mid-frame


def test_the_reader_returns_whole_frames_one_at_a_time() -> None:
    left, right = socket.socketpair()
    with closing(left), closing(right):
        right.setblocking(False)
        left.sendall(struct.pack(">I", 3) + b"abc" + struct.pack(">I", 2) + b"de")
        reader = framing.FrameReader()
        frames = []
        while len(frames) < 2:
            if reader.length < 0:
                assert reader.read_header(right) is not None
            elif reader.read_body(right):
                frames.append(bytes(reader.take()))
        assert frames == [b"abc", b"de"]


def test_a_blocking_read_grows_with_the_bytes_not_with_the_announced_length() -> None:
    left, right = socket.socketpair()
    with closing(left), closing(right):
        left.sendall(struct.pack(">I", HUNDRED_MIB) + b"{")
        left.shutdown(socket.SHUT_WR)
        tracemalloc.start()
        try:
            with pytest.raises(TransportConnectionError, match=f"after 1 of {HUNDRED_MIB} bytes"):
                framing.read_frame(right, framing.DEFAULT_MAX_FRAME_BYTES)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 8 * 1024 * 1024


# -- pure pieces --------------------------------------------------------------------------------------
def test_memory_pool_is_kafkas_non_strict_pool() -> None:
    pool = MemoryPool(100)
    assert pool.try_reserve(60) and pool.try_reserve(60)  # the second overdraws: something was left
    assert pool.available == -20 and pool.out_of_memory
    assert not pool.try_reserve(1)
    pool.release(60)
    assert pool.available == 40 and pool.try_reserve(1)
    unbounded = MemoryPool(-1)
    assert unbounded.try_reserve(10**12) and not unbounded.out_of_memory


def test_connection_quotas_count_per_address_and_in_total() -> None:
    quotas = ConnectionQuotas(SocketSettings(max_connections=3, max_connections_per_ip=2), {"10.0.0.9": 0})
    quotas.inc("10.0.0.1")
    quotas.inc("10.0.0.1")
    with pytest.raises(TooManyConnectionsError, match=r"10\.0\.0\.1 already has the configured maximum of 2"):
        quotas.inc("10.0.0.1")
    quotas.dec("10.0.0.1")  # the refused one is closed, which decrements
    assert quotas.get("10.0.0.1") == 2 and quotas.slot_available()
    with pytest.raises(TooManyConnectionsError, match="maximum of 0"):
        quotas.inc("10.0.0.9")
    quotas.dec("10.0.0.9")
    quotas.inc("10.0.0.2")
    assert quotas.total == 3 and not quotas.slot_available()


def test_control_frames_are_recognised_from_their_first_bytes() -> None:
    assert is_control_frame(framing.encode_request(UPDATE_METADATA, 1, {"x": 1}))
    assert is_control_frame(b'{ "api" : "LeaderAndIsr", "v": 1}')
    assert not is_control_frame(framing.encode_request("ElectLeaders", 1, {}))
    assert not is_control_frame(b'{"v":1,"api":"UpdateMetadata"}')  # not first: the data pool, no harm
    assert not is_control_frame(b"\x00\x03")


# -- a server ------------------------------------------------------------------------------------------
class Gate:
    """A handler whose ``Slow`` requests wait for ``release``; records the peer each request saw."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.lock = threading.Lock()
        self.inside = 0
        self.peers: list[str | None] = []
        self.principals: list[str] = []

    def __call__(self, api: str, request: Any) -> Any:
        with self.lock:
            self.peers.append(current_peer())
            conn = current_connection()
            self.principals.append(conn.principal if conn is not None else "")
            self.inside += 1
        try:
            if api == "Slow":
                assert self.release.wait(DEADLINE_S)
            if api == UPDATE_METADATA:
                from kafka_controller.domain.requests import UpdateMetadataResponse

                return UpdateMetadataResponse(Errors.NONE)
            return {"echo": request if isinstance(request, int | str) else len(str(request))}
        finally:
            with self.lock:
                self.inside -= 1


@pytest.fixture
def apis() -> Any:
    registry = DEFAULT_APIS.copy()
    registry.register_json("Echo")
    registry.register_json("Slow")
    return registry


@pytest.fixture
def gate() -> Iterator[Gate]:
    g = Gate()
    yield g
    g.release.set()


def serve(gate: Gate, apis: Any, **settings: Any) -> TransportServer:
    """Started by ``with``."""
    return TransportServer("127.0.0.1", 0, gate, apis=apis, settings=SocketSettings(**settings))


def connect(server: TransportServer, source: str = "127.0.0.1") -> socket.socket:
    sock = socket.socket()
    sock.settimeout(DEADLINE_S)
    sock.bind((source, 0))
    sock.connect(("127.0.0.1", server.port))
    return sock


def send(sock: socket.socket, api: str, body: Any, cid: int = 1) -> None:
    framing.write_frame(sock, framing.encode_request(api, cid, body))


def answer(sock: socket.socket) -> Any:
    payload = framing.read_frame(sock, 1 << 20)
    assert payload is not None, "closed instead of answering"
    _, body, error = framing.decode_response(payload)
    assert error is None, error
    return body


def closed_by_server(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def test_handlers_see_their_peer_and_principal(gate: Gate, apis: Any) -> None:
    with serve(gate, apis) as server, closing(connect(server)) as sock:
        send(sock, "Echo", 1)
        assert answer(sock) == {"echo": 1}
        host, port = sock.getsockname()
        assert gate.peers == [f"{host}:{port}"] and gate.principals == ["User:ANONYMOUS"]
    assert current_peer() is None


def test_threads_stay_bounded_with_many_connections(gate: Gate, apis: Any) -> None:
    before = threading.active_count()
    with serve(gate, apis, num_io_threads=2) as server, ExitStack() as stack:
        started = threading.active_count()
        socks = [stack.enter_context(closing(connect(server))) for _ in range(100)]
        wait_until(lambda: server.connection_count == 100, "100 connections accepted")
        for i, sock in enumerate(socks):
            send(sock, "Echo", i)
        assert [answer(s) for s in socks] == [{"echo": i} for i in range(100)]
        assert threading.active_count() == started == before + 1 + 2 + 1  # network, 2 io, control


def test_a_full_data_pool_does_not_hold_up_control_requests(gate: Gate, apis: Any) -> None:
    """Clients waiting in every data thread (as CreateTopics waits for metadata) must not stop the
    UpdateMetadata they wait for."""
    with serve(gate, apis, num_io_threads=2) as server, ExitStack() as stack:
        slow = [stack.enter_context(closing(connect(server))) for _ in range(3)]
        for sock in slow:
            send(sock, "Slow", "x")
        wait_until(lambda: gate.inside == 2, "both data threads busy")
        control = stack.enter_context(closing(connect(server)))
        send(control, UPDATE_METADATA, DEFAULT_APIS.get(UPDATE_METADATA).encode_request(update_metadata()))
        assert answer(control)["error"] == Errors.NONE
        gate.release.set()
        assert [answer(s) for s in slow] == [{"echo": "x"}] * 3


def test_the_per_address_limit_closes_the_extra_connection_at_once(
    gate: Gate, apis: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, LOGGER)
    with (
        serve(
            gate, apis, max_connections_per_ip=50, max_connections_per_ip_overrides={"127.0.0.2": 2}
        ) as server,
        ExitStack() as stack,
    ):
        kept = [stack.enter_context(closing(connect(server, "127.0.0.2"))) for _ in range(2)]
        extra = stack.enter_context(closing(connect(server, "127.0.0.2")))
        assert closed_by_server(extra)
        others = [stack.enter_context(closing(connect(server))) for _ in range(3)]  # 127.0.0.1: default
        for sock in (*kept, *others):
            send(sock, "Echo", 7)
            assert answer(sock) == {"echo": 7}
        port = extra.getsockname()[1]
        assert f"refused the connection from 127.0.0.2:{port}" in caplog.text
        assert "maximum of 2 connections" in caplog.text


def test_at_max_connections_the_next_peer_waits_for_a_slot(gate: Gate, apis: Any) -> None:
    with serve(gate, apis, max_connections=2) as server, ExitStack() as stack:
        first, second = (stack.enter_context(closing(connect(server))) for _ in range(2))
        wait_until(lambda: server.connection_count == 2, "two connections")
        third = stack.enter_context(closing(connect(server)))  # completes in the listen backlog
        send(third, "Echo", 3)
        send(second, "Echo", 2)
        assert answer(second) == {"echo": 2}
        assert server.connection_count == 2  # the third still waits
        first.close()
        assert answer(third) == {"echo": 3}


def test_idle_and_stalled_connections_are_closed_and_named(
    gate: Gate, apis: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, LOGGER)
    with serve(gate, apis, connections_max_idle_ms=300) as server, ExitStack() as stack:
        idle = stack.enter_context(closing(connect(server)))
        stalled = stack.enter_context(closing(connect(server)))
        stalled.sendall(struct.pack(">I", 1000) + b'{"api"')
        busy = stack.enter_context(closing(connect(server)))
        send(busy, "Slow", "held")  # with a handler longer than the idle limit: not the peer's time
        wait_until(lambda: gate.inside == 1, "the slow request in its handler")
        assert closed_by_server(idle) and closed_by_server(stalled)
        gate.release.set()
        assert answer(busy) == {"echo": "held"}
        text = caplog.text
        assert f"from 127.0.0.1:{idle.getsockname()[1]}: idle for connections.max.idle.ms=300" in text
        stalled_port = stalled.getsockname()[1]
        assert f"from 127.0.0.1:{stalled_port}: stalled mid-frame (10 of 1004 bytes)" in text


def test_a_connection_waits_for_the_memory_budget_instead_of_failing(gate: Gate, apis: Any) -> None:
    budget = 64 * 1024
    with (
        serve(gate, apis, queued_max_request_bytes=budget, socket_request_max_bytes=budget) as server,
        ExitStack() as stack,
    ):
        big = "y" * (budget * 3 // 4)
        holders = [stack.enter_context(closing(connect(server))) for _ in range(2)]
        for sock in holders:  # 48 KiB each: the second overdraws the 64 KiB budget, as Kafka's does
            send(sock, "Slow", big)
        wait_until(lambda: gate.inside == 2, "both big requests held by handlers")
        waiter = stack.enter_context(closing(connect(server)))
        send(waiter, "Echo", 5)
        wait_until(lambda: server.waiting_for_memory == 1, "the small request waiting for memory")
        assert gate.inside == 2
        gate.release.set()
        assert answer(waiter) == {"echo": 5}
        assert [answer(s) for s in holders] == [{"echo": big}] * 2
        assert server.waiting_for_memory == 0


def test_a_frame_over_socket_request_max_bytes_is_refused_and_named(
    gate: Gate, apis: Any, caplog: pytest.LogCaptureFixture
) -> None:
    with serve(gate, apis, socket_request_max_bytes=1024) as server, closing(connect(server)) as sock:
        sock.sendall(struct.pack(">I", 1025) + b"{")
        payload = framing.read_frame(sock, 1 << 20)
        assert payload is not None
        _, _, error = framing.decode_response(payload)
        assert error is not None and error[0] == Errors.INVALID_REQUEST
        assert "frame length 1025 is outside 1..1024 bytes (socket.request.max.bytes)" in error[1]
        assert closed_by_server(sock)
        assert f"refused a frame from 127.0.0.1:{sock.getsockname()[1]}" in caplog.text


class Unauthenticated:
    complete = False
    principal = "User:ANONYMOUS"

    def receive(self, payload: bytearray) -> bytes | None:
        return b'{"cid":-1,"body":"hello"}'


def test_peers_not_yet_authenticated_are_held_to_sasl_server_max_receive_size(gate: Gate, apis: Any) -> None:
    settings = SocketSettings(sasl_server_max_receive_size=64)
    with (
        TransportServer(
            "127.0.0.1", 0, gate, apis=apis, settings=settings, authenticator_factory=Unauthenticated
        ) as server,
        closing(connect(server)) as sock,
    ):
        send(sock, "Echo", 1)  # under 64 bytes: to the authenticator, not the handler
        assert answer(sock) == "hello" and gate.peers == []
        sock.sendall(struct.pack(">I", 65) + b"{")
        payload = framing.read_frame(sock, 1 << 20)
        assert payload is not None and b"sasl.server.max.receive.size" in payload


def test_a_client_replaces_a_connection_the_server_closed_while_idle(gate: Gate, apis: Any) -> None:
    from kafka_controller.transport.client import TransportClient

    with serve(gate, apis, connections_max_idle_ms=200) as server:
        client = TransportClient("127.0.0.1", server.port, timeout_s=DEADLINE_S, apis=apis)
        with closing(client):
            assert client.request("Echo", 1) == {"echo": 1}
            wait_until(lambda: server.connection_count == 0, "the idle connection closed by the server")
            assert client.request("Echo", 2) == {"echo": 2}  # no failed request in between
            assert client.connects == 2


def test_an_answer_larger_than_the_socket_takes_at_once_arrives_whole(gate: Gate, apis: Any) -> None:
    """The handler thread writes what fits; the network thread writes the rest as the peer reads."""
    big = "z" * (8 * 1024 * 1024)
    with serve(gate, apis) as server, closing(connect(server)) as sock:
        send(sock, "Echo", big)
        payload = framing.read_frame(sock, 16 * 1024 * 1024)
        assert payload is not None and framing.decode_response(payload)[1] == {"echo": big}
        send(sock, "Echo", 2)  # and the connection reads again afterwards
        assert answer(sock) == {"echo": 2}
