"""The broker's Metadata v11 answer with ``kio`` as its codec: what ``bench/kafka_metadata.py`` times
beside the project's own codec, to show why the hot path keeps its own encoder.

Same work as ``KafkaProtocolHandler`` for one all-topics request: decode the request (kio), read the
metadata cache (the handler's own ``metadata()``), build kio's response entities and encode them.
"""

from __future__ import annotations

import datetime
import io
import uuid
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i32, i32Timedelta

from kafka_controller.broker.kafka_wire import metadata as md
from kafka_controller.broker.kafka_wire.handler import KafkaProtocolHandler

VERSION = 11
Request = load_request_schema(3, VERSION)
Response = load_response_schema(3, VERSION)
_m = __import__(Response.__module__, fromlist=["x"])
_read = entity_reader(Request)
_write = entity_writer(Response)
_ZERO = datetime.timedelta(0)


def answer(handler: KafkaProtocolHandler, body: bytes) -> bytes:
    """Encode the answer to one Metadata v11 request body (after its header)."""
    request, _ = _read(body, 0)
    names = None if request.topics is None else tuple(md.MetadataRequestTopic(t.name) for t in request.topics)
    ours = handler.metadata(md.MetadataRequest(names), VERSION)
    entity = Response(
        throttle_time=i32Timedelta.parse(_ZERO),
        brokers=tuple(
            _m.MetadataResponseBroker(node_id=b.node_id, host=b.host, port=i32(b.port), rack=b.rack)
            for b in ours.brokers
        ),
        cluster_id=ours.cluster_id,
        controller_id=ours.controller_id,
        topics=tuple(_topic(t) for t in ours.topics),
    )
    buf = io.BytesIO()
    _write(buf, entity)
    return buf.getvalue()


def _topic(t: md.MetadataTopic) -> Any:
    return _m.MetadataResponseTopic(
        error_code=ErrorCode(t.error_code),
        name=t.name,
        topic_id=uuid.UUID(bytes=t.topic_id) if t.topic_id != md.ZERO_UUID else None,
        is_internal=t.is_internal,
        partitions=tuple(
            _m.MetadataResponsePartition(
                error_code=ErrorCode(p.error_code),
                partition_index=i32(p.partition_index),
                leader_id=p.leader_id,
                leader_epoch=i32(p.leader_epoch),
                replica_nodes=p.replica_nodes,
                isr_nodes=p.isr_nodes,
                offline_replicas=p.offline_replicas,
            )
            for p in t.partitions
        ),
    )
