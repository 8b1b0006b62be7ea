"""Server and client over real sockets on 127.0.0.1 ephemeral ports."""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from kafka_controller.domain.requests import (
    Errors,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    StopReplicaRequest,
    StopReplicaResponse,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)
from kafka_controller.domain.values import TopicPartition
from kafka_controller.transport import framing
from kafka_controller.transport.client import TransportClient
from kafka_controller.transport.codec import DEFAULT_APIS, LEADER_AND_ISR, STOP_REPLICA, UPDATE_METADATA
from kafka_controller.transport.errors import (
    RemoteError,
    TransportConnectionError,
    TransportError,
    TransportTimeoutError,
)
from kafka_controller.transport.server import TransportServer
from tests.runtime.builders import leader_and_isr, stop_replica, update_metadata
from tests.runtime.fakes import DEADLINE_S


class BrokerSide:
    """A broker-like handler: records requests and answers from their content."""

    def __init__(self) -> None:
        self.received: list[tuple[str, Any]] = []
        self.gate: threading.Event | None = None
        self.entered = threading.Event()

    def __call__(self, api: str, request: Any) -> Any:
        self.received.append((api, request))
        self.entered.set()
        if self.gate is not None:
            assert self.gate.wait(DEADLINE_S)
        if isinstance(request, LeaderAndIsrRequest):
            return LeaderAndIsrResponse(
                Errors.NONE,
                {
                    TopicPartition(s.topic, s.partition): Errors.FENCED_LEADER_EPOCH
                    if s.leader < 0
                    else Errors.NONE
                    for s in request.partition_states
                },
            )
        if isinstance(request, UpdateMetadataRequest):
            return UpdateMetadataResponse(
                Errors.STALE_BROKER_EPOCH if request.broker_epoch < 0 else Errors.NONE
            )
        if isinstance(request, StopReplicaRequest):
            return StopReplicaResponse(Errors.NONE, dict.fromkeys(request.partition_states, Errors.NONE))
        if api == "Boom":
            raise RuntimeError("handler exploded")
        return {"echo": request}


@pytest.fixture
def apis() -> Any:
    registry = DEFAULT_APIS.copy()
    registry.register_json("Echo")
    registry.register_json("Boom")
    return registry


@pytest.fixture
def handler() -> BrokerSide:
    return BrokerSide()


@pytest.fixture
def server(handler: BrokerSide, apis: Any) -> Iterator[TransportServer]:
    srv = TransportServer("127.0.0.1", 0, handler, max_frame_bytes=8 * 1024 * 1024, apis=apis).start()
    yield srv
    srv.stop()


@pytest.fixture
def client(server: TransportServer, apis: Any) -> Iterator[TransportClient]:
    c = TransportClient("127.0.0.1", server.port, timeout_s=DEADLINE_S, apis=apis)
    yield c
    c.close()


def raw_exchange(sock: socket.socket, payload: bytes) -> tuple[int, Any, Any]:
    sock.sendall(struct.pack(">I", len(payload)) + payload)
    answer = framing.read_frame(sock, 1 << 20)
    assert answer is not None, "server closed the connection instead of answering"
    return framing.decode_response(answer)


def test_each_control_request_round_trips(client: TransportClient, handler: BrokerSide) -> None:
    lai, um, sr = leader_and_isr(3, 4), update_metadata(), stop_replica()
    lai_resp = client.request(LEADER_AND_ISR, lai)
    um_resp = client.request(UPDATE_METADATA, um)
    sr_resp = client.request(STOP_REPLICA, sr)
    assert handler.received == [(LEADER_AND_ISR, lai), (UPDATE_METADATA, um), (STOP_REPLICA, sr)]
    assert lai_resp == handler(LEADER_AND_ISR, lai)
    assert sr_resp == StopReplicaResponse(Errors.NONE, dict.fromkeys(sr.partition_states, Errors.NONE))
    assert um_resp == UpdateMetadataResponse(Errors.NONE)
    assert client.connects == 1


def test_leader_and_isr_of_ten_thousand_partitions(client: TransportClient, handler: BrokerSide) -> None:
    request = leader_and_isr(topics=200, partitions_per_topic=50)
    response = client.request(LEADER_AND_ISR, request)
    assert handler.received[0][1] == request
    assert len(response.partition_errors) == 10_000
    assert set(response.partition_errors.values()) == {Errors.NONE}


