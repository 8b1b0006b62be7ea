"""Kafka's binary protocol codec (``broker.kafka_wire``): primitives, headers, every version of
ApiVersions and Metadata, DescribeCluster, and the broker's answers from its metadata cache."""

from __future__ import annotations

import dataclasses
import socket
import struct
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_controller.broker import apis as A
from kafka_controller.broker.kafka_wire import api_versions as av
from kafka_controller.broker.kafka_wire import describe_cluster as dc
from kafka_controller.broker.kafka_wire import metadata as md
from kafka_controller.broker.kafka_wire.handler import (
    LEADER_NOT_AVAILABLE,
    REPLICA_NOT_AVAILABLE,
    UNKNOWN_TOPIC_ID,
    UNKNOWN_TOPIC_OR_PARTITION,
    UNSUPPORTED_VERSION,
    KafkaProtocolHandler,
    topic_id_bytes,
)
from kafka_controller.broker.kafka_wire.header import (
    API_VERSIONS,
    DESCRIBE_CLUSTER,
    KAFKA_FRAME_FIRST_BYTE,
    METADATA,
    RequestHeader,
    decode_request_header,
    decode_response_header,
    encode_request_header,
    is_kafka_frame,
)
from kafka_controller.broker.kafka_wire.primitives import KafkaDecodeError, Reader, Writer
from kafka_controller.broker.metadata_cache import MetadataCache
from kafka_controller.domain.requests import UpdateMetadataPartitionState
from kafka_controller.domain.values import Broker, EndPoint
from kafka_controller.transport import framing
from kafka_controller.transport.server import RAW_FIRST_BYTE, TransportServer, is_raw_frame
from tests.broker.helpers import update_metadata

CODECS: dict[int, Any] = {API_VERSIONS: av, METADATA: md, DESCRIBE_CLUSTER: dc}
TOPIC_ID = "7w0kTq5xQ3yM1n8bV2cD4g"


def request_payload(key: int, version: int, request: Any, cid: int = 42, client: str | None = "t") -> bytes:
    w = Writer()
    encode_request_header(w, RequestHeader(key, version, cid, client))
    CODECS[key].encode_request(w, request, version)
    return w.getvalue()


def call(handler: KafkaProtocolHandler, key: int, version: int, request: Any, cid: int = 42) -> Any:
    answer = handler.handle(request_payload(key, version, request, cid))
    assert answer is not None
    r = Reader(answer)
    assert decode_response_header(r, key, version) == cid
    response = CODECS[key].decode_response(r, version)
    assert r.remaining == 0
    return response


def ums(topic: str, p: int, leader: int, isr: tuple[int, ...], replicas: tuple[int, ...]) -> Any:
    return UpdateMetadataPartitionState(topic, p, 1, leader, 5, isr, 0, replicas, ())


@pytest.fixture
def handler() -> KafkaProtocolHandler:
    cache = MetadataCache(1)
    brokers = [Broker(i, (EndPoint("127.0.0.1", 9090 + i),), "r1" if i == 1 else None) for i in (1, 2, 3)]
    states = [
        ums("b", 1, 2, (2, 3), (2, 3)),
        ums("b", 0, 1, (1, 2), (1, 2)),
        ums("a", 0, 3, (3, 1), (3, 1, 2)),
        ums("gone", 0, 4, (4,), (4,)),  # its leader is not a live broker
    ]
    req = update_metadata(states, controller_id=2, brokers=brokers)
    cache.update_metadata(dataclasses.replace(req, topic_ids={"b": TOPIC_ID}))
    return KafkaProtocolHandler(cache, lambda: "cluster-1")


