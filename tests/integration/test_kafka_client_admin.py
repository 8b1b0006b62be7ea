"""Kafka's own admin clients run elections and reassignments on this project's brokers.

kafka-python's ``KafkaAdminClient`` (preferred and unclean ``elect_leaders``, alter and list
partition reassignments) and confluent-kafka's ``AdminClient.elect_leaders`` talk ElectLeaders,
AlterPartitionReassignments and ListPartitionReassignments to real broker processes; every outcome
is checked in ZooKeeper, and the audit rows of the transitions carry the operation id the client
sent in its client id (``kafka-controller-ops/op=<id>``).
"""

from __future__ import annotations

import importlib
import io
import socket
import struct
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import create_engine, select

from kafka_controller.audit.schema import partition_transitions
from kafka_controller.broker.kafka_wire.controller_admin_apis import (
    ELECT_LEADERS,
    LIST_PARTITION_REASSIGNMENTS,
)
from kafka_controller.cluster.local import LocalCluster
from kafka_controller.domain.values import TopicPartition
from kafka_controller.ports import TopicIdReplicaAssignment
from tests.integration.conftest import ClusterFactory
from tests.integration.helpers import TIMEOUT, state, wait_healthy, wait_state

pytestmark = [pytest.mark.integration, pytest.mark.zk, pytest.mark.clients]


@pytest.fixture(scope="module")
def cluster(make_cluster: ClusterFactory) -> LocalCluster:
    c = make_cluster(3, audit=True, broker_config={"auto.leader.rebalance.enable": "false"})
    wait_healthy(c)
    return c


def client_id(op: str) -> str:
    return f"kafka-controller-ops/op={op}"


@pytest.fixture
def kafka_python(cluster: LocalCluster) -> Iterator[Any]:
    """A factory of kafka-python admin clients bootstrapped from the running brokers."""
    from kafka.admin import KafkaAdminClient

    made: list[Any] = []

    def make(op: str) -> Any:
        admin = KafkaAdminClient(
            bootstrap_servers=[cluster.listener(b) for b in cluster.running_broker_ids()],
            client_id=client_id(op),
            request_timeout_ms=30_000,
        )
        made.append(admin)
        return admin

    yield make
    for admin in made:
        admin.close()


def audited(cluster: LocalCluster, op: str, topic: str, n: int = 1) -> list[tuple[int, int | None]]:
    """``(partition, leader_after)`` of the partition transitions recorded with ``op`` (polled: the
    audit writer flushes in the background)."""
    assert cluster.audit_url is not None
    engine = create_engine(cluster.audit_url)
    t = partition_transitions
    query = select(t.c.partition, t.c.leader_after).where(t.c.operation_id == op, t.c.topic == topic)

    def probe() -> list[tuple[int, int | None]] | None:
        with engine.connect() as conn:
            rows = [(r[0], r[1]) for r in conn.execute(query)]
        return rows if len(rows) >= n else None

    try:
        return cluster.waits.wait_until(probe, TIMEOUT, f"{n} audited transition(s) of {topic} for {op}")
    finally:
        engine.dispose()


def assignment(cluster: LocalCluster, topic: str) -> tuple[tuple[int, ...], ...]:
    """``(replicas, adding, removing)`` of ``topic``-0 in ZooKeeper."""
    held = cluster.store.get_replica_assignment_and_topic_ids([topic])[topic]
    assert isinstance(held, TopicIdReplicaAssignment)
    ra = held.assignment[TopicPartition(topic, 0)]
    return ra.replicas, ra.adding_replicas, ra.removing_replicas


def _new_topic(cluster: LocalCluster, topic: str, replicas: list[int]) -> None:
    cluster.create_topic(topic, {0: replicas})
    wait_state(cluster, topic, 0, leader=replicas[0], isr=tuple(replicas))


def _off_preferred(cluster: LocalCluster, topic: str, replicas: list[int]) -> None:
    """``topic``-0 led by its second replica: restart the first (auto rebalance is off)."""
    _new_topic(cluster, topic, replicas)
    cluster.kill_broker(replicas[0], wait_deregistered=True, timeout=TIMEOUT)
    wait_state(cluster, topic, 0, leader=replicas[1])
    cluster.start_broker(replicas[0], timeout=TIMEOUT)
    wait_state(cluster, topic, 0, leader=replicas[1], isr=tuple(replicas))


def test_kafka_python_preferred_election(cluster: LocalCluster, kafka_python: Any) -> None:
    from kafka.errors import ElectionNotNeededError, NoError

    a, b, _ = cluster.broker_ids
    _off_preferred(cluster, "kp-preferred", [a, b])
    op = str(uuid.uuid4())
    response = kafka_python(op).elect_leaders(0, {"kp-preferred": [0]}, raise_errors=False)
    ((topic, partitions),) = [(r.topic, r.partition_result) for r in response.replica_election_results]
    assert (topic, [(p.partition_id, p.error_code) for p in partitions]) == ("kp-preferred", [(0, 0)])
    assert NoError.errno == 0
    wait_state(cluster, "kp-preferred", 0, leader=a)  # ZooKeeper holds the preferred leader
    assert audited(cluster, op, "kp-preferred") == [(0, a)]
    again = kafka_python(str(uuid.uuid4())).elect_leaders(0, {"kp-preferred": [0]}, raise_errors=False)
    codes = [p.error_code for r in again.replica_election_results for p in r.partition_result]
    assert codes == [ElectionNotNeededError.errno]


