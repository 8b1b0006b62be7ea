"""LeaderAndIsr in Kafka 2.8's own format (v5, flexible, topics with ids), coded by ``kio``: the
variant ``bench/transport.py`` times against the project's columnar transport to decide which
protocol the controller's requests use.

The round trip is the one a Kafka controller and broker do: domain request -> kio entity -> bytes,
sent over loopback; on the broker bytes -> kio entity -> domain request (the broker works on domain
values), a per-partition response built, encoded, sent back and decoded into a
``LeaderAndIsrResponse``.
"""

from __future__ import annotations

import io
import socket
import threading
import uuid
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i8, i32, i64

from kafka_controller.domain.requests import (
    Errors,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
)
from kafka_controller.domain.values import Broker, EndPoint, TopicPartition
from kafka_controller.transport import framing

VERSION = 5
Request = load_request_schema(4, VERSION)
Response = load_response_schema(4, VERSION)
_req = __import__(Request.__module__, fromlist=["x"])
_resp = __import__(Response.__module__, fromlist=["x"])
_write_request = entity_writer(Request)
_read_request = entity_reader(Request)
_write_response = entity_writer(Response)
_read_response = entity_reader(Response)


def encode_request(r: LeaderAndIsrRequest) -> bytes:
    by_topic: dict[str, list[Any]] = {}
    for s in r.partition_states:
        by_topic.setdefault(s.topic, []).append(
            _req.LeaderAndIsrPartitionState(
                partition_index=i32(s.partition),
                controller_epoch=i32(s.controller_epoch),
                leader=s.leader,
                leader_epoch=i32(s.leader_epoch),
                isr=s.isr,
                partition_epoch=i32(s.zk_version),
                replicas=s.replicas,
                adding_replicas=s.adding_replicas,
                removing_replicas=s.removing_replicas,
                is_new=s.is_new,
            )
        )
    topics = tuple(
        _req.LeaderAndIsrTopicState(
            topic_name=t,
            topic_id=uuid.UUID(r.topic_ids[t]) if t in r.topic_ids else None,
            partition_states=tuple(ps),
        )
        for t, ps in by_topic.items()
    )
    leaders = tuple(
        _req.LeaderAndIsrLiveLeader(
            broker_id=b.id, host_name=b.endpoints[0].host, port=i32(b.endpoints[0].port)
        )
        for b in r.live_leaders
    )
    entity = Request(
        controller_id=r.controller_id,
        controller_epoch=i32(r.controller_epoch),
        broker_epoch=i64(r.broker_epoch),
        type_=i8(0),
        topic_states=topics,
        live_leaders=leaders,
    )
    buf = io.BytesIO()
    _write_request(buf, entity)
    return buf.getvalue()


def decode_request(data: bytes | bytearray) -> LeaderAndIsrRequest:
    e, _ = _read_request(bytes(data), 0)
    states = tuple(
        LeaderAndIsrPartitionState(
            t.topic_name,
            p.partition_index,
            p.controller_epoch,
            p.leader,
            p.leader_epoch,
            tuple(p.isr),
            p.partition_epoch,
            tuple(p.replicas),
            tuple(p.adding_replicas),
            tuple(p.removing_replicas),
            p.is_new,
        )
        for t in e.topic_states
        for p in t.partition_states
    )
    ids = {t.topic_name: str(t.topic_id) for t in e.topic_states if t.topic_id is not None}
    leaders = tuple(Broker(b.broker_id, (EndPoint(b.host_name, b.port),)) for b in e.live_leaders)
    return LeaderAndIsrRequest(
        VERSION, e.controller_id, e.controller_epoch, e.broker_epoch, states, ids, leaders
    )


def encode_response(request: LeaderAndIsrRequest, r: LeaderAndIsrResponse) -> bytes:
    by_topic: dict[str, list[Any]] = {}
    for tp, error in r.partition_errors.items():
        by_topic.setdefault(tp.topic, []).append(
            _resp.LeaderAndIsrPartitionError(
                partition_index=i32(tp.partition), error_code=ErrorCode[error.name.lower()]
            )
        )
    topics = tuple(
        _resp.LeaderAndIsrTopicError(topic_id=uuid.UUID(request.topic_ids[t]), partition_errors=tuple(errs))
        for t, errs in by_topic.items()
    )
    buf = io.BytesIO()
    _write_response(buf, Response(error_code=ErrorCode[r.error.name.lower()], topics=topics))
    return buf.getvalue()


def decode_response(data: bytes | bytearray, names: dict[uuid.UUID, str]) -> LeaderAndIsrResponse:
    e, _ = _read_response(bytes(data), 0)
    errors = {
        TopicPartition(names[t.topic_id], p.partition_index): Errors[p.error_code.name.upper()]
        for t in e.topics
        for p in t.partition_errors
    }
    return LeaderAndIsrResponse(Errors[e.error_code.name.upper()], errors)


class KioServer:
    """One connection; each frame is a kio LeaderAndIsr, answered with every partition NONE."""

    def __init__(self, sink: list[LeaderAndIsrRequest], handler: Any) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._sink = sink
        self._handler = handler
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        conn, _ = self._listener.accept()
        with conn:
            while (payload := framing.read_frame(conn, framing.DEFAULT_MAX_FRAME_BYTES)) is not None:
                request = decode_request(payload)
                self._sink[:] = [request]
                framing.write_frame(conn, encode_response(request, self._handler("LeaderAndIsr", request)))

    def close(self) -> None:
        self._listener.close()


class KioClient:
    def __init__(self, port: int) -> None:
        self._sock = socket.create_connection(("127.0.0.1", port))
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def request(self, api: str, r: LeaderAndIsrRequest) -> LeaderAndIsrResponse:
        framing.write_frame(self._sock, encode_request(r))
        answer = framing.read_frame(self._sock, framing.DEFAULT_MAX_FRAME_BYTES)
        assert answer is not None
        return decode_response(answer, {uuid.UUID(v): k for k, v in r.topic_ids.items()})

    def close(self) -> None:
        self._sock.close()