# -- primitives --------------------------------------------------------------------------------------------
@given(
    st.integers(-(2**7), 2**7 - 1),
    st.integers(-(2**15), 2**15 - 1),
    st.integers(-(2**31), 2**31 - 1),
    st.integers(-(2**63), 2**63 - 1),
    st.integers(0, 2**31 - 1),
    st.one_of(st.none(), st.text(max_size=40)),
    st.booleans(),
    st.lists(st.integers(-(2**31), 2**31 - 1), max_size=300),
)
def test_primitives_round_trip(
    i8: int, i16: int, i32: int, i64: int, u: int, s: str | None, flexible: bool, ints: list[int]
) -> None:
    w = Writer()
    w.int8(i8), w.int16(i16), w.int32(i32), w.int64(i64), w.uvarint(u)
    w.nullable_string(s, flexible), w.int32_array(ints, flexible), w.uuid(bytes(range(16)))
    w.array_length(None, flexible), w.empty_tagged_fields()
    r = Reader(w.getvalue())
    assert (r.int8(), r.int16(), r.int32(), r.int64(), r.uvarint()) == (i8, i16, i32, i64, u)
    assert r.nullable_string(flexible) == s
    assert [r.int32() for _ in range(r.array_length(flexible))] == ints
    assert r.uuid() == bytes(range(16))
    assert r.array_length(flexible) == -1
    r.skip_tagged_fields()
    assert r.remaining == 0


def test_compact_forms_are_length_plus_one_varints() -> None:
    w = Writer()
    w.string("ab", flexible=True), w.nullable_string(None, flexible=True), w.int32_array([7] * 200, True)
    assert w.getvalue()[:4] == b"\x03ab\x00" and w.getvalue()[4:6] == b"\xc9\x01"


def test_reader_refuses_what_is_not_there() -> None:
    for data, read in [
        (b"\x00", Reader.int16),
        (b"\x00\x05ab", Reader.string),
        (b"\xff\xff", Reader.string),  # null where a string is required
        (b"\x00\x00\x01\x00", Reader.array_length),  # 256 elements in 0 bytes
        (b"\x80\x80\x80\x80\x80\x01", Reader.uvarint),
        (b"\x00\x02\xff\xfe", Reader.string),  # not UTF-8
    ]:
        with pytest.raises(KafkaDecodeError):
            read(Reader(data))


def test_every_kafka_api_key_starts_with_a_zero_byte_and_json_never_does() -> None:
    for key in range(0, 256):  # Kafka defines 0-92 today; any key below 256 has high byte 0x00
        payload = request_payload(API_VERSIONS, 0, av.ApiVersionsRequest()).replace(
            b"\x00\x12", struct.pack(">h", key), 1
        )
        assert payload[0] == 0 and is_kafka_frame(payload)
    assert not is_kafka_frame(framing.encode_request(A.METADATA, 1, {}))
    # a key of 256 or more: the version's high byte is zero all the same
    assert all(is_kafka_frame(struct.pack(">hh", key, 3)) for key in (256, 0x7B22, -1))
    assert struct.unpack(">h", b"{\x00")[0] == 0x7B00 > 255


# -- ApiVersions ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("version", range(0, 4))
def test_api_versions_every_version(handler: KafkaProtocolHandler, version: int) -> None:
    request = av.ApiVersionsRequest("kcat", "1.7.1") if version >= 3 else av.ApiVersionsRequest()
    r = Reader(request_payload(API_VERSIONS, version, request))
    assert decode_request_header(r).api_version == version
    assert av.decode_request(r, version) == request
    response = call(handler, API_VERSIONS, version, request)
    assert response.error_code == 0
    assert set(response.api_keys) == {(3, 0, 11), (18, 0, 3), (60, 0, 0)}


def test_api_versions_above_3_get_the_v0_format_with_unsupported_version(
    handler: KafkaProtocolHandler,
) -> None:
    w = Writer()
    encode_request_header(w, RequestHeader(API_VERSIONS, 4, 9, "kafka-python"))
    w.empty_tagged_fields()  # a v4 body we do not know: the reply does not depend on it
    answer = handler.handle(w.getvalue())
    assert answer is not None
    r = Reader(answer)
    assert r.int32() == 9
    response = av.decode_response(r, 0)
    assert r.remaining == 0
    assert response.error_code == UNSUPPORTED_VERSION and (18, 0, 3) in response.api_keys


