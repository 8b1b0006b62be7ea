"""Who changed what: admin requests outside any operation leave an ``operations`` row naming the API,
client id, peer and principal; requests of an operation, reads and validate-only requests leave none;
config values never reach the row; a down audit store delays no request."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from kafka_controller.broker import apis as A
from kafka_controller.broker.admin_audit import ANONYMOUS, AdminAudit
from kafka_controller.broker.config import BrokerConfig
from kafka_controller.broker.kafka_wire.header import RequestHeader
from kafka_controller.broker.server import BrokerServer
from kafka_controller.domain.values import TopicPartition
from kafka_controller.dryrun.memory_store import InMemoryMetadataStore
from kafka_controller.dryrun.memory_zk import InMemoryZooKeeper
from tests.broker.helpers import wait_until

SECRET = "s3cr3t-sentinel-value"


@dataclass
class _Config:
    name: str
    value: str


@dataclass
class _Topic:
    name: str
    num_partitions: int
    configs: tuple[_Config, ...] = ()


@dataclass
class _CreateTopics:
    topics: tuple[_Topic, ...]
    validate_only: bool = False


@dataclass
class _Result:
    name: str
    error_code: Any


@dataclass
class _Response:
    topics: tuple[_Result, ...]


@dataclass
class FakeLog:
    """``OperationLog``'s two calls, recorded; ``fail`` makes every call raise."""

    started: list[dict[str, Any]] = field(default_factory=list)
    finished: list[tuple[Any, ...]] = field(default_factory=list)
    fail: bool = False
    done: threading.Event = field(default_factory=threading.Event)

    def start_operation(self, *args: Any, **kwargs: Any) -> str:
        if self.fail:
            raise ConnectionError("audit store down")
        kind, requester, reason, parameters, dry_run = args
        self.started.append(
            {
                "kind": kind,
                "requester": requester,
                "reason": reason,
                "parameters": parameters,
                "dry_run": dry_run,
                **kwargs,
            }
        )
        return str(kwargs["operation_id"])

    def finish_operation(self, *args: Any, **kwargs: Any) -> None:
        self.finished.append((*args, kwargs))
        self.done.set()


@pytest.fixture
def fake() -> Iterator[tuple[AdminAudit, FakeLog]]:
    log = FakeLog()
    audit = AdminAudit(lambda: log, lambda: "clusterA", now_ms=lambda: 1000, retry_for_s=0.5)
    yield audit, log
    audit.close()


def _create(validate_only: bool = False) -> _CreateTopics:
    return _CreateTopics((_Topic("orders", 3, (_Config("retention.ms", SECRET),)),), validate_only)


def test_a_kafka_request_outside_an_operation_is_recorded_with_api_client_and_principal(
    fake: tuple[AdminAudit, FakeLog],
) -> None:
    audit, log = fake
    seen: list[RequestHeader] = []

    def handle(header: RequestHeader, request: Any) -> Any:
        seen.append(header)
        return _Response((_Result("orders", 0),))

    audit.kafka(RequestHeader(19, 5, 7, "my-script"), _create(), handle)
    assert log.done.wait(10)
    (row,) = log.started
    assert row["kind"] == "CreateTopics" and row["client_id"] == "my-script"
    assert row["principal"] == row["requester"] == ANONYMOUS and row["cluster_id"] == "clusterA"
    # the handler saw the operation the row names, so the controller stamps it on its transitions
    assert seen[0].operation_id == row["operation_id"] and seen[0].client_id == "my-script"
    assert row["parameters"]["request"]["topics"][0]["name"] == "orders"
    assert row["parameters"]["request"]["topics"][0]["configs"] == [{"name": "retention.ms"}]
    assert SECRET not in json.dumps(row)
    ((op, status, error, result, times),) = log.finished
    assert (op, status, error) == (row["operation_id"], "succeeded", None) and times == {"finished_ms": 1000}
    assert result == {"errors": {"NONE": 1}} and row["dry_run"] is False


def test_per_resource_errors_fail_the_operation_and_are_counted(fake: tuple[AdminAudit, FakeLog]) -> None:
    audit, log = fake
    response = _Response((_Result("a", 0), _Result("b", "TOPIC_ALREADY_EXISTS")))
    audit.kafka(RequestHeader(19, 5, 7, "c"), _create(), lambda h, r: response)
    assert log.done.wait(10)
    ((_, status, error, result, _),) = log.finished
    assert status == "failed" and "TOPIC_ALREADY_EXISTS x1" in error
    assert (
        result == {"errors": {"0": 1, "TOPIC_ALREADY_EXISTS": 1}}
        or result["errors"]["TOPIC_ALREADY_EXISTS"] == 1
    )


