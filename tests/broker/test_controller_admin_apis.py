"""ElectLeaders v0-2, AlterPartitionReassignments v0 and ListPartitionReassignments v0 in Kafka's
format (``kafka_wire.controller_admin_apis``): each version's request becomes the private request
(operation id from the client id), and the private answer becomes Kafka 2.8's response, errors and
NOT_CONTROLLER included. The broker's private handler is a recording fake here; the conformance
suite (``tests/integration/test_kafka_client_admin.py``) drives real clients against real brokers."""

from __future__ import annotations

import datetime
import importlib
import io
import logging
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i32, i32Timedelta

from kafka_controller.broker import apis as A
from kafka_controller.broker.kafka_wire.controller_admin_apis import (
    ALTER_PARTITION_REASSIGNMENTS,
    ELECT_LEADERS,
    LIST_PARTITION_REASSIGNMENTS,
    controller_admin_apis,
    parse_operation_id,
)
from kafka_controller.broker.kafka_wire.handler import KafkaProtocolHandler
from kafka_controller.broker.kafka_wire.header import (
    RequestHeader,
    decode_response_header,
    encode_request_header,
)
from kafka_controller.broker.kafka_wire.kio_api import request_schema, response_schema
from kafka_controller.broker.kafka_wire.primitives import Reader, Writer
from kafka_controller.broker.metadata_cache import MetadataCache
from kafka_controller.domain.requests import Errors, UpdateMetadataPartitionState
from kafka_controller.domain.values import Broker, EndPoint, ReplicaAssignment, TopicPartition
from tests.broker.helpers import update_metadata

OP = "0b8d3c1e-52a4-4f0e-9a55-1c2d3e4f5a6b"
CLIENT = f"kafka-controller-ops/op={OP}"
T0, T1, T2 = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("u", 0)


