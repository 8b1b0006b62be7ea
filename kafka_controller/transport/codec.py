"""Bodies of the wire protocol: domain requests and responses <-> JSON values, and the API registry.

Partition states travel as **columns** (``transport.columns``): one array per field over all
partitions of the request, in the request's order, so values round-trip exactly. Topic names,
replica lists and error names are dictionary-encoded (``topics``, ``replica_sets``, ``errors``
tables; the columns hold indexes). Columns that are empty or false for every partition
(adding/removing replicas, ``is_new``) are left out. ``bench/transport.py`` measures this against
one object per partition.

Adding an API is one line: ``DEFAULT_APIS.register_json("CreateTopics")`` carries JSON bodies as
they are; ``register(ApiCodec(...))`` takes typed encoders and decoders.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat
from operator import attrgetter, itemgetter
from typing import Any, TypeVar

from kafka_controller.domain.errors import InvalidArgumentError
from kafka_controller.domain.requests import (
    ControlRequest,
    ControlResponse,
    Errors,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    PartitionErrors,
    StopReplicaPartitionState,
    StopReplicaRequest,
    StopReplicaResponse,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)
from kafka_controller.domain.values import TopicPartition, topic_partitions
from kafka_controller.hotpath import new_tuples
from kafka_controller.transport.codec_common import (
    _encode_shared_states,
    _encode_states,
    _error,
    _header,
    _read_brokers,
    _read_header,
    _read_state_columns,
    _read_topic_ids,
    encode_broker,
    read_topics,
)
from kafka_controller.transport.columns import (
    STR,
    Columns,
    Dictionary,
    Json,
    gc_paused,
    read_table,
)
from kafka_controller.transport.errors import ProtocolError
from kafka_controller.transport.state_columns import StateColumns

_T = TypeVar("_T")
_topic = itemgetter(0)  # of a TopicPartition
_partition = itemgetter(1)


# -- LeaderAndIsr --------------------------------------------------------------------------------


def encode_leader_and_isr_request(r: LeaderAndIsrRequest) -> Json:
    return {
        **_header(r),
        "topic_ids": r.topic_ids,
        "live_leaders": [encode_broker(b) for b in r.live_leaders],
        **_encode_states(
            r.partition_states, ("isr", "replicas"), ("adding_replicas", "removing_replicas"), ("is_new",)
        ),
    }


def decode_leader_and_isr_request(body: Json) -> LeaderAndIsrRequest:
    """The states stay columns (``StateColumns``): the replica manager reads them row by row."""
    cols, sets, common = _common_state_columns(body)
    n = cols.n
    states: StateColumns[LeaderAndIsrPartitionState] = StateColumns(
        (
            *common,
            _listed(cols.lookup("adding_replicas", sets, ()), n),
            _listed(cols.lookup("removing_replicas", sets, ()), n),
            _listed(cols.bools("is_new", False), n),
        ),
        LeaderAndIsrPartitionState,
    )
    version, controller_id, controller_epoch, broker_epoch = _read_header(body)
    leaders = _read_brokers(body, "live_leaders")
    return LeaderAndIsrRequest(
        version,
        controller_id,
        controller_epoch,
        broker_epoch,
        states,
        _read_topic_ids(body),
        leaders,
    )


def _encode_partition_errors(errors: Mapping[TopicPartition, Errors]) -> Json:
    topics: Dictionary[str] = Dictionary()
    names: Dictionary[Errors] = Dictionary()
    cols = {
        "topic": topics.encode_runs(map(_topic, errors)),
        "partition": list(map(_partition, errors)),
        "error": names.encode_runs(errors.values()),
    }
    return {"topics": topics.values(), "errors": names.values(), "partitions": cols}


def _decode_partition_errors(body: Json) -> PartitionErrors:
    """Checked here, built on first use (``PartitionErrors``: a failover's answers are read for
    one error only)."""
    cols = Columns(body)
    topics = read_topics(body)
    names = read_table(body, "errors", _error, STR)
    return PartitionErrors(
        topics,
        cols.codes("topic", len(topics)),
        cols.ints("partition"),
        names,
        cols.codes("error", len(names)),
    )


def encode_leader_and_isr_response(r: LeaderAndIsrResponse) -> Json:
    return {"error": r.error, **_encode_partition_errors(r.partition_errors)}


def decode_leader_and_isr_response(body: Json) -> LeaderAndIsrResponse:
    return LeaderAndIsrResponse(_error(body["error"]), _decode_partition_errors(body))


# -- UpdateMetadata ------------------------------------------------------------------------------


def encode_update_metadata_request(r: UpdateMetadataRequest) -> Json:
    return {
        **_header(r),
        "topic_ids": r.topic_ids,
        "live_brokers": [encode_broker(b) for b in r.live_brokers],
        **(
            _encode_shared_states(r.partition_states)
            if type(r.partition_states) is tuple
            else _encode_states(r.partition_states, ("isr", "replicas", "offline_replicas"))
        ),
    }


def decode_update_metadata_request(body: Json) -> UpdateMetadataRequest:
    """The states stay columns (``StateColumns``): the broker's metadata cache queues them by
    reference and builds each partition's state when it merges them (``metadata_cache``)."""
    cols, sets, common = _common_state_columns(body)
    states: StateColumns[UpdateMetadataPartitionState] = StateColumns(
        (
            *common,
            _listed(cols.lookup("offline_replicas", sets)),
        )
    )
    version, controller_id, controller_epoch, broker_epoch = _read_header(body)
    brokers = _read_brokers(body, "live_brokers")
    return UpdateMetadataRequest(
        version,
        controller_id,
        controller_epoch,
        broker_epoch,
        states,
        brokers,
        _read_topic_ids(body),
    )