# -- Metadata ---------------------------------------------------------------------------------------------
def sample_response(version: int) -> md.MetadataResponse:
    parts = tuple(
        md.MetadataPartition(
            0, p, p % 3, 7 if version >= 7 else -1, (1, 2, 3), (1, 2), (3,) if version >= 5 else ()
        )
        for p in range(5)
    )
    return md.MetadataResponse(
        (md.MetadataBroker(1, "h1", 9091, "r" if version >= 1 else None), md.MetadataBroker(2, "h2", 9092)),
        "cid" if version >= 2 else None,
        2 if version >= 1 else -1,
        (
            md.MetadataTopic(
                0,
                "t",
                parts,
                version >= 1,
                bytes(range(16)) if version >= 10 else md.ZERO_UUID,
                8 if version >= 8 else md.AUTHORIZED_OPERATIONS_OMITTED,
            ),
            md.MetadataTopic(3, "missing"),
        ),
        5 if version >= 3 else 0,
        9 if 8 <= version <= 10 else md.AUTHORIZED_OPERATIONS_OMITTED,
    )


@pytest.mark.parametrize("version", range(0, 12))
def test_metadata_codec_round_trips_every_version(version: int) -> None:
    topics = (md.MetadataRequestTopic("t"), md.MetadataRequestTopic("u"))
    for request in [
        md.MetadataRequest(topics, version < 4, version in (8, 9, 10), version >= 8),
        md.MetadataRequest(None, True),
    ]:
        w = Writer()
        md.encode_request(w, request, version)
        r = Reader(w.getvalue())
        assert md.decode_request(r, version) == request and r.remaining == 0
    response = sample_response(version)
    w = Writer()
    md.encode_response(w, response, version)
    r = Reader(w.getvalue())
    assert md.decode_response(r, version) == response and r.remaining == 0


@pytest.mark.parametrize("version", range(0, 12))
def test_metadata_answers_every_version_from_the_cache(handler: KafkaProtocolHandler, version: int) -> None:
    everything = md.MetadataRequest(None if version else ())
    response = call(handler, METADATA, version, everything)
    assert [(b.node_id, b.host, b.port) for b in response.brokers] == [
        (i, "127.0.0.1", 9090 + i) for i in (1, 2, 3)
    ]
    assert response.brokers[0].rack == ("r1" if version >= 1 else None)
    assert response.controller_id == (2 if version >= 1 else -1)
    assert response.cluster_id == ("cluster-1" if version >= 2 else None)
    assert [t.name for t in response.topics] == ["a", "b", "gone"]
    a, b, gone = response.topics
    assert [(p.partition_index, p.leader_id, p.replica_nodes, p.isr_nodes) for p in b.partitions] == [
        (0, 1, (1, 2), (1, 2)),
        (1, 2, (2, 3), (2, 3)),
    ]
    assert all(p.error_code == 0 for p in a.partitions + b.partitions)
    assert topic_id_bytes(TOPIC_ID) != md.ZERO_UUID
    assert b.topic_id == (topic_id_bytes(TOPIC_ID) if version >= 10 else md.ZERO_UUID)
    assert [p.leader_epoch for p in b.partitions] == ([5, 5] if version >= 7 else [-1, -1])
    (p,) = gone.partitions
    assert p.leader_id == -1 and p.error_code == LEADER_NOT_AVAILABLE
    # v0 lists live replicas only and says REPLICA_NOT_AVAILABLE; v1+ lists them as ZooKeeper does.
    assert (p.replica_nodes, p.isr_nodes) == (((), ()) if version == 0 else ((4,), (4,)))

    named = md.MetadataRequest((md.MetadataRequestTopic("b"), md.MetadataRequestTopic("nope")), False)
    response = call(handler, METADATA, version, named)
    assert [(t.name, t.error_code, len(t.partitions)) for t in response.topics] == [
        ("b", 0, 2),
        ("nope", UNKNOWN_TOPIC_OR_PARTITION, 0),
    ]
    if version >= 1:
        assert call(handler, METADATA, version, md.MetadataRequest(())).topics == ()