@pytest.mark.parametrize(
    ("header", "request_"),
    [
        (RequestHeader(19, 5, 7, "kafka-controller-ops/op=airflow-op-1"), _create()),  # part of an operation
        (RequestHeader(19, 5, 7, "x"), _create(validate_only=True)),  # changes nothing
        (RequestHeader(32, 1, 7, "x"), _create()),  # DescribeConfigs: a read
    ],
)
def test_requests_of_an_operation_reads_and_validations_leave_no_row(
    fake: tuple[AdminAudit, FakeLog], header: RequestHeader, request_: Any
) -> None:
    audit, log = fake
    seen: list[RequestHeader] = []
    audit.kafka(header, request_, lambda h, r: seen.append(h))
    audit.close()
    assert log.started == [] and log.finished == []
    assert seen == [header]  # untouched


def test_private_requests_get_an_operation_id_unless_they_carry_one(fake: tuple[AdminAudit, FakeLog]) -> None:
    audit, log = fake
    seen: list[Any] = []
    handle = audit.private(lambda api, r: seen.append(r) or A.ElectLeadersResponse("NONE", {}))
    tps = (TopicPartition("t", 0),)
    handle(A.ELECT_LEADERS, A.ElectLeadersRequest("preferred", tps))
    handle(A.ELECT_LEADERS, A.ElectLeadersRequest("preferred", tps, "airflow-op"))
    handle(A.DESCRIBE_REPLICAS, None)
    assert log.done.wait(10)
    audit.close()
    (row,) = log.started
    assert row["kind"] == "ElectLeaders" and row["client_id"] is None
    assert seen[0].operation_id == row["operation_id"]
    assert seen[1].operation_id == "airflow-op" and seen[2] is None


def test_a_down_store_delays_no_request_and_drops_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    log = FakeLog(fail=True)
    audit = AdminAudit(lambda: log, lambda: None, retry_for_s=0.3)
    answers = [audit.kafka(RequestHeader(20, 4, i, "c"), object(), lambda h, r: "answered") for i in range(3)]
    assert answers == ["answered"] * 3  # nothing waited for the store
    audit.close(timeout_s=10)
    assert log.finished == []  # no end recorded for a start that never was
    assert any("cannot record the start of operation" in r.getMessage() for r in caplog.records)


def test_a_flood_is_bounded_by_the_queue() -> None:
    gate = threading.Event()

    def slow_log() -> FakeLog:
        gate.wait(10)
        return FakeLog()

    audit = AdminAudit(slow_log, lambda: None, queue_size=4)
    for i in range(50):
        audit.kafka(RequestHeader(20, 4, i, "c"), object(), lambda h, r: None)
    assert audit._queue.qsize() <= 4
    gate.set()
    audit.close()


# -- a real broker, a real Kafka client ----------------------------------------------------------


def _rows(db: Path) -> list[dict[str, Any]]:
    try:
        with sqlite3.connect(db) as conn:
            conn.row_factory = sqlite3.Row
            return [dict(r) for r in conn.execute("select * from operations")]
    except sqlite3.OperationalError:  # no schema yet
        return []


def test_kafka_python_create_topics_leaves_an_operations_row(tmp_path: Path) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    tree = InMemoryZooKeeper()
    db = tmp_path / "audit.db"
    server = BrokerServer(
        BrokerConfig.of(1, {"auto.leader.rebalance.enable": "false"}),
        InMemoryMetadataStore(tree),
        audit_url=f"sqlite:///{db}",
        audit_spool_dir=tmp_path / "spool",
    ).startup()
    admin = None
    try:
        wait_until(lambda: server.controller.is_active, "broker 1 to become controller")
        port = server.transport.port
        admin = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{port}", client_id="audit-probe")
        admin.create_topics([NewTopic("probed", 2, 1, topic_configs={"retention.ms": "7654321"})])
        rows = wait_until(lambda: [r for r in _rows(db) if r["finished_ms"] is not None], "the operation row")
        (row,) = rows
        assert row["kind"] == "CreateTopics" and row["status"] == "succeeded"
        assert row["client_id"] == "audit-probe" and row["principal"] == "User:ANONYMOUS"
        assert row["client_address"].startswith("127.0.0.1:")
        assert row["cluster_id"] == server.cluster_id and row["dry_run"] == 0
        assert "probed" in row["parameters"] and "7654321" not in json.dumps(row)
        # the controller's transitions for the topic carry the cluster id too
        wait_until(
            lambda: (
                sqlite3.connect(db)
                .execute(
                    "select count(*) from partition_transitions where topic='probed' and cluster_id=?",
                    (server.cluster_id,),
                )
                .fetchone()[0]
                >= 4
            ),
            "the topic's transitions with the cluster id",
        )
    finally:
        if admin is not None:
            admin.close()
        assert server.shutdown() is True


def test_a_huge_request_makes_a_bounded_row(fake: tuple[AdminAudit, FakeLog]) -> None:
    audit, log = fake
    topics = tuple(_Topic("t" * 10_000 + str(i), 1, (_Config("c" * 10_000, SECRET),)) for i in range(5_000))
    audit.kafka(RequestHeader(19, 5, 7, "x" * 100_000), _CreateTopics(topics), lambda h, r: _Response(()))
    assert log.done.wait(10)
    (row,) = log.started
    assert len(json.dumps(row)) < 2_000_000 and len(row["client_id"]) == 255
    assert "more" in json.dumps(row["parameters"])  # the topics left out are counted