def _offline_but_for_an_unclean_leader(cluster: LocalCluster, topic: str) -> tuple[int, int]:
    """``topic``-0 offline: its last ISR member ``x`` is down, ``y`` (out of the ISR) is up."""
    c = cluster.controller()[0]
    x, y = [b for b in cluster.broker_ids if b != c]
    _new_topic(cluster, topic, [x, y])
    cluster.kill_broker(y, wait_deregistered=True, timeout=TIMEOUT)
    wait_state(cluster, topic, 0, leader=x, isr=(x,))
    cluster.kill_broker(x, wait_deregistered=True, timeout=TIMEOUT)
    wait_state(cluster, topic, 0, leader=-1)
    cluster.start_broker(y, timeout=TIMEOUT)
    cluster.waits.wait_metadata([y], timeout=TIMEOUT)
    assert state(cluster, topic)[1:4:2] == (-1, (x,))  # offline: y is not in the ISR
    return x, y


def test_kafka_python_unclean_election(cluster: LocalCluster, kafka_python: Any) -> None:
    x, y = _offline_but_for_an_unclean_leader(cluster, "kp-unclean")
    try:
        op = str(uuid.uuid4())
        response = kafka_python(op).elect_leaders(1, {"kp-unclean": [0]}, raise_errors=False)
        codes = [
            (p.partition_id, p.error_code)
            for r in response.replica_election_results
            for p in r.partition_result
        ]
        assert codes == [(0, 0)]
        _, leader, _, isr = state(cluster, "kp-unclean")
        assert (leader, isr) == (y, (y,))
        assert audited(cluster, op, "kp-unclean") == [(0, y)]
    finally:
        cluster.start_broker(x, timeout=TIMEOUT)
    wait_healthy(cluster)


def test_confluent_kafka_preferred_election(cluster: LocalCluster) -> None:
    from confluent_kafka import ElectionType
    from confluent_kafka import TopicPartition as CTopicPartition
    from confluent_kafka.admin import AdminClient

    a, b, _ = cluster.broker_ids
    _off_preferred(cluster, "ck-preferred", [b, a])
    op = str(uuid.uuid4())
    admin = AdminClient(
        {"bootstrap.servers": cluster.listener(cluster.broker_ids[-1]), "client.id": client_id(op)}
    )
    # No request_timeout/operation_timeout keywords: confluent-kafka 2.16.1 raises SystemError on them.
    future = admin.elect_leaders(ElectionType.PREFERRED, [CTopicPartition("ck-preferred", 0)])
    results = future.result(timeout=TIMEOUT)
    assert {(tp.topic, tp.partition): err for tp, err in results.items()} == {("ck-preferred", 0): None}
    wait_state(cluster, "ck-preferred", 0, leader=b)
    assert audited(cluster, op, "ck-preferred") == [(0, b)]


def test_confluent_kafka_unclean_election(cluster: LocalCluster) -> None:
    from confluent_kafka import ElectionType
    from confluent_kafka import TopicPartition as CTopicPartition
    from confluent_kafka.admin import AdminClient

    x, y = _offline_but_for_an_unclean_leader(cluster, "ck-unclean")
    try:
        op = str(uuid.uuid4())
        admin = AdminClient({"bootstrap.servers": cluster.listener(y), "client.id": client_id(op)})
        future = admin.elect_leaders(ElectionType.UNCLEAN, [CTopicPartition("ck-unclean", 0)])
        results = future.result(timeout=TIMEOUT)
        assert {(tp.topic, tp.partition): err for tp, err in results.items()} == {("ck-unclean", 0): None}
        _, leader, _, isr = state(cluster, "ck-unclean")
        assert (leader, isr) == (y, (y,))
        assert audited(cluster, op, "ck-unclean") == [(0, y)]
    finally:
        cluster.start_broker(x, timeout=TIMEOUT)
    wait_healthy(cluster)


