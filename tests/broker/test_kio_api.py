"""The ``kio`` extension point of the Kafka-protocol handler: a registered API is advertised by
ApiVersions, its body decoded and its answer encoded by Kafka's generated schemas, with header v2 /
response header v1 at flexible versions; a malformed body closes the connection."""

from __future__ import annotations

import datetime
import io
from typing import Any

from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i32, i32Timedelta

from kafka_controller.broker.kafka_wire import api_versions as av
from kafka_controller.broker.kafka_wire.handler import KafkaProtocolHandler
from kafka_controller.broker.kafka_wire.header import (
    API_VERSIONS,
    RequestHeader,
    decode_response_header,
    encode_request_header,
)
from kafka_controller.broker.kafka_wire.kio_api import KioApi, request_schema, response_schema
from kafka_controller.broker.kafka_wire.primitives import Reader, Writer
from kafka_controller.broker.metadata_cache import MetadataCache

ELECT_LEADERS = 43


def elect(header: RequestHeader, request: Any) -> Any:
    """Answers every partition asked for with error 0, echoing the client id as the message."""
    v = header.api_version
    Response = response_schema(ELECT_LEADERS, v)
    mod = __import__(Response.__module__, fromlist=["ReplicaElectionResult", "PartitionResult"])
    results = tuple(
        mod.ReplicaElectionResult(
            topic=t.topic,
            partition_result=tuple(
                mod.PartitionResult(partition_id=p, error_code=ErrorCode.none, error_message=header.client_id)
                for p in t.partitions
            ),
        )
        for t in request.topic_partitions
    )
    fields: dict[str, Any] = {"throttle_time": i32Timedelta.parse(datetime.timedelta(0))}
    if v >= 1:
        fields["error_code"] = ErrorCode.none
    return Response(replica_election_results=results, **fields)


def handler() -> KafkaProtocolHandler:
    return KafkaProtocolHandler(MetadataCache(1), lambda: "c", {ELECT_LEADERS: KioApi(43, 0, 2, 2, elect)})


def payload(version: int, body: bytes, client: str = "ops/op=1") -> bytes:
    table = {ELECT_LEADERS: (0, 2, 2)}
    w = Writer()
    encode_request_header(w, RequestHeader(ELECT_LEADERS, version, 7, client), table)
    return w.getvalue() + body


def elect_body(version: int) -> bytes:
    Request = request_schema(ELECT_LEADERS, version)
    mod = __import__(Request.__module__, fromlist=["TopicPartitions"])
    fields: dict[str, Any] = {"timeout": i32Timedelta.parse(datetime.timedelta(seconds=5))}
    if version >= 1:
        fields["election_type"] = 0
    req = Request(topic_partitions=(mod.TopicPartitions(topic="t", partitions=(i32(0), i32(3))),), **fields)
    buf = io.BytesIO()
    entity_writer(Request)(buf, req)
    return buf.getvalue()


def test_registered_api_round_trips_at_every_version() -> None:
    h = handler()
    for version in (0, 1, 2):
        answer = h.handle(payload(version, elect_body(version)))
        assert answer is not None
        reader = Reader(answer)
        assert decode_response_header(reader, ELECT_LEADERS, version, {ELECT_LEADERS: (0, 2, 2)}) == 7
        response, _ = entity_reader(response_schema(ELECT_LEADERS, version))(reader.data, reader.pos)
        (result,) = response.replica_election_results
        assert result.topic == "t"
        assert [(p.partition_id, p.error_message) for p in result.partition_result] == [
            (0, "ops/op=1"),
            (3, "ops/op=1"),
        ]


def test_registered_api_is_advertised_and_bad_bodies_close() -> None:
    h = handler()
    w = Writer()
    encode_request_header(w, RequestHeader(API_VERSIONS, 3, 1, "c"))
    av.encode_request(w, av.ApiVersionsRequest("c", "1"), 3)
    answer = h.handle(w.getvalue())
    assert answer is not None
    reader = Reader(answer)
    reader.int32()
    assert (ELECT_LEADERS, 0, 2) in av.decode_response(reader, 3).api_keys
    assert h.handle(payload(2, elect_body(2)[:-3])) is None  # truncated
    assert h.handle(payload(2, elect_body(2) + b"\x00\x01")) is None  # trailing bytes
    assert h.handle(payload(3, elect_body(2))) is None  # above the range
