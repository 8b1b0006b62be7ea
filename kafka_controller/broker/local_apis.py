"""APIs every broker answers from its own state: Fetch (followers), DescribeReplicas, Metadata and
ShutdownBroker (operators and the admin client). Bodies and codecs.

Fetch is columnar, like the control requests: one array per field, in request order, topic names
dictionary-encoded, so a fetch for thousands of partitions is a handful of flat arrays.
"""

from __future__ import annotations

from dataclasses import dataclass

from kafka_controller.broker.wire import (
    DESCRIBE_REPLICAS,
    FETCH,
    METADATA,
    SHUTDOWN_BROKER,
    Json,
    enc_tps,
    int_,
    operation_id_,
    str_,
    tps_or_none,
    with_operation_id,
)
from kafka_controller.domain.requests import UpdateMetadataPartitionState
from kafka_controller.domain.values import Broker
from kafka_controller.hotpath import values_at
from kafka_controller.transport.codec import ApiCodec
from kafka_controller.transport.codec_common import decode_broker, encode_broker


# -- Fetch (columnar: one array per field, in request order) ----------------------------------------
@dataclass(frozen=True, slots=True)
class FetchRequest:
    """A full fetch (``session_id`` 0) lists every partition; an incremental one only those the
    follower adds to its session or fetches at a new leader epoch (none in the steady state), and
    the ``forgotten`` ones it no longer fetches there (see ``fetch_session``)."""

    replica_id: int
    topics: tuple[str, ...]  # one entry per partition (repeated names share one str)
    partitions: tuple[int, ...]
    fetch_offsets: tuple[int, ...]
    leader_epochs: tuple[int, ...]
    session_id: int = 0
    session_epoch: int = 0
    forgotten_topics: tuple[str, ...] = ()
    forgotten_partitions: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class FetchResponse:
    """Per partition: error name, the leader's high watermark, log-end offset and log (base offset
    and time). A full answer is in request order (``topics`` empty); an incremental one names the
    few partitions it answers. ``now_ms``, ``hw_ms`` and ``rate_per_ms`` are the session's clock."""

    error: str
    errors: tuple[str, ...] = ()
    high_watermarks: tuple[int, ...] = ()
    log_end_offsets: tuple[int, ...] = ()
    log_base_offsets: tuple[int, ...] = ()
    log_base_ms: tuple[int, ...] = ()
    topics: tuple[str, ...] = ()
    partitions: tuple[int, ...] = ()
    session_id: int = 0
    now_ms: int = 0
    hw_ms: int = 0
    rate_per_ms: float = 0.0


def _int_column(b: Json, key: str) -> tuple[int, ...]:
    column = b.get(key, [])
    if type(column) is not list or not set(map(type, column)) <= {int}:
        raise ValueError(f"fetch column {key} must be a list of integers")
    return tuple(column)


def _encode_fetch_request(r: FetchRequest) -> Json:
    index: dict[str, int] = {}
    topic_col = [index.setdefault(t, len(index)) for t in r.topics]
    forgotten_col = [index.setdefault(t, len(index)) for t in r.forgotten_topics]
    return {
        "replica_id": r.replica_id,
        "topics": list(index),
        "topic": topic_col,
        "partition": list(r.partitions),
        "fetch_offset": list(r.fetch_offsets),
        "leader_epoch": list(r.leader_epochs),
        "session_id": r.session_id,
        "session_epoch": r.session_epoch,
        "forgotten_topic": forgotten_col,
        "forgotten_partition": list(r.forgotten_partitions),
    }


def _decode_fetch_request(b: Json) -> FetchRequest:
    names = [str_(t) for t in b["topics"]]
    cols = [b["topic"], b["partition"], b["fetch_offset"], b["leader_epoch"]]
    n = len(cols[0])
    if any(type(c) is not list or len(c) != n for c in cols) or not all(
        set(map(type, c)) <= {int} for c in cols
    ):
        raise ValueError("fetch columns must be integer lists of equal length")
    forgotten = [_int_column(b, "forgotten_topic"), _int_column(b, "forgotten_partition")]
    if len(forgotten[0]) != len(forgotten[1]):
        raise ValueError("forgotten fetch columns must be of equal length")
    if not all(0 <= i < len(names) for i in (*cols[0], *forgotten[0])):
        raise ValueError("a fetch topic index is out of range")
    return FetchRequest(
        int_(b["replica_id"]),
        tuple(values_at(names, cols[0])),
        tuple(cols[1]),
        tuple(cols[2]),
        tuple(cols[3]),
        int_(b.get("session_id", 0)),
        int_(b.get("session_epoch", 0)),
        tuple(values_at(names, forgotten[0])),
        forgotten[1],
    )


def _encode_fetch_response(r: FetchResponse) -> Json:
    index: dict[str, int] = {}
    topic_col = [index.setdefault(t, len(index)) for t in r.topics]
    return {
        "error": str(r.error),
        "errors": list(r.errors),
        "high_watermark": list(r.high_watermarks),
        "log_end_offset": list(r.log_end_offsets),
        "log_base_offset": list(r.log_base_offsets),
        "log_base_ms": list(r.log_base_ms),
        "topics": list(index),
        "topic": topic_col,
        "partition": list(r.partitions),
        "session_id": r.session_id,
        "now_ms": r.now_ms,
        "hw_ms": r.hw_ms,
        "rate_per_ms": r.rate_per_ms,
    }