def test_kafka_python_alter_and_list_partition_reassignments(
    cluster: LocalCluster, kafka_python: Any
) -> None:
    from kafka import TopicPartition as KTopicPartition

    c = cluster.controller()[0]
    a, target = [b for b in cluster.broker_ids if b != c]
    _new_topic(cluster, "kp-move", [a])
    tp = KTopicPartition("kp-move", 0)
    op = str(uuid.uuid4())
    admin = kafka_python(op)
    assert admin.list_partition_reassignments() == {}  # also finds the controller before the pause
    cluster.pause_broker(target)  # registered but not fetching: the reassignment stays in progress
    try:
        assert admin.alter_partition_reassignments({tp: [target]}) == {tp: None}
        listed = admin.list_partition_reassignments()
        assert listed == {
            tp: {"replicas": [target, a], "adding_replicas": [target], "removing_replicas": [a]}
        }
        assert admin.list_partition_reassignments([tp]) == listed
        assert assignment(cluster, "kp-move") == ((target, a), (target,), (a,))
    finally:
        cluster.resume_broker(target)
    wait_state(cluster, "kp-move", 0, leader=target, isr=(target,))

    def done() -> bool:
        return assignment(cluster, "kp-move") == ((target,), (), ())

    cluster.waits.wait_until(done, TIMEOUT, "the reassignment to complete in ZooKeeper")
    assert admin.list_partition_reassignments() == {}
    # The reassignment's start (the leader epoch bump, leader a) is recorded with the operation id.
    assert (0, a) in audited(cluster, op, "kp-move")
    from kafka.errors import NoReassignmentInProgressError

    assert kafka_python(str(uuid.uuid4())).alter_partition_reassignments({tp: None}) == {
        tp: NoReassignmentInProgressError
    }


def _raw(listener: str, key: int, version: int, request: Any) -> Any:
    """One Kafka request straight to ``listener`` (no client-side routing); the decoded response."""
    from kio.serial import entity_reader, entity_writer

    from kafka_controller.broker.kafka_wire.header import RequestHeader, encode_request_header
    from kafka_controller.broker.kafka_wire.kio_api import response_schema
    from kafka_controller.broker.kafka_wire.primitives import Writer

    table = {key: (version, version, 2 if key == ELECT_LEADERS else 0)}
    w = Writer()
    encode_request_header(w, RequestHeader(key, version, 9, "raw"), table)
    body = io.BytesIO()
    entity_writer(type(request))(body, request)
    payload = w.getvalue() + body.getvalue()
    host, port = listener.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=TIMEOUT) as sock:
        sock.sendall(struct.pack(">i", len(payload)) + payload)
        data = b""
        while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
            chunk = sock.recv(65536)
            assert chunk, "the broker closed the connection"
            data += chunk
    header = 4 if version < table[key][2] else 5  # correlation id (+ empty tagged fields)
    assert struct.unpack(">i", data[4:8])[0] == 9
    response, _ = entity_reader(response_schema(key, version))(memoryview(data), 4 + header)
    return response


def test_a_broker_that_is_not_the_controller_says_not_controller(cluster: LocalCluster) -> None:
    """Kafka 2.8: per partition for ElectLeaders (top level NONE), top level for the reassignments."""
    from kio.static.primitive import i32

    from kafka_controller.broker.kafka_wire.kio_api import request_schema

    c = cluster.controller()[0]
    other = cluster.listener(next(b for b in cluster.broker_ids if b != c))
    elect = request_schema(ELECT_LEADERS, 1)
    topics = (
        importlib.import_module(elect.__module__).TopicPartitions(topic="kp-move", partitions=(i32(0),)),
    )
    r = _raw(other, ELECT_LEADERS, 1, elect(election_type=0, topic_partitions=topics))
    assert r.error_code == 0
    assert [
        (p.partition_id, p.error_code) for t in r.replica_election_results for p in t.partition_result
    ] == [(0, 41)]
    lst = request_schema(LIST_PARTITION_REASSIGNMENTS, 0)
    r = _raw(other, LIST_PARTITION_REASSIGNMENTS, 0, lst(topics=None))
    assert (r.error_code, r.topics) == (41, ())


def test_the_cli_elects_through_the_bootstrap_server_it_is_given(
    capsys: pytest.CaptureFixture[str], cluster: LocalCluster
) -> None:
    """``elect --bootstrap-server`` sends ElectLeaders with kafka-python to that broker (a
    non-controller: the client finds the controller through Metadata); the leader printed is
    ZooKeeper's."""
    from tests.cli.clirun import run

    a, b, _ = cluster.broker_ids
    _off_preferred(cluster, "cli-preferred", [a, b])
    c = cluster.controller()[0]
    other = cluster.listener(next(x for x in cluster.running_broker_ids() if x != c))
    argv = ["elect", "--zookeeper", cluster.connect_string, "--bootstrap-server", other, "--timeout", "60"]
    r = run(
        capsys,
        *argv,
        "--election-type",
        "preferred",
        "--topic",
        "cli-preferred",
        "--partition",
        "0",
        "--json",
    )
    assert r.code == 0, r.err
    assert r.json()["results"] == [
        {"topic": "cli-preferred", "partition": 0, "error": "NONE", "leader": a, "message": None}
    ]
    assert state(cluster, "cli-preferred")[1] == a
    r = run(capsys, *argv, "--election-type", "preferred", "--topic", "cli-preferred", "--partition", "0")
    assert (r.code, r.out) == (0, "Valid replica already elected for partitions cli-preferred-0\n")