def test_metadata_v0_says_replica_not_available_for_a_dead_replica() -> None:
    cache = MetadataCache(1)
    cache.update_metadata(
        update_metadata([ums("t", 0, 1, (1, 2), (1, 2))], brokers=[Broker(1, (EndPoint("h", 1),))])
    )
    handler = KafkaProtocolHandler(cache, lambda: None)
    (p,) = call(handler, METADATA, 0, md.MetadataRequest(None)).topics[0].partitions
    assert (p.error_code, p.leader_id, p.replica_nodes, p.isr_nodes) == (REPLICA_NOT_AVAILABLE, 1, (1,), (1,))
    (p,) = call(handler, METADATA, 1, md.MetadataRequest(None)).topics[0].partitions
    assert (p.error_code, p.replica_nodes, p.isr_nodes) == (0, (1, 2), (1, 2))


# -- DescribeCluster, refusals ----------------------------------------------------------------------------
def test_describe_cluster_v0(handler: KafkaProtocolHandler) -> None:
    response = call(handler, DESCRIBE_CLUSTER, 0, dc.DescribeClusterRequest(False))
    assert (response.error_code, response.cluster_id, response.controller_id) == (0, "cluster-1", 2)
    assert [(b.node_id, b.port, b.rack) for b in response.brokers] == [
        (1, 9091, "r1"),
        (2, 9092, None),
        (3, 9093, None),
    ]


@pytest.mark.parametrize(
    "payload",
    [
        struct.pack(">hhi", 0, 0, 1) + b"\xff\xff",  # Produce: not answered
        struct.pack(">hhi", 999, 0, 1) + b"\xff\xff",  # no such key
        struct.pack(">hhi", METADATA, 12, 1) + b"\xff\xff\x00",  # beyond Kafka 2.8's Metadata
        struct.pack(">hhi", DESCRIBE_CLUSTER, 1, 1) + b"\xff\xff\x00",
        struct.pack(">hhi", METADATA, 1, 1) + b"\xff\xff\x00\x00\x00\x05\x00",  # truncated topics
        struct.pack(">hh", METADATA, 1),  # truncated header
    ],
)
def test_what_is_not_answered_closes_the_connection(handler: KafkaProtocolHandler, payload: bytes) -> None:
    assert handler.handle(payload) is None


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=200))
def test_arbitrary_bytes_raise_only_the_decode_error(data: bytes) -> None:
    for key, codec in CODECS.items():
        for version in range(0, 12 if key == METADATA else 4):
            try:
                r = Reader(data)
                decode_request_header(r)
                codec.decode_request(r, version)
            except KafkaDecodeError:
                pass


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from([API_VERSIONS, METADATA, DESCRIBE_CLUSTER, 0, 999]),
    st.integers(-1, 13),
    st.binary(max_size=120),
)
def test_the_handler_never_raises(key: int, version: int, body: bytes) -> None:
    handler = KafkaProtocolHandler(MetadataCache(1), lambda: None)
    answer = handler.handle(struct.pack(">hhih", key, version, 3, -1) + body)
    assert answer is None or answer[:4] == b"\x00\x00\x00\x03"


# -- one listener, two protocols -----------------------------------------------------------------------------
def test_one_listener_serves_both_protocols_and_closes_only_on_kafka_garbage(
    handler: KafkaProtocolHandler,
) -> None:
    def json_handler(api: str, request: Any) -> Any:
        return A.MetadataCacheResponse("NONE", 2, (), ())

    with TransportServer("127.0.0.1", 0, json_handler, raw_handler=handler.handle) as server:
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
            framing.write_frame(sock, request_payload(METADATA, 11, md.MetadataRequest(None), cid=5))
            answer = framing.read_frame(sock, 1 << 20)
            assert answer is not None and struct.unpack(">i", answer[:4])[0] == 5
            framing.write_frame(sock, framing.encode_request(A.METADATA, 6, {}))
            answer = framing.read_frame(sock, 1 << 20)
            assert answer is not None and orjson.loads(answer)["cid"] == 6
            framing.write_frame(sock, struct.pack(">hhih", 0, 9, 7, -1))  # Produce: the connection closes
            assert framing.read_frame(sock, 1 << 20) is None
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:  # still serving
            framing.write_frame(
                sock, request_payload(API_VERSIONS, 3, av.ApiVersionsRequest("x", "1"), cid=8)
            )
            answer = framing.read_frame(sock, 1 << 20)
            assert answer is not None and struct.unpack(">ih", answer[:6]) == (8, 0)


