"""ElectLeaders (43) v0-2, AlterPartitionReassignments (45) v0 and ListPartitionReassignments (46) v0
in Kafka 2.8's format, answered by the broker's own handler for the private protocol.

Each ``KioApi`` here translates the request ``kio`` decoded into the private request, calls the
broker's ``handle(api, request)`` (which hands it to the local controller when it is the active
one, else answers NOT_CONTROLLER) and translates the answer back, so both protocols share one code
path, one NOT_CONTROLLER rule and one audit trail. The operation id that links the audit rows to
an ``operations`` row comes from the request header's client id (``parse_operation_id``).

Kafka 2.8's answers, kept here (``KafkaApis`` and ``KafkaController`` of that release):

* ElectLeaders: a broker that is not the active controller answers NOT_CONTROLLER *per partition*
  with a top-level NONE (the controller's callback, not a request error); a null partition list
  means every partition in this broker's metadata cache, and then partitions whose election was
  not needed are left out of the answer; an election type other than 0/1 fails the whole request
  (UNKNOWN_SERVER_ERROR on every partition and, from v1, at the top level). v0 has no election type
  (preferred). The request's ``timeout_ms`` runs from its arrival (``ReplicaManager.electLeaders``):
  once the controller has elected, the answer waits until this broker's metadata cache shows each
  new leader, at most what is left of it (nothing, if the controller took longer: then only what
  the cache already shows counts), and a partition whose leader has not shown by then is
  REQUEST_TIMED_OUT (``DelayedElectLeader``), though its election happened.
* Alter/ListPartitionReassignments: NOT_CONTROLLER, a timeout or any whole-request failure is the
  top-level error with no partitions; otherwise one result per partition asked (later duplicates
  win, as Kafka's ``toMap``), or the reassignments in progress. Kafka 2.8's ZooKeeper-mode
  ``KafkaApis`` does not use their ``timeout_ms``: the answer comes when the controller has started
  or cancelled each reassignment (here bounded by ``controller.socket.timeout.ms``, as every request
  the broker hands to its controller).
"""

from __future__ import annotations

import datetime
import importlib
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i32, i32Timedelta

from kafka_controller.admin.znode_size import ZnodeTooLargeError, check_reassignment
from kafka_controller.broker import apis as A
from kafka_controller.broker.kafka_wire.header import RequestHeader
from kafka_controller.broker.kafka_wire.kio_api import KioApi, response_schema
from kafka_controller.broker.kafka_wire.kio_build import timeout_ms
from kafka_controller.broker.metadata_cache import MetadataCache
from kafka_controller.broker.wire import OPERATION_ID_MAX
from kafka_controller.domain.requests import Errors
from kafka_controller.domain.values import ReplicaAssignment, TopicPartition

ELECT_LEADERS = 43
ALTER_PARTITION_REASSIGNMENTS = 45
LIST_PARTITION_REASSIGNMENTS = 46

#: The client id an operations-package client sends: ``kafka-controller-ops/op=<operation id>``.
CLIENT_ID_PREFIX = "kafka-controller-ops/op="

#: ``handle(api_name, private_request) -> private_response``: ``BrokerRequestHandler.handle``.
PrivateHandler = Callable[[str, Any], Any]

_NO_THROTTLE = i32Timedelta.parse(datetime.timedelta(0))
#: Kafka's default message of ``new ApiError(error)`` for the top-level errors answered here.
_DEFAULT_MESSAGES: dict[str, str] = {
    Errors.NOT_CONTROLLER: "This is not the correct controller for this cluster.",
    Errors.REQUEST_TIMED_OUT: "The request timed out.",
}
#: Kafka's message for the per-partition errors its controller answers as ``new ApiError(error)``
#: (``Errors.message()``): ``processReplicaLeaderElection``'s partitions whose leader is already right.
_PARTITION_MESSAGES: dict[str, str] = {
    Errors.ELECTION_NOT_NEEDED: "Leader election not needed for topic partition.",
}


def parse_operation_id(client_id: str | None) -> str | None:
    """The operation id in ``kafka-controller-ops/op=<id>`` (1-36 printable characters), else None:
    any other client id is an ordinary client, not an error."""
    if not client_id or not client_id.startswith(CLIENT_ID_PREFIX):
        return None
    op = client_id[len(CLIENT_ID_PREFIX) :]
    if not 0 < len(op) <= OPERATION_ID_MAX or not op.isprintable():
        return None
    return op


def operation_of(header: RequestHeader) -> str | None:
    """The operation a request belongs to: the one its client id names, else the one the broker
    recorded for it on arrival (``broker.admin_audit``), else None."""
    return parse_operation_id(header.client_id) or header.operation_id


def error_code(name: str) -> ErrorCode:
    """A Kafka error name (``Errors``) as its code; a name ``kio`` does not know is UNKNOWN_SERVER_ERROR."""
    try:
        return ErrorCode[str(name).lower()]
    except KeyError:
        return ErrorCode.unknown_server_error


def _module(api_key: int, version: int) -> Any:
    return importlib.import_module(response_schema(api_key, version).__module__)