class FakeBroker:
    """The private handler: records each request and answers what the test put in ``answers``."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, Any]] = []
        self.answers: dict[str, Any] = {}

    def handle(self, api: str, request: Any) -> Any:
        self.requests.append((api, request))
        answer = self.answers[api]
        return answer(request) if callable(answer) else answer


def cache_with(*tps: TopicPartition, leader: int = 1) -> MetadataCache:
    cache = MetadataCache(1)
    lead(cache, *tps, leader=leader)
    return cache


def lead(cache: MetadataCache, *tps: TopicPartition, leader: int) -> None:
    """An UpdateMetadata showing ``leader`` for ``tps`` (replicas 1 and 2)."""
    states = [
        UpdateMetadataPartitionState(tp.topic, tp.partition, 1, leader, 1, (1, 2), 0, (1, 2), ())
        for tp in tps
    ]
    cache.update_metadata(update_metadata(states, controller_id=1, brokers=[Broker(1, (EndPoint("h", 1),))]))


def make(fake: FakeBroker, cache: MetadataCache | None = None) -> KafkaProtocolHandler:
    cache = cache or cache_with()
    return KafkaProtocolHandler(cache, lambda: "c", controller_admin_apis(fake.handle, cache))


def mod(schema: Any) -> Any:
    return importlib.import_module(schema.__module__)


def call(h: KafkaProtocolHandler, key: int, version: int, request: Any, client: str | None = CLIENT) -> Any:
    w = Writer()
    encode_request_header(w, RequestHeader(key, version, 11, client), h.table)
    buf = io.BytesIO()
    entity_writer(type(request))(buf, request)
    answer = h.handle(bytearray(w.getvalue() + buf.getvalue()))  # as the listener hands frames over
    assert answer is not None
    r = Reader(answer)
    assert decode_response_header(r, key, version, h.table) == 11
    response, size = entity_reader(response_schema(key, version))(r.data, r.pos)
    assert r.pos + size == len(answer)
    return response


TIMEOUT = i32Timedelta.parse(datetime.timedelta(seconds=5))


def elect_request(
    version: int, partitions: dict[str, list[int]] | None, etype: int = 0, timeout: Any = TIMEOUT
) -> Any:
    schema = request_schema(ELECT_LEADERS, version)
    tps = (
        None
        if partitions is None
        else tuple(
            mod(schema).TopicPartitions(topic=t, partitions=tuple(map(i32, ps)))
            for t, ps in partitions.items()
        )
    )
    extra = {"election_type": etype} if version >= 1 else {}
    return schema(topic_partitions=tps, timeout=timeout, **extra)


def elect_results(response: Any) -> dict[TopicPartition, tuple[int, str | None]]:
    return {
        TopicPartition(t.topic, p.partition_id): (int(p.error_code), p.error_message)
        for t in response.replica_election_results
        for p in t.partition_result
    }


# -- the client id ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("client_id", "expected"),
    [
        (CLIENT, OP),
        ("kafka-controller-ops/op=x", "x"),
        ("kafka-controller-ops/op=", None),
        ("kafka-controller-ops/op=" + "a" * 37, None),  # longer than the audit store's column
        ("kafka-controller-ops/op=a\nb", None),
        ("kafka-python-3.0.12", None),
        ("", None),
        (None, None),
    ],
)
def test_the_operation_id_comes_from_the_client_id(client_id: str | None, expected: str | None) -> None:
    assert parse_operation_id(client_id) == expected


# -- ElectLeaders -------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("version", "etype", "name"),
    [(0, 0, "preferred"), (1, 0, "preferred"), (1, 1, "unclean"), (2, 0, "preferred"), (2, 1, "unclean")],
)
def test_elect_leaders_every_version(version: int, etype: int, name: str) -> None:
    fake = FakeBroker()
    fake.answers[A.ELECT_LEADERS] = A.ElectLeadersResponse(
        Errors.NONE,
        {
            T0: A.PartitionElectionResult(Errors.NONE, 2),
            T1: A.PartitionElectionResult(Errors.ELECTION_NOT_NEEDED, -1, None),
            T2: A.PartitionElectionResult(
                Errors.UNKNOWN_TOPIC_OR_PARTITION, -1, "The partition does not exist."
            ),
        },
    )
    response = call(  # the cache shows T0's new leader: the answer need not wait for it
        make(fake, cache_with(T0, leader=2)),
        ELECT_LEADERS,
        version,
        elect_request(version, {"t": [0, 1, 0], "u": [0]}, etype),
    )
    ((api, private),) = fake.requests
    assert api == A.ELECT_LEADERS
    assert private == A.ElectLeadersRequest(name, (T0, T1, T2), OP)  # duplicates asked once, as Kafka's Set
    assert elect_results(response) == {
        T0: (0, None),
        # ELECTION_NOT_NEEDED stays when the partitions were named, with Kafka's ApiError(error) message
        T1: (84, "Leader election not needed for topic partition."),
        T2: (3, "The partition does not exist."),
    }
    if version >= 1:
        assert response.error_code == 0


@pytest.mark.parametrize("version", [0, 1, 2])
def test_elect_leaders_on_a_broker_that_is_not_the_controller(version: int) -> None:
    """Kafka 2.8's controller callback: NOT_CONTROLLER per partition, the top level NONE."""
    fake = FakeBroker()
    fake.answers[A.ELECT_LEADERS] = A.ElectLeadersResponse(Errors.NOT_CONTROLLER)
    response = call(make(fake), ELECT_LEADERS, version, elect_request(version, {"t": [0, 1]}))
    assert elect_results(response) == {T0: (41, None), T1: (41, None)}
    if version >= 1:
        assert response.error_code == 0


@pytest.mark.parametrize("version", [0, 2])
def test_elect_leaders_for_every_partition_asks_for_the_cache_and_drops_the_not_needed(version: int) -> None:
    fake = FakeBroker()
    fake.answers[A.ELECT_LEADERS] = lambda r: A.ElectLeadersResponse(
        Errors.NONE,
        {
            tp: A.PartitionElectionResult(Errors.NONE if tp == T1 else Errors.ELECTION_NOT_NEEDED, 1)
            for tp in r.partitions
        },
    )
    cache = cache_with(T2, T0, T1)
    response = call(make(fake, cache), ELECT_LEADERS, version, elect_request(version, None))
    assert fake.requests[0][1].partitions == (T0, T1, T2)
    assert elect_results(response) == {T1: (0, None)}


def test_elect_leaders_timeout_and_a_bad_election_type() -> None:
    fake = FakeBroker()
    fake.answers[A.ELECT_LEADERS] = A.ElectLeadersResponse(Errors.REQUEST_TIMED_OUT)
    assert elect_results(call(make(fake), ELECT_LEADERS, 2, elect_request(2, {"t": [1]}))) == {T1: (7, None)}
    bad = call(make(fake), ELECT_LEADERS, 1, elect_request(1, {"t": [1]}, etype=2))
    assert bad.error_code == -1
    ((tp, (code, message)),) = elect_results(bad).items()
    assert (tp, code) == (T1, -1) and message is not None and "2" in message
    assert len(fake.requests) == 1  # the bad type never reached the controller


