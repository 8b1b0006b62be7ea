"""Metadata (key 3), versions 0-11 as in Kafka 2.8; flexible (compact, tagged) from v9.

Request: array Topics (v0: empty means all; v1+: null means all, empty means none) of Name, with a
TopicId UUID before it and a nullable Name from v10; bool AllowAutoTopicCreation from v4;
bool IncludeClusterAuthorizedOperations v8-10; bool IncludeTopicAuthorizedOperations from v8.

Response: int32 ThrottleTimeMs (v3+); Brokers of (NodeId, Host, Port, Rack v1+); nullable ClusterId
(v2+); ControllerId (v1+); Topics of (ErrorCode, Name, TopicId v10+, IsInternal v1+, Partitions of
(ErrorCode, PartitionIndex, LeaderId, LeaderEpoch v7+, ReplicaNodes, IsrNodes, OfflineReplicas v5+),
TopicAuthorizedOperations v8+); ClusterAuthorizedOperations v8-10.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from kafka_controller.broker.kafka_wire.primitives import Reader, Writer

MAX_VERSION = 11
FLEXIBLE_FROM = 9
ZERO_UUID = bytes(16)
#: Kafka's "authorized operations were not asked for".
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)

_PARTITION_HEAD = struct.Struct(">hii")  # error code, partition index, leader id
_I32 = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class MetadataRequestTopic:
    name: str | None
    topic_id: bytes = ZERO_UUID


@dataclass(frozen=True, slots=True)
class MetadataRequest:
    topics: tuple[MetadataRequestTopic, ...] | None  # None: every topic
    allow_auto_topic_creation: bool = True
    include_cluster_authorized_operations: bool = False
    include_topic_authorized_operations: bool = False


@dataclass(frozen=True, slots=True)
class MetadataBroker:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True, slots=True)
class MetadataPartition:
    error_code: int
    partition_index: int
    leader_id: int
    leader_epoch: int
    replica_nodes: tuple[int, ...]
    isr_nodes: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class MetadataTopic:
    error_code: int
    name: str | None
    partitions: tuple[MetadataPartition, ...] = ()
    is_internal: bool = False
    topic_id: bytes = ZERO_UUID
    topic_authorized_operations: int = AUTHORIZED_OPERATIONS_OMITTED


@dataclass(frozen=True, slots=True)
class MetadataResponse:
    brokers: tuple[MetadataBroker, ...]
    cluster_id: str | None
    controller_id: int
    topics: tuple[MetadataTopic, ...]
    throttle_time_ms: int = 0
    cluster_authorized_operations: int = AUTHORIZED_OPERATIONS_OMITTED


# -- request --------------------------------------------------------------------------------------------
def decode_request(reader: Reader, version: int) -> MetadataRequest:
    flexible = version >= FLEXIBLE_FROM
    n = reader.array_length(flexible)
    topics: tuple[MetadataRequestTopic, ...] | None
    if n < 0 or (n == 0 and version == 0):
        topics = None
    else:
        items = []
        for _ in range(n):
            topic_id = reader.uuid() if version >= 10 else ZERO_UUID
            name = reader.nullable_string(flexible) if version >= 10 else reader.string(flexible)
            if flexible:
                reader.skip_tagged_fields()
            items.append(MetadataRequestTopic(name, topic_id))
        topics = tuple(items)
    auto_create = reader.boolean() if version >= 4 else True
    cluster_ops = reader.boolean() if 8 <= version <= 10 else False
    topic_ops = reader.boolean() if version >= 8 else False
    if flexible:
        reader.skip_tagged_fields()
    return MetadataRequest(topics, auto_create, cluster_ops, topic_ops)


def encode_request(writer: Writer, request: MetadataRequest, version: int) -> None:
    flexible = version >= FLEXIBLE_FROM
    topics = request.topics
    if topics is None:
        writer.array_length(0 if version == 0 else None, flexible)
    else:
        writer.array_length(len(topics), flexible)
        for t in topics:
            if version >= 10:
                writer.uuid(t.topic_id)
                writer.nullable_string(t.name, flexible)
            else:
                writer.string(t.name or "", flexible)
            if flexible:
                writer.empty_tagged_fields()
    if version >= 4:
        writer.boolean(request.allow_auto_topic_creation)
    if 8 <= version <= 10:
        writer.boolean(request.include_cluster_authorized_operations)
    if version >= 8:
        writer.boolean(request.include_topic_authorized_operations)
    if flexible:
        writer.empty_tagged_fields()


# -- response -------------------------------------------------------------------------------------------
def encode_broker(writer: Writer, b: MetadataBroker, flexible: bool, *, with_rack: bool = True) -> None:
    """One broker as Metadata (v1+ with its rack) and DescribeCluster list it."""
    writer.int32(b.node_id)
    writer.string(b.host, flexible)
    writer.int32(b.port)
    if with_rack:
        writer.nullable_string(b.rack, flexible)
    if flexible:
        writer.empty_tagged_fields()


def encode_response(writer: Writer, response: MetadataResponse, version: int) -> None:
    """The hot path (a 10,000-partition answer): partitions go out with precompiled structs."""
    flexible = version >= FLEXIBLE_FROM
    if version >= 3:
        writer.int32(response.throttle_time_ms)
    writer.array_length(len(response.brokers), flexible)
    for b in response.brokers:
        encode_broker(writer, b, flexible, with_rack=version >= 1)
    if version >= 2:
        writer.nullable_string(response.cluster_id, flexible)
    if version >= 1:
        writer.int32(response.controller_id)
    writer.array_length(len(response.topics), flexible)
    buf = writer.buf
    for t in response.topics:
        writer.int16(t.error_code)
        writer.string(t.name or "", flexible)  # nullable only from v12 (Kafka 3.1)
        if version >= 10:
            writer.uuid(t.topic_id)
        if version >= 1:
            writer.boolean(t.is_internal)
        writer.array_length(len(t.partitions), flexible)
        for p in t.partitions:
            buf += _PARTITION_HEAD.pack(p.error_code, p.partition_index, p.leader_id)
            if version >= 7:
                buf += _I32.pack(p.leader_epoch)
            writer.int32_array(p.replica_nodes, flexible)
            writer.int32_array(p.isr_nodes, flexible)
            if version >= 5:
                writer.int32_array(p.offline_replicas, flexible)
            if flexible:
                buf.append(0)
        if version >= 8:
            writer.int32(t.topic_authorized_operations)
        if flexible:
            writer.empty_tagged_fields()
    if 8 <= version <= 10:
        writer.int32(response.cluster_authorized_operations)
    if flexible:
        writer.empty_tagged_fields()


def _int32s(reader: Reader, flexible: bool) -> tuple[int, ...]:
    return tuple(reader.int32() for _ in range(max(reader.array_length(flexible), 0)))


def decode_response(reader: Reader, version: int) -> MetadataResponse:
    flexible = version >= FLEXIBLE_FROM
    throttle = reader.int32() if version >= 3 else 0
    brokers = []
    for _ in range(max(reader.array_length(flexible), 0)):
        node_id, host, port = reader.int32(), reader.string(flexible), reader.int32()
        rack = reader.nullable_string(flexible) if version >= 1 else None
        if flexible:
            reader.skip_tagged_fields()
        brokers.append(MetadataBroker(node_id, host, port, rack))
    cluster_id = reader.nullable_string(flexible) if version >= 2 else None
    controller_id = reader.int32() if version >= 1 else -1
    topics = []
    for _ in range(max(reader.array_length(flexible), 0)):
        error_code, name = reader.int16(), reader.nullable_string(flexible)
        topic_id = reader.uuid() if version >= 10 else ZERO_UUID
        internal = reader.boolean() if version >= 1 else False
        partitions = []
        for _ in range(max(reader.array_length(flexible), 0)):
            head = (reader.int16(), reader.int32(), reader.int32())
            epoch = reader.int32() if version >= 7 else -1
            replicas, isr = _int32s(reader, flexible), _int32s(reader, flexible)
            offline = _int32s(reader, flexible) if version >= 5 else ()
            if flexible:
                reader.skip_tagged_fields()
            partitions.append(MetadataPartition(*head, epoch, replicas, isr, offline))
        ops = reader.int32() if version >= 8 else AUTHORIZED_OPERATIONS_OMITTED
        if flexible:
            reader.skip_tagged_fields()
        topics.append(MetadataTopic(error_code, name, tuple(partitions), internal, topic_id, ops))
    cluster_ops = reader.int32() if 8 <= version <= 10 else AUTHORIZED_OPERATIONS_OMITTED
    if flexible:
        reader.skip_tagged_fields()
    return MetadataResponse(tuple(brokers), cluster_id, controller_id, tuple(topics), throttle, cluster_ops)