def test_oversized_and_truncated_frames_close_the_connection(handler: KafkaProtocolHandler) -> None:
    def json_handler(api: str, request: Any) -> Any:
        raise AssertionError("no private-protocol request is sent here")

    with TransportServer(
        "127.0.0.1", 0, json_handler, raw_handler=handler.handle, max_frame_bytes=1024
    ) as server:
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
            sock.sendall(struct.pack(">I", 4096) + struct.pack(">hhi", METADATA, 1, 1))  # over the limit
            sock.shutdown(socket.SHUT_WR)
            assert sock.recv(16) == b""  # closed without an answer, as Kafka does
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
            sock.sendall(struct.pack(">I", 4096) + struct.pack(">hhi", 300, 1, 1))  # a key of 256 or more
            sock.shutdown(socket.SHUT_WR)
            assert sock.recv(16) == b""  # no JSON refusal either
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
            sock.sendall(struct.pack(">I", 100) + struct.pack(">hhi", METADATA, 1, 1))  # 8 of 100 bytes
            sock.shutdown(socket.SHUT_WR)
            assert sock.recv(16) == b""
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:  # still serving
            framing.write_frame(sock, request_payload(API_VERSIONS, 0, av.ApiVersionsRequest(), cid=3))
            answer = framing.read_frame(sock, 1 << 20)
            assert answer is not None and struct.unpack(">ih", answer[:6]) == (3, 0)


@pytest.mark.parametrize("version", [10, 11])
def test_metadata_by_topic_id_alone_is_unknown_topic_id(handler: KafkaProtocolHandler, version: int) -> None:
    by_id = md.MetadataRequest((md.MetadataRequestTopic(None, topic_id_bytes(TOPIC_ID)),), False)
    (topic,) = call(handler, METADATA, version, by_id).topics
    assert (topic.error_code, topic.name, topic.partitions) == (UNKNOWN_TOPIC_ID, "", ())


def test_garbage_that_is_not_a_kafka_frame_still_gets_the_private_protocols_refusal(
    handler: KafkaProtocolHandler,
) -> None:
    def json_handler(api: str, request: Any) -> Any:
        return A.MetadataCacheResponse("NONE", 2, (), ())

    assert RAW_FIRST_BYTE == KAFKA_FRAME_FIRST_BYTE == 0
    with (
        TransportServer("127.0.0.1", 0, json_handler, raw_handler=handler.handle) as server,
        socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock,
    ):
        for garbage in (b"[1]", b"not json", b"\x7f\x01\x02\x03 no zero byte"):
            assert not is_raw_frame(garbage)
            framing.write_frame(sock, garbage)
            answer = framing.read_frame(sock, 1 << 20)
            assert answer is not None and orjson.loads(answer)["error"]["code"] == "INVALID_REQUEST"
        framing.write_frame(sock, request_payload(METADATA, 4, md.MetadataRequest(None), cid=11))
        answer = framing.read_frame(sock, 1 << 20)
        assert answer is not None and struct.unpack(">i", answer[:4])[0] == 11


@pytest.mark.parametrize("key", [256, 300, 0x7B22, 0x7FFF, -1, -32768])
def test_an_unknown_api_key_of_any_size_closes_the_connection_without_a_json_answer(
    handler: KafkaProtocolHandler, key: int
) -> None:
    """Kafka's SocketServer closes a connection whose request names an api key it does not know
    (``ApiKeys.forId`` fails while the header is parsed). A key of 256 or more has a non-zero high
    byte (0x7B22 even starts with the private protocol's ``{"``), but the version's high byte is
    zero, which no JSON text has: the frame still reaches the Kafka handler."""

    def json_handler(api: str, request: Any) -> Any:
        raise AssertionError(f"a Kafka frame reached the private protocol as {api}")

    frame = struct.pack(">hhih", key, 1, 5, 4) + b"test"
    assert is_raw_frame(frame)
    with (
        TransportServer("127.0.0.1", 0, json_handler, raw_handler=handler.handle) as server,
        socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock,
    ):
        framing.write_frame(sock, frame)
        assert framing.read_frame(sock, 1 << 20) is None  # closed, no answer of either protocol