def test_a_foreign_client_id_sends_no_operation_id() -> None:
    fake = FakeBroker()
    fake.answers[A.ELECT_LEADERS] = A.ElectLeadersResponse(
        Errors.NONE, {T0: A.PartitionElectionResult(Errors.NONE, 1)}
    )
    call(make(fake, cache_with(T0)), ELECT_LEADERS, 2, elect_request(2, {"t": [0]}), client="adminclient-1")
    assert fake.requests[0][1].operation_id is None


# -- AlterPartitionReassignments ----------------------------------------------------------------------------
def alter_request(entries: list[tuple[str, int, list[int] | None]]) -> Any:
    schema = request_schema(ALTER_PARTITION_REASSIGNMENTS, 0)
    m = mod(schema)
    topics: dict[str, list[Any]] = {}
    for topic, p, replicas in entries:
        topics.setdefault(topic, []).append(
            m.ReassignablePartition(
                partition_index=i32(p), replicas=None if replicas is None else tuple(map(i32, replicas))
            )
        )
    return schema(
        timeout=TIMEOUT,
        topics=tuple(m.ReassignableTopic(name=t, partitions=tuple(ps)) for t, ps in topics.items()),
    )


def test_alter_partition_reassignments_v0() -> None:
    fake = FakeBroker()
    fake.answers[A.ALTER_PARTITION_REASSIGNMENTS] = A.AlterPartitionReassignmentsResponse(
        Errors.NONE,
        {
            T0: A.ReassignmentResult(Errors.NONE),
            T1: A.ReassignmentResult(Errors.NO_REASSIGNMENT_IN_PROGRESS, "none to cancel"),
            T2: A.ReassignmentResult(Errors.INVALID_REPLICA_ASSIGNMENT, "broker 9 is not alive"),
        },
    )
    request = alter_request([("t", 0, [1]), ("t", 1, None), ("u", 0, [9, 1]), ("t", 0, [2, 1])])
    response = call(make(fake), ALTER_PARTITION_REASSIGNMENTS, 0, request)
    ((api, private),) = fake.requests
    assert api == A.ALTER_PARTITION_REASSIGNMENTS
    assert private == A.AlterPartitionReassignmentsRequest({T1: None, T2: (9, 1), T0: (2, 1)}, OP)
    assert response.error_code == 0 and response.error_message is None
    got = {
        TopicPartition(t.name, p.partition_index): (int(p.error_code), p.error_message)
        for t in response.responses
        for p in t.partitions
    }
    assert got == {T0: (0, None), T1: (85, "none to cancel"), T2: (39, "broker 9 is not alive")}


@pytest.mark.parametrize(("error", "code"), [(Errors.NOT_CONTROLLER, 41), (Errors.REQUEST_TIMED_OUT, 7)])
def test_alter_partition_reassignments_whole_request_errors(error: str, code: int) -> None:
    fake = FakeBroker()
    fake.answers[A.ALTER_PARTITION_REASSIGNMENTS] = A.AlterPartitionReassignmentsResponse(error)
    response = call(make(fake), ALTER_PARTITION_REASSIGNMENTS, 0, alter_request([("t", 0, [1, 2])]))
    assert (response.error_code, response.responses) == (code, ())
    assert response.error_message


# -- ListPartitionReassignments -----------------------------------------------------------------------------
def list_request(partitions: dict[str, list[int]] | None) -> Any:
    schema = request_schema(LIST_PARTITION_REASSIGNMENTS, 0)
    topics = (
        None
        if partitions is None
        else tuple(
            mod(schema).ListPartitionReassignmentsTopics(name=t, partition_indexes=tuple(map(i32, ps)))
            for t, ps in partitions.items()
        )
    )
    return schema(timeout=TIMEOUT, topics=topics)


@pytest.mark.parametrize(("asked", "expected"), [(None, None), ({"t": [1, 0], "u": [0]}, (T1, T0, T2))])
def test_list_partition_reassignments_v0(asked: dict[str, list[int]] | None, expected: Any) -> None:
    fake = FakeBroker()
    fake.answers[A.LIST_PARTITION_REASSIGNMENTS] = A.ListPartitionReassignmentsResponse(
        Errors.NONE, {T1: ReplicaAssignment((3, 1, 2), (3,), (2,)), T0: ReplicaAssignment((1, 2), (), ())}
    )
    response = call(make(fake), LIST_PARTITION_REASSIGNMENTS, 0, list_request(asked), client=None)
    assert fake.requests == [(A.LIST_PARTITION_REASSIGNMENTS, A.ListPartitionReassignmentsRequest(expected))]
    assert response.error_code == 0
    got = {
        TopicPartition(t.name, p.partition_index): (p.replicas, p.adding_replicas, p.removing_replicas)
        for t in response.topics
        for p in t.partitions
    }
    assert got == {T0: ((1, 2), (), ()), T1: ((3, 1, 2), (3,), (2,))}