def _by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for tp in partitions:
        out.setdefault(tp.topic, []).append(tp.partition)
    return out


# -- ElectLeaders ----------------------------------------------------------------------------------------
def elect_leaders_api(
    handle: PrivateHandler, cache: MetadataCache, clock: Callable[[], float] = time.monotonic
) -> KioApi:
    def answer(header: RequestHeader, request: Any) -> Any:
        deadline = clock() + timeout_ms(request.timeout) / 1000.0
        version = header.api_version
        asked_all = request.topic_partitions is None
        if asked_all:
            partitions = sorted(cache.all_partitions())
        else:
            partitions = list(
                dict.fromkeys(
                    TopicPartition(t.topic, p) for t in request.topic_partitions for p in t.partitions
                )
            )
        etype = 0 if version == 0 else int(request.election_type)
        if etype not in (0, 1):
            message = f"Value {etype} must be one of 0 (preferred) or 1 (unclean)"
            failed: dict[TopicPartition, tuple[str, str | None]] = dict.fromkeys(
                partitions, (Errors.UNKNOWN_SERVER_ERROR, message)
            )
            return _elect_response(version, Errors.UNKNOWN_SERVER_ERROR, failed)
        private = A.ElectLeadersRequest(
            "preferred" if etype == 0 else "unclean", tuple(partitions), operation_of(header)
        )
        reply: A.ElectLeadersResponse = handle(A.ELECT_LEADERS, private)
        results: dict[TopicPartition, tuple[str, str | None]]
        if reply.error != Errors.NONE:  # NOT_CONTROLLER, REQUEST_TIMED_OUT, ...: the callback's answer
            results = dict.fromkeys(partitions, (reply.error, reply.message))
        else:
            results = {}
            elected: dict[TopicPartition, int] = {}
            for tp in partitions:
                x = reply.results.get(tp)
                results[tp] = (
                    (x.error, x.message or _PARTITION_MESSAGES.get(x.error))
                    if x is not None
                    else (Errors.UNKNOWN_SERVER_ERROR, "no result")
                )
                if x is not None and x.error == Errors.NONE:
                    elected[tp] = x.leader
            for tp in _await_leaders(cache, elected, deadline - clock()):
                results[tp] = (Errors.REQUEST_TIMED_OUT, None)  # Kafka: ApiError(REQUEST_TIMED_OUT, null)
            if asked_all:
                results = {tp: r for tp, r in results.items() if r[0] != Errors.ELECTION_NOT_NEEDED}
        return _elect_response(version, Errors.NONE, results)

    return KioApi(ELECT_LEADERS, 0, 2, 2, answer)


def _await_leaders(
    cache: MetadataCache, expected: Mapping[TopicPartition, int], wait_s: float
) -> list[TopicPartition]:
    """The partitions whose ``expected`` leader this broker's metadata cache still does not show
    after at most ``wait_s`` (Kafka's ``DelayedElectLeader``; checked once when nothing is left)."""
    waiting = dict(expected)

    def shown(c: MetadataCache) -> bool:
        for tp in [tp for tp, leader in waiting.items() if _leader(c, tp) == leader]:
            del waiting[tp]
        return not waiting

    if waiting and not shown(cache):
        cache.wait_until(shown, wait_s)
    return sorted(waiting)


def _leader(cache: MetadataCache, tp: TopicPartition) -> int | None:
    info = cache.get_partition_info(tp)
    return None if info is None else info.leader


def _elect_response(version: int, top: str, results: dict[TopicPartition, tuple[str, str | None]]) -> Any:
    m = _module(ELECT_LEADERS, version)
    topics = []
    for topic, ps in _by_topic(results).items():
        rows = []
        for p in ps:
            error, message = results[TopicPartition(topic, p)]
            rows.append(
                m.PartitionResult(
                    partition_id=i32(p),
                    error_code=error_code(error),
                    error_message=None if error == Errors.NONE else message,
                )
            )
        topics.append(m.ReplicaElectionResult(topic=topic, partition_result=tuple(rows)))
    fields: dict[str, Any] = {"throttle_time": _NO_THROTTLE, "replica_election_results": tuple(topics)}
    if version >= 1:
        fields["error_code"] = error_code(top)
    return m.ElectLeadersResponse(**fields)