def _common_state_columns(body: Json) -> tuple[Columns, Any, tuple[Sequence[Any], ...]]:
    """A control request's columns, its replica-set table, and the eight state fields LeaderAndIsr
    and UpdateMetadata share, in their classes' field order (topic to replicas)."""
    cols, topics, sets = _read_state_columns(body)
    return (
        cols,
        sets,
        (
            _listed(cols.lookup("topic", topics)),
            cols.ints("partition"),
            cols.ints("controller_epoch"),
            cols.ints("leader"),
            cols.ints("leader_epoch"),
            _listed(cols.lookup("isr", sets)),
            cols.ints("zk_version"),
            _listed(cols.lookup("replicas", sets)),
        ),
    )


def _listed(values: Iterable[_T], n: int = 0) -> Sequence[_T]:
    """A column as a sequence: a column left out (``repeat(default, n)``) as ``(default,) * n``."""
    if isinstance(values, tuple | list):
        return values
    if isinstance(values, repeat):
        return (next(values),) * n if n else ()
    return tuple(values)


def encode_update_metadata_response(r: UpdateMetadataResponse) -> Json:
    return {"error": r.error}


def decode_update_metadata_response(body: Json) -> UpdateMetadataResponse:
    return UpdateMetadataResponse(_error(body["error"]))


# -- StopReplica ---------------------------------------------------------------------------------


def encode_stop_replica_request(r: StopReplicaRequest) -> Json:
    for tp, s in r.partition_states.items():
        if tp.partition != s.partition:
            raise InvalidArgumentError(f"StopReplica state for {tp} names partition {s.partition}")
    topics: Dictionary[str] = Dictionary()
    states = r.partition_states.values()
    cols = {
        "topic": topics.encode_runs(map(_topic, r.partition_states)),
        "partition": list(map(_partition, r.partition_states)),
        "leader_epoch": list(map(attrgetter("leader_epoch"), states)),
        "delete_partition": list(map(attrgetter("delete_partition"), states)),
    }
    return {
        **_header(r),
        "delete_partitions": r.delete_partitions,
        "topics": topics.values(),
        "partitions": cols,
    }


def decode_stop_replica_request(body: Json) -> StopReplicaRequest:
    cols = Columns(body)
    topics = read_topics(body)
    parts = cols.ints("partition")
    tps = topic_partitions(cols.lookup("topic", topics), parts)
    states = new_tuples(
        StopReplicaPartitionState,
        zip(parts, cols.ints("leader_epoch"), cols.bools("delete_partition"), strict=True),
    )
    with gc_paused(cols.n):
        partition_states = dict(zip(tps, states, strict=True))
    if type(body["delete_partitions"]) is not bool:
        raise ProtocolError("'delete_partitions' must be a boolean")
    version, controller_id, controller_epoch, broker_epoch = _read_header(body)
    return StopReplicaRequest(
        version, controller_id, controller_epoch, broker_epoch, body["delete_partitions"], partition_states
    )


def encode_stop_replica_response(r: StopReplicaResponse) -> Json:
    return {"error": r.error, **_encode_partition_errors(r.partition_errors)}