def test_list_partition_reassignments_not_controller() -> None:
    fake = FakeBroker()
    fake.answers[A.LIST_PARTITION_REASSIGNMENTS] = A.ListPartitionReassignmentsResponse(Errors.NOT_CONTROLLER)
    response = call(make(fake), LIST_PARTITION_REASSIGNMENTS, 0, list_request(None))
    assert (response.error_code, response.topics) == (41, ())


# -- fuzz: the new decoders through KafkaProtocolHandler.handle ---------------------------------------
def _any_answer(request: Any) -> Any:
    if isinstance(request, A.ElectLeadersRequest):
        return A.ElectLeadersResponse(
            Errors.NONE, {tp: A.PartitionElectionResult(Errors.NONE, 1) for tp in request.partitions or ()}
        )
    if isinstance(request, A.AlterPartitionReassignmentsRequest):
        return A.AlterPartitionReassignmentsResponse(
            Errors.NONE, {tp: A.ReassignmentResult(Errors.NONE) for tp in request.reassignments}
        )
    return A.ListPartitionReassignmentsResponse(Errors.NONE, {})


class AnyBroker(FakeBroker):
    """Answers everything; an election's new leaders show in ``cache`` before the answer (as the
    controller's UpdateMetadata would), so that no answer waits for them."""

    def __init__(self, cache: MetadataCache) -> None:
        super().__init__()
        self.cache = cache

    def handle(self, api: str, request: Any) -> Any:
        self.requests.append((api, request))
        if isinstance(request, A.ElectLeadersRequest) and request.partitions:
            lead(self.cache, *request.partitions, leader=1)
        return _any_answer(request)


KEYS = st.sampled_from(
    [
        (ELECT_LEADERS, 0),
        (ELECT_LEADERS, 1),
        (ELECT_LEADERS, 2),
        (ALTER_PARTITION_REASSIGNMENTS, 0),
        (LIST_PARTITION_REASSIGNMENTS, 0),
    ]
)


def _valid_body(key: int, version: int, topic: str, parts: list[int], replicas: list[int] | None) -> bytes:
    if key == ELECT_LEADERS:
        request = elect_request(version, {topic: parts})
    elif key == ALTER_PARTITION_REASSIGNMENTS:
        request = alter_request([(topic, p, replicas) for p in parts])
    else:
        request = list_request({topic: parts})
    buf = io.BytesIO()
    entity_writer(type(request))(buf, request)
    return buf.getvalue()


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    KEYS,
    st.text(max_size=8),
    st.lists(st.integers(-(2**31), 2**31 - 1), max_size=4),
    st.one_of(st.none(), st.lists(st.integers(-(2**31), 2**31 - 1), max_size=3)),
    st.sampled_from(["keep", "truncate", "append", "flip", "random"]),
    st.binary(max_size=40),
    st.integers(0, 200),
)
def test_the_new_decoders_never_crash_the_handler(
    caplog: pytest.LogCaptureFixture,
    key_version: tuple[int, int],
    topic: str,
    parts: list[int],
    replicas: list[int] | None,
    mutation: str,
    noise: bytes,
    at: int,
) -> None:
    """Well-formed bodies are answered with a decodable response of the same version; mangled ones
    are answered or close the connection, and nothing fails inside the handler (no exception log)."""
    key, version = key_version
    body = _valid_body(key, version, topic, parts, replicas)
    if mutation == "truncate":
        body = body[: at % (len(body) + 1)]
    elif mutation == "append":
        body += noise or b"\x00"
    elif mutation == "flip" and body:
        i = at % len(body)
        body = body[:i] + bytes([body[i] ^ 0xFF]) + body[i + 1 :]
    elif mutation == "random":
        body = noise
    cache = cache_with(T0)
    h = make(AnyBroker(cache), cache)
    w = Writer()
    encode_request_header(w, RequestHeader(key, version, 5, CLIENT), h.table)
    with caplog.at_level(logging.INFO, logger="kafka_controller.broker.kafka_wire.handler"):
        caplog.clear()
        answer = h.handle(w.getvalue() + body)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text
    if mutation == "keep":
        assert answer is not None
    if answer is not None:
        r = Reader(answer)
        assert decode_response_header(r, key, version, h.table) == 5
        _, size = entity_reader(response_schema(key, version))(r.data, r.pos)
        assert r.pos + size == len(answer)