def _decode_fetch_response(b: Json) -> FetchResponse:
    names = [str_(t) for t in b.get("topics", [])]
    rate = b.get("rate_per_ms", 0.0)
    if type(rate) not in (int, float):
        raise ValueError("rate_per_ms must be a number")
    return FetchResponse(
        str_(b["error"]),
        tuple(b.get("errors", [])),
        _int_column(b, "high_watermark"),
        _int_column(b, "log_end_offset"),
        _int_column(b, "log_base_offset"),
        _int_column(b, "log_base_ms"),
        tuple(values_at(names, _int_column(b, "topic"))),
        _int_column(b, "partition"),
        int_(b.get("session_id", 0)),
        int_(b.get("now_ms", 0)),
        int_(b.get("hw_ms", 0)),
        float(rate),
    )


# -- DescribeReplicas, Metadata, ShutdownBroker -----------------------------------------------------
@dataclass(frozen=True, slots=True)
class ReplicaInfo:
    """One local replica as its broker sees it (the simulated log included)."""

    topic: str
    partition: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    zk_version: int
    replicas: tuple[int, ...]
    is_leader: bool
    log_end_offset: int
    high_watermark: int


@dataclass(frozen=True, slots=True)
class DescribeReplicasResponse:
    error: str
    broker_id: int
    broker_epoch: int
    controller_epoch: int
    replicas: tuple[ReplicaInfo, ...] = ()
    #: ``(controller epoch, ids of the controllers acted on in it)``, oldest first: what a fault
    #: checker needs to prove no two controllers were obeyed at one epoch.
    acted_on: tuple[tuple[int, tuple[int, ...]], ...] = ()


_REPLICA_FIELDS = ReplicaInfo.__slots__


def _encode_describe_response(r: DescribeReplicasResponse) -> Json:
    return {
        "error": str(r.error),
        "broker_id": r.broker_id,
        "broker_epoch": r.broker_epoch,
        "controller_epoch": r.controller_epoch,
        "replicas": [[getattr(x, f) for f in _REPLICA_FIELDS] for x in r.replicas],
        "fields": list(_REPLICA_FIELDS),
        "acted_on": [[epoch, list(ids)] for epoch, ids in r.acted_on],
    }


def _decode_describe_response(b: Json) -> DescribeReplicasResponse:
    fields = tuple(b["fields"])
    if fields != _REPLICA_FIELDS:
        raise ValueError(f"unexpected replica fields {fields}")
    replicas = tuple(
        ReplicaInfo(t, p, ld, le, tuple(isr), zv, tuple(rs), bool(il), leo, hw)
        for t, p, ld, le, isr, zv, rs, il, leo, hw in b["replicas"]
    )
    acted_on = tuple((int_(epoch), tuple(map(int_, ids))) for epoch, ids in b.get("acted_on", ()))
    return DescribeReplicasResponse(
        str_(b["error"]),
        int_(b["broker_id"]),
        int_(b["broker_epoch"]),
        int_(b["controller_epoch"]),
        replicas,
        acted_on,
    )


@dataclass(frozen=True, slots=True)
class MetadataCacheResponse:
    """The broker's metadata cache, what the last UpdateMetadata told it: the private protocol's
    Metadata answer (Kafka's own Metadata response is ``kafka_wire.metadata.MetadataResponse``)."""

    error: str
    controller_id: int
    brokers: tuple[Broker, ...]
    partitions: tuple[UpdateMetadataPartitionState, ...]


_UM_FIELDS = UpdateMetadataPartitionState._fields


def _encode_metadata_response(r: MetadataCacheResponse) -> Json:
    return {
        "error": str(r.error),
        "controller_id": r.controller_id,
        "brokers": [encode_broker(b) for b in r.brokers],
        "fields": list(_UM_FIELDS),
        "partitions": [[getattr(s, f) for f in _UM_FIELDS] for s in r.partitions],
    }


def _decode_metadata_response(b: Json) -> MetadataCacheResponse:
    if tuple(b["fields"]) != _UM_FIELDS:
        raise ValueError("unexpected partition fields")
    states = tuple(
        UpdateMetadataPartitionState(t, p, ce, ld, le, tuple(isr), zv, tuple(rs), tuple(off))
        for t, p, ce, ld, le, isr, zv, rs, off in b["partitions"]
    )
    return MetadataCacheResponse(
        str_(b["error"]), int_(b["controller_id"]), tuple(map(decode_broker, b["brokers"])), states
    )


@dataclass(frozen=True, slots=True)
class ShutdownBrokerRequest:
    """``operation_id``: the audit operation that asked (absent from older clients' ``{}``)."""

    operation_id: str | None = None


@dataclass(frozen=True, slots=True)
class SimpleResponse:
    """A response that is only an error (``ShutdownBroker``) or a top-level failure."""

    error: str
    message: str | None = None


def _simple(b: Json) -> SimpleResponse:
    return SimpleResponse(str_(b["error"]), b.get("message"))


def _enc_simple(r: SimpleResponse) -> Json:
    return {"error": str(r.error), "message": r.message}


LOCAL_API_CODECS: tuple[ApiCodec, ...] = (
    ApiCodec(
        FETCH, _encode_fetch_request, _decode_fetch_request, _encode_fetch_response, _decode_fetch_response
    ),
    ApiCodec(
        DESCRIBE_REPLICAS,
        lambda tps: {"partitions": enc_tps(tps)},
        lambda b: tps_or_none(b.get("partitions")),
        _encode_describe_response,
        _decode_describe_response,
    ),
    ApiCodec(METADATA, lambda _r: {}, lambda _b: None, _encode_metadata_response, _decode_metadata_response),
    ApiCodec(
        SHUTDOWN_BROKER,
        lambda r: {} if r is None else with_operation_id({}, r.operation_id),
        lambda b: ShutdownBrokerRequest(operation_id_(b)),
        _enc_simple,
        _simple,
    ),
)