# -- AlterPartitionReassignments ---------------------------------------------------------------------------
def alter_partition_reassignments_api(handle: PrivateHandler, cache: MetadataCache | None = None) -> KioApi:
    def answer(header: RequestHeader, request: Any) -> Any:
        m = _module(ALTER_PARTITION_REASSIGNMENTS, 0)
        wanted: dict[TopicPartition, tuple[int, ...] | None] = {}
        for t in request.topics:
            for p in t.partitions:
                tp = TopicPartition(t.name, int(p.partition_index))
                wanted.pop(tp, None)  # a later duplicate wins, and answers in its place
                wanted[tp] = None if p.replicas is None else tuple(int(r) for r in p.replicas)
        refused = _too_large(cache, wanted) if cache is not None else {}
        sent = {tp: r for tp, r in wanted.items() if tp not in refused}
        reply: A.AlterPartitionReassignmentsResponse
        if sent or not refused:
            private = A.AlterPartitionReassignmentsRequest(sent, parse_operation_id(header.client_id))
            reply = handle(A.ALTER_PARTITION_REASSIGNMENTS, private)
        else:
            reply = A.AlterPartitionReassignmentsResponse(Errors.NONE, {})
        if reply.error != Errors.NONE:
            return m.AlterPartitionReassignmentsResponse(
                throttle_time=_NO_THROTTLE,
                error_code=error_code(reply.error),
                error_message=reply.message or _DEFAULT_MESSAGES.get(reply.error),
                responses=(),
            )
        topics = []
        for topic, ps in _by_topic(wanted).items():
            rows = []
            for p in ps:
                tp = TopicPartition(topic, p)
                x = reply.results.get(tp)
                error: str
                message: str | None
                if tp in refused:
                    error, message = Errors.INVALID_REQUEST, refused[tp]
                elif x is not None:
                    error, message = x.error, x.message
                else:
                    error, message = Errors.UNKNOWN_SERVER_ERROR, None
                rows.append(
                    m.ReassignablePartitionResponse(
                        partition_index=i32(p),
                        error_code=error_code(error),
                        error_message=None if error == Errors.NONE else message,
                    )
                )
            topics.append(m.ReassignableTopicResponse(name=topic, partitions=tuple(rows)))
        return m.AlterPartitionReassignmentsResponse(
            throttle_time=_NO_THROTTLE, error_code=ErrorCode.none, error_message=None, responses=tuple(topics)
        )

    return KioApi(ALTER_PARTITION_REASSIGNMENTS, 0, 0, 0, answer)


def _too_large(
    cache: MetadataCache, wanted: Mapping[TopicPartition, tuple[int, ...] | None]
) -> dict[TopicPartition, str]:
    """The partitions of each topic whose znode could not hold the reassignment asked (the moving
    partitions hold target and origin replicas together, with the adding/removing lists), with the
    one-line reason: refused here, before the controller tries a ZooKeeper write that would drop
    its session. The replicas are this broker's metadata cache's, which include replicas being
    added by a reassignment already under way: an estimate that errs on the large side."""
    out: dict[TopicPartition, str] = {}
    for topic, ps in _by_topic(wanted).items():
        current = {p: ReplicaAssignment.of(s.replicas) for p, s in cache.topic_partitions(topic).items()}
        if not current:
            continue  # the controller answers an unknown topic
        try:
            check_reassignment(topic, current, {p: wanted[TopicPartition(topic, p)] for p in ps})
        except ZnodeTooLargeError as e:
            out.update(dict.fromkeys((TopicPartition(topic, p) for p in ps), str(e)))
    return out


# -- ListPartitionReassignments ----------------------------------------------------------------------------
def list_partition_reassignments_api(handle: PrivateHandler) -> KioApi:
    def answer(header: RequestHeader, request: Any) -> Any:
        m = _module(LIST_PARTITION_REASSIGNMENTS, 0)
        partitions = (
            None
            if request.topics is None
            else tuple(
                dict.fromkeys(
                    TopicPartition(t.name, int(p)) for t in request.topics for p in t.partition_indexes
                )
            )
        )
        reply: A.ListPartitionReassignmentsResponse = handle(
            A.LIST_PARTITION_REASSIGNMENTS, A.ListPartitionReassignmentsRequest(partitions)
        )
        if reply.error != Errors.NONE:
            return m.ListPartitionReassignmentsResponse(
                throttle_time=_NO_THROTTLE,
                error_code=error_code(reply.error),
                error_message=reply.message or _DEFAULT_MESSAGES.get(reply.error),
                topics=(),
            )
        topics = []
        for topic, ps in _by_topic(sorted(reply.reassignments)).items():
            rows = []
            for p in ps:
                a = reply.reassignments[TopicPartition(topic, p)]
                rows.append(
                    m.OngoingPartitionReassignment(
                        partition_index=i32(p),
                        replicas=tuple(i32(r) for r in a.replicas),
                        adding_replicas=tuple(i32(r) for r in a.adding_replicas),
                        removing_replicas=tuple(i32(r) for r in a.removing_replicas),
                    )
                )
            topics.append(m.OngoingTopicReassignment(name=topic, partitions=tuple(rows)))
        return m.ListPartitionReassignmentsResponse(
            throttle_time=_NO_THROTTLE, error_code=ErrorCode.none, error_message=None, topics=tuple(topics)
        )

    return KioApi(LIST_PARTITION_REASSIGNMENTS, 0, 0, 0, answer)


def controller_admin_apis(handle: PrivateHandler, cache: MetadataCache) -> dict[int, KioApi]:
    """The three APIs for ``KafkaProtocolHandler(apis=...)``, over the broker's private handler."""
    return {
        ELECT_LEADERS: elect_leaders_api(handle, cache),
        ALTER_PARTITION_REASSIGNMENTS: alter_partition_reassignments_api(handle, cache),
        LIST_PARTITION_REASSIGNMENTS: list_partition_reassignments_api(handle),
    }