def test_malformed_frames_get_errors_and_the_connection_keeps_serving(server: TransportServer) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=DEADLINE_S) as sock:
        cid, _, error = raw_exchange(sock, b"{not json")
        assert cid == -1 and error[0] == "INVALID_REQUEST" and "not valid JSON" in error[1]
        cid, _, error = raw_exchange(sock, framing.encode_request("NoSuchApi", 7, {}))
        assert (cid, error[0]) == (7, "INVALID_REQUEST") and "unknown api 'NoSuchApi'" in error[1]
        cid, _, error = raw_exchange(sock, framing.encode_request(UPDATE_METADATA, 8, {"version": 1}))
        assert cid == 8 and "malformed UpdateMetadata request body: missing field" in error[1]
        bad_version = orjson.dumps({"api": "Echo", "v": 2, "cid": 9, "body": 1})
        assert raw_exchange(sock, bad_version)[2][0] == "INVALID_REQUEST"
        assert raw_exchange(sock, framing.encode_request("Echo", 10, [1, 2])) == (10, {"echo": [1, 2]}, None)


@pytest.mark.parametrize("length", [0, 8 * 1024 * 1024 + 1, 2**32 - 1])
def test_bad_length_is_answered_then_the_connection_closes(server: TransportServer, length: int) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=DEADLINE_S) as sock:
        sock.sendall(struct.pack(">I", length))
        answer = framing.read_frame(sock, 1 << 20)
        assert answer is not None
        cid, _, error = framing.decode_response(answer)
        assert cid == -1 and error[0] == "INVALID_REQUEST" and f"frame length {length}" in error[1]
        assert sock.recv(1) == b""  # closed: the stream cannot be resynchronised
    with socket.create_connection(("127.0.0.1", server.port), timeout=DEADLINE_S) as sock:
        assert raw_exchange(sock, framing.encode_request("Echo", 1, "still here"))[1] == {
            "echo": "still here"
        }


def test_handler_failure_is_a_remote_error_and_the_server_keeps_serving(client: TransportClient) -> None:
    with pytest.raises(RemoteError, match="UNKNOWN_SERVER_ERROR: RuntimeError: handler exploded") as err:
        client.request("Boom", {})
    assert err.value.code == "UNKNOWN_SERVER_ERROR"
    assert client.request("Echo", 5) == {"echo": 5}
    assert client.connects == 1


def test_connection_refused_is_a_typed_error() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    client = TransportClient("127.0.0.1", port, timeout_s=DEADLINE_S)
    with pytest.raises(TransportConnectionError, match=f"connection to 127.0.0.1:{port} refused"):
        client.request(UPDATE_METADATA, update_metadata())


def test_timeout_then_reconnect(client: TransportClient, handler: BrokerSide) -> None:
    handler.gate = threading.Event()
    client.timeout_s = 0.2
    with pytest.raises(TransportTimeoutError, match="no answer to Echo"):
        client.request("Echo", "slow")
    handler.gate.set()
    client.timeout_s = DEADLINE_S
    assert client.request("Echo", "fast") == {"echo": "fast"}
    assert client.connects == 2  # the timed-out connection was dropped, not reused


def test_client_reconnects_after_the_server_restarts(handler: BrokerSide, apis: Any) -> None:
    first = TransportServer("127.0.0.1", 0, handler, apis=apis).start()
    client = TransportClient("127.0.0.1", first.port, timeout_s=DEADLINE_S, apis=apis)
    assert client.request("Echo", 1) == {"echo": 1}
    first.stop()
    second = TransportServer("127.0.0.1", first.port, handler, apis=apis).start()
    try:
        assert client.request("Echo", 2) == {"echo": 2}  # the dead connection is noticed, not used
        assert client.connects == 2
    finally:
        client.close()
        second.stop()


def test_close_from_another_thread_aborts_a_request_in_flight(
    client: TransportClient, handler: BrokerSide
) -> None:
    handler.gate = threading.Event()
    errors: list[BaseException] = []

    def call() -> None:
        try:
            client.request("Echo", "x")
        except BaseException as e:
            errors.append(e)

    caller = threading.Thread(target=call)
    caller.start()
    assert handler.entered.wait(DEADLINE_S)
    client.close()
    caller.join(DEADLINE_S)
    handler.gate.set()
    assert not caller.is_alive() and len(errors) == 1 and isinstance(errors[0], TransportConnectionError)
    with pytest.raises(TransportConnectionError, match="is closed"):
        client.request("Echo", "y")


def test_listening_on_a_taken_port_is_a_transport_error(server: TransportServer, handler: BrokerSide) -> None:
    with pytest.raises(TransportError, match=f"cannot listen on 127.0.0.1:{server.port}"):
        TransportServer("127.0.0.1", server.port, handler).start()