def decode_stop_replica_response(body: Json) -> StopReplicaResponse:
    return StopReplicaResponse(_error(body["error"]), _decode_partition_errors(body))


# -- error responses (Kafka's ``AbstractRequest.getErrorResponse``) --------------------------------


def error_response(request: ControlRequest, error: Errors) -> ControlResponse:
    """The response a broker gives when it fails the whole request: ``error`` everywhere."""
    if isinstance(request, LeaderAndIsrRequest):
        tps = (TopicPartition(s.topic, s.partition) for s in request.partition_states)
        return LeaderAndIsrResponse(error, dict.fromkeys(tps, error))
    if isinstance(request, StopReplicaRequest):
        return StopReplicaResponse(error, dict.fromkeys(request.partition_states, error))
    return UpdateMetadataResponse(error)


# -- the registry --------------------------------------------------------------------------------


def _identity(value: Json) -> Json:
    return value


@dataclass(frozen=True, slots=True)
class ApiCodec:
    """How one API's bodies cross the wire. Decoders may raise ``KeyError``/``TypeError``/
    ``ValueError``: the registry turns them into a one-line ``ProtocolError``."""

    name: str
    encode_request: Callable[[Any], Json] = _identity
    decode_request: Callable[[Json], Any] = _identity
    encode_response: Callable[[Any], Json] = _identity
    decode_response: Callable[[Json], Any] = _identity


class ApiRegistry:
    """API name -> codec. The server refuses names it does not know with INVALID_REQUEST."""

    def __init__(self, codecs: Iterable[ApiCodec] = ()) -> None:
        self._codecs: dict[str, ApiCodec] = {}
        for codec in codecs:
            self.register(codec)

    def register(self, codec: ApiCodec) -> ApiCodec:
        if codec.name in self._codecs:
            raise InvalidArgumentError(f"api {codec.name!r} is already registered")
        self._codecs[codec.name] = codec
        return codec

    def register_json(self, name: str) -> ApiCodec:
        """An API whose request and response bodies are plain JSON values (admin APIs)."""
        return self.register(ApiCodec(name))

    def copy(self) -> ApiRegistry:
        return ApiRegistry(self._codecs.values())

    def names(self) -> list[str]:
        return sorted(self._codecs)

    def get(self, name: str) -> ApiCodec:
        codec = self._codecs.get(name)
        if codec is None:
            raise ProtocolError(f"unknown api {name!r}")
        return codec

    def decode_request(self, api: str, body: Json) -> Any:
        return _guard(f"{api} request body", self.get(api).decode_request, body)

    def decode_response(self, api: str, body: Json) -> Any:
        return _guard(f"{api} response body", self.get(api).decode_response, body)


def _guard(what: str, decode: Callable[[Json], Any], body: Json) -> Any:
    try:
        return decode(body)
    except ProtocolError as e:
        raise ProtocolError(f"malformed {what}: {e}") from None
    except KeyError as e:
        raise ProtocolError(f"malformed {what}: missing field {e.args[0]!r}") from None
    except (TypeError, ValueError, AttributeError, IndexError) as e:
        raise ProtocolError(f"malformed {what}: {type(e).__name__}: {e}") from None


LEADER_AND_ISR = "LeaderAndIsr"
UPDATE_METADATA = "UpdateMetadata"
STOP_REPLICA = "StopReplica"
#: The API name of each controller-to-broker request type.
API_BY_REQUEST_TYPE: dict[type, str] = {
    LeaderAndIsrRequest: LEADER_AND_ISR,
    UpdateMetadataRequest: UPDATE_METADATA,
    StopReplicaRequest: STOP_REPLICA,
}

CONTROL_APIS = (
    ApiCodec(
        LEADER_AND_ISR,
        encode_leader_and_isr_request,
        decode_leader_and_isr_request,
        encode_leader_and_isr_response,
        decode_leader_and_isr_response,
    ),
    ApiCodec(
        UPDATE_METADATA,
        encode_update_metadata_request,
        decode_update_metadata_request,
        encode_update_metadata_response,
        decode_update_metadata_response,
    ),
    ApiCodec(
        STOP_REPLICA,
        encode_stop_replica_request,
        decode_stop_replica_request,
        encode_stop_replica_response,
        decode_stop_replica_response,
    ),
)

#: The process-wide registry used by servers and clients unless they are given another one.
DEFAULT_APIS = ApiRegistry(CONTROL_APIS)
