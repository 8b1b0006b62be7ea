"""DescribeCluster (key 60), version 0 (flexible from v0, so response header v1).

Request: bool IncludeClusterAuthorizedOperations. Response: int32 ThrottleTimeMs, int16 ErrorCode,
nullable ErrorMessage, ClusterId, int32 ControllerId, Brokers of (BrokerId, Host, Port, nullable
Rack), int32 ClusterAuthorizedOperations.
"""

from __future__ import annotations

from dataclasses import dataclass

from kafka_controller.broker.kafka_wire.metadata import (
    AUTHORIZED_OPERATIONS_OMITTED,
    MetadataBroker,
    encode_broker,
)
from kafka_controller.broker.kafka_wire.primitives import Reader, Writer

MAX_VERSION = 0


@dataclass(frozen=True, slots=True)
class DescribeClusterRequest:
    include_cluster_authorized_operations: bool = False


@dataclass(frozen=True, slots=True)
class DescribeClusterResponse:
    error_code: int
    error_message: str | None
    cluster_id: str
    controller_id: int
    brokers: tuple[MetadataBroker, ...]
    throttle_time_ms: int = 0
    cluster_authorized_operations: int = AUTHORIZED_OPERATIONS_OMITTED


def decode_request(reader: Reader, version: int) -> DescribeClusterRequest:
    include = reader.boolean()
    reader.skip_tagged_fields()
    return DescribeClusterRequest(include)


def encode_request(writer: Writer, request: DescribeClusterRequest, version: int) -> None:
    writer.boolean(request.include_cluster_authorized_operations)
    writer.empty_tagged_fields()


def encode_response(writer: Writer, response: DescribeClusterResponse, version: int) -> None:
    writer.int32(response.throttle_time_ms)
    writer.int16(response.error_code)
    writer.nullable_string(response.error_message, True)
    writer.string(response.cluster_id, True)
    writer.int32(response.controller_id)
    writer.array_length(len(response.brokers), True)
    for b in response.brokers:
        encode_broker(writer, b, True)
    writer.int32(response.cluster_authorized_operations)
    writer.empty_tagged_fields()


def decode_response(reader: Reader, version: int) -> DescribeClusterResponse:
    throttle, error_code = reader.int32(), reader.int16()
    message, cluster_id = reader.nullable_string(True), reader.string(True)
    controller_id = reader.int32()
    brokers = []
    for _ in range(max(reader.array_length(True), 0)):
        b = MetadataBroker(reader.int32(), reader.string(True), reader.int32(), reader.nullable_string(True))
        reader.skip_tagged_fields()
        brokers.append(b)
    ops = reader.int32()
    reader.skip_tagged_fields()
    return DescribeClusterResponse(
        error_code, message, cluster_id, controller_id, tuple(brokers), throttle, ops
    )
