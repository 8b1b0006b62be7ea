"""The wire protocol under hostile bytes: every frame gets one answer, and the server keeps serving.

A ``TransportServer`` with the real API registry (control and broker APIs) and an echo handler
that counts what reaches it; raw sockets send what a confused or hostile peer would. The rule
(``transport.server``): bad JSON, a bad envelope, an unknown API or a malformed body is answered
with INVALID_REQUEST and the connection stays usable; a bad length prefix is answered and the
connection closed; the server as a whole never stops serving. Body decoders are fuzzed on their own
too: a body either decodes to the API's request type or is refused with a one-line
``ProtocolError`` — never another exception.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafka_controller.broker import apis as A
from kafka_controller.domain.requests import Errors
from kafka_controller.domain.values import TopicPartition
from kafka_controller.transport import framing
from kafka_controller.transport.codec import DEFAULT_APIS
from kafka_controller.transport.errors import ProtocolError
from kafka_controller.transport.server import TransportServer
from tests.broker.helpers import broker, leader_and_isr, state, stop_replica, um_state, update_metadata
from tests.fuzz import strategies as S

FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
MAX_FRAME = 64 * 1024
PING = framing.encode_request(A.METADATA, 7, {})


class Echo:
    """Answers Metadata with an empty cache; counts the requests that got through decoding."""

    def __init__(self) -> None:
        self.handled = 0

    def __call__(self, api: str, request: Any) -> Any:
        self.handled += 1
        if api == A.METADATA:
            return A.MetadataCacheResponse(str(Errors.NONE), 1, (), ())
        raise RuntimeError(f"the fuzz server does not serve {api}")


@pytest.fixture(scope="module")
def server() -> Iterator[TransportServer]:
    s = TransportServer("127.0.0.1", 0, Echo(), max_frame_bytes=MAX_FRAME, name="fuzz-server").start()
    yield s
    s.stop()


def _connect(server: TransportServer) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=5.0)
    sock.settimeout(5.0)
    return sock


def _answer(sock: socket.socket) -> dict[str, Any] | None:
    payload = framing.read_frame(sock, framing.DEFAULT_MAX_FRAME_BYTES)
    return None if payload is None else orjson.loads(payload)


def _still_serves(server: TransportServer, sock: socket.socket | None = None) -> None:
    """A valid Metadata request gets a body back (on ``sock``, else on a new connection)."""
    own = sock is None
    sock = sock or _connect(server)
    try:
        framing.write_frame(sock, PING)
        answer = _answer(sock)
        assert answer is not None and answer.get("cid") == 7 and "body" in answer, answer
    finally:
        if own:
            sock.close()


def _is_error(answer: dict[str, Any] | None, code: str = Errors.INVALID_REQUEST) -> bool:
    return answer is not None and isinstance(answer.get("error"), dict) and answer["error"]["code"] == code


@FUZZ
@given(payload=st.binary(min_size=1, max_size=256))
def test_garbage_payloads_are_refused_and_the_connection_stays_usable(
    server: TransportServer, payload: bytes
) -> None:
    with _connect(server) as sock:
        framing.write_frame(sock, payload)
        answer = _answer(sock)
        assert answer is not None, "the server closed the connection instead of answering"
        assert _is_error(answer) or "body" in answer, answer
        _still_serves(server, sock)


ENVELOPE = {"api": A.METADATA, "v": framing.WIRE_VERSION, "cid": 3, "body": {}}


@FUZZ
@given(doc=S.mutated(ENVELOPE))
def test_mutated_envelopes_get_exactly_one_answer(server: TransportServer, doc: Any) -> None:
    payload = S.serialize(doc)
    with _connect(server) as sock:
        framing.write_frame(sock, payload)
        answer = _answer(sock)
        assert answer is not None
        if len(payload) > MAX_FRAME:  # refused by size, and the stream closed (cannot resynchronise)
            assert _is_error(answer) and sock.recv(1) == b"", answer
            _still_serves(server)
            return
        if "error" in answer:
            assert answer["error"]["code"] in (Errors.INVALID_REQUEST, Errors.UNKNOWN_SERVER_ERROR), answer
            assert "\n" not in answer["error"]["message"]
            cid = doc.get("cid") if isinstance(doc, dict) else None
            expected = cid if type(cid) is int and -(2**63) <= cid < 2**64 else -1
            assert answer["cid"] in (expected, -1), f"error for cid {cid!r} carries cid {answer['cid']}"
        _still_serves(server, sock)


@pytest.mark.parametrize("length", [0, MAX_FRAME + 1, 2**32 - 1])
def test_bad_length_prefixes_are_answered_then_the_connection_closes(
    server: TransportServer, length: int
) -> None:
    with _connect(server) as sock:
        sock.sendall(struct.pack(">I", length) + b"{}")
        assert _is_error(_answer(sock))
        assert sock.recv(1) == b"", "the connection should be closed: the stream cannot be resynchronised"
    _still_serves(server)


@FUZZ
@given(cut=st.integers(1, len(PING) + 3))
def test_peers_that_vanish_mid_frame_do_not_stop_the_server(server: TransportServer, cut: int) -> None:
    frame = struct.pack(">I", len(PING)) + PING
    sock = _connect(server)
    sock.sendall(frame[:cut])
    sock.close()
    _still_serves(server)


# -- request bodies, decoded on their own ----------------------------------------------------------
def _valid_bodies() -> dict[str, Any]:
    tp = ["good", 0]
    isr = {"partition": 0, "leader_epoch": 0, "new_isr": [1], "current_isr_version": 0}
    return {
        "LeaderAndIsr": DEFAULT_APIS.get("LeaderAndIsr").encode_request(
            leader_and_isr([state("good", 0, 1, 0, [1, 2])])
        ),
        "UpdateMetadata": DEFAULT_APIS.get("UpdateMetadata").encode_request(
            update_metadata([um_state("good", 0, 1, [1, 2])], brokers=[broker(1)])
        ),
        "StopReplica": DEFAULT_APIS.get("StopReplica").encode_request(
            stop_replica({TopicPartition("good", 0): (3, True)})
        ),
        A.CONTROLLED_SHUTDOWN: {"broker_id": 1, "broker_epoch": 5},
        A.ALTER_ISR: {"broker_id": 1, "broker_epoch": 5, "topics": [{"name": "good", "partitions": [isr]}]},
        A.ELECT_LEADERS: {"election_type": "preferred", "partitions": [tp]},
        A.ALTER_PARTITION_REASSIGNMENTS: {
            "reassignments": [{"topic": "good", "partition": 0, "replicas": [1, 2]}]
        },
        A.LIST_PARTITION_REASSIGNMENTS: {"partitions": [tp]},
        A.FETCH: {
            "replica_id": 2,
            "topics": ["good"],
            "topic": [0],
            "partition": [0],
            "fetch_offset": [0],
            "leader_epoch": [0],
            "session_id": 3,
            "session_epoch": 2,
            "forgotten_topic": [0],
            "forgotten_partition": [1],
        },
        A.DESCRIBE_REPLICAS: {"partitions": [tp]},
        A.DESCRIBE_CONTROLLER_CONTEXT: {"timeout_ms": 1000},
    }


VALID_BODIES = _valid_bodies()


@FUZZ
@given(data=st.data(), api=st.sampled_from(sorted(VALID_BODIES)))
def test_request_bodies_decode_or_are_refused_in_one_line(data: st.DataObject, api: str) -> None:
    body = data.draw(S.mutated(VALID_BODIES[api]) if isinstance(VALID_BODIES[api], dict) else S.JSON_VALUES)
    try:
        DEFAULT_APIS.decode_request(api, body)
    except ProtocolError as e:
        assert "\n" not in str(e), str(e)[:200]
    except Exception as e:
        raise AssertionError(f"{type(e).__name__} escaped the {api} decoder: {str(e)[:200]}") from e


@pytest.mark.parametrize(
    ("api", "body"),
    [
        (A.ALTER_PARTITION_REASSIGNMENTS, {"reassignments": [{"topic": list(range(5000)), "partition": 0}]}),
        (A.ALTER_ISR, {"broker_id": list(range(5000)), "broker_epoch": 1, "topics": []}),
        (A.ELECT_LEADERS, {"election_type": "preferred", "partitions": [["t", list(range(5000))]]}),
    ],
    ids=["reassignment-topic", "alter-isr-broker", "elect-partition"],
)
def test_refusals_do_not_echo_huge_values(api: str, body: Any) -> None:
    """The refusal goes back to the peer and into the server's log: one short line."""
    with pytest.raises(ProtocolError) as refused:
        DEFAULT_APIS.decode_request(api, body)
    assert len(str(refused.value)) <= 500, f"{len(str(refused.value))}-character refusal"


def test_a_fetch_round_trips_with_its_forgotten_partitions_and_refuses_a_topic_out_of_range() -> None:
    fetch = A.FetchRequest(2, ("a", "b"), (0, 1), (5, 6), (1, 2), 7, 3, ("b", "c"), (4, 5))
    body = orjson.loads(orjson.dumps(DEFAULT_APIS.get(A.FETCH).encode_request(fetch)))
    assert DEFAULT_APIS.decode_request(A.FETCH, body) == fetch
    for column in ("topic", "forgotten_topic"):
        for index in (-1, 3):
            bad = {**body, column: [index] * len(body[column])}
            with pytest.raises(ProtocolError, match="out of range"):
                DEFAULT_APIS.decode_request(A.FETCH, bad)
