"""The audit web app through its HTTP interface: data, escaping, and Airflow's own auth in front."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from kafka_controller.audit.engine import create_audit_engine
from kafka_controller.audit.operations import OperationLog
from kafka_controller.domain.audit_records import PartitionTransition, ReplicaTransition

pytestmark = pytest.mark.airflow


def _seed(url: str) -> dict[str, Any]:
    """Two operations (one with transitions), one reconciliation run with two findings."""
    from kafka_controller.audit.writer import AuditWriter
    from kafka_controller.reconcile.results import ResultsStore

    log = OperationLog(url)
    op = log.start_operation(
        "preferred_leader_election", "alice", "<script>alert(1)</script>", {"scope": "all"}, False
    )
    log.finish_operation(op, "succeeded")
    other = log.start_operation("rolling_restart", "bob", "maintenance", None, True)
    log.close()
    records = [
        PartitionTransition(
            "orders",
            0,
            "OnlinePartition",
            "OnlinePartition",
            leader_before=2,
            leader_after=1,
            controller_id=1,
            controller_epoch=3,
            operation_id=op,
            sequence=1,
            timestamp_ms=1_700_000_000_000,
        ),
        ReplicaTransition(
            "orders",
            0,
            2,
            "OnlineReplica",
            "OnlineReplica",
            controller_id=1,
            controller_epoch=3,
            operation_id=op,
            sequence=2,
            timestamp_ms=1_700_000_000_001,
        ),
        PartitionTransition(
            "other",
            0,
            "OfflinePartition",
            "OnlinePartition",
            controller_id=1,
            controller_epoch=3,
            sequence=3,
            timestamp_ms=1_700_000_000_002,
        ),
    ]
    import tempfile

    with tempfile.TemporaryDirectory() as spool:
        writer = AuditWriter(url, spool_dir=spool)
        writer.record(records)
        writer.close()
    run_id = str(uuid.uuid4())
    results = ResultsStore(url)
    results.start_run(run_id, 1_700_000_000_100, "/snap", op)
    findings = [
        {
            "kind": "not_on_preferred_leader",
            "severity": "info",
            "topic": "orders",
            "partition": 0,
            "broker": 2,
            "expected": "1",
            "actual": "2",
            "detail": "<b>x</b>",
        },
        {
            "kind": "under_replicated",
            "severity": "warning",
            "topic": "orders",
            "partition": 1,
            "broker": None,
            "expected": "[1,2]",
            "actual": "[1]",
            "detail": None,
        },
    ]
    results.finish_run(
        run_id, finished_ms=1_700_000_000_200, partitions_checked=2, findings=findings, detail="{}"
    )
    results.close()
    return {"op": op, "other": other, "run_id": run_id}


@pytest.fixture
def seeded(tmp_path) -> Iterator[tuple[str, dict[str, Any]]]:
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    yield url, _seed(url)


@pytest.fixture
def client(seeded) -> Iterator[tuple[Any, dict[str, Any]]]:
    from fastapi.testclient import TestClient

    from kafka_controller.airflow.web import create_app

    url, ids = seeded
    engine = create_audit_engine(url)
    app = create_app(lambda: engine, auth=lambda: None)  # auth is tested below, with Airflow's
    with TestClient(app) as c:
        yield c, ids
    engine.dispose()


def test_operations_and_their_transitions_as_json(client) -> None:
    c, ids = client
    ops = c.get("/api/operations").json()
    assert [o["operation_id"] for o in ops] == [ids["other"], ids["op"]]  # newest first
    assert c.get("/api/operations", params={"kind": "rolling_restart"}).json()[0]["dry_run"] is True
    one = c.get(f"/api/operations/{ids['op']}").json()
    assert (
        one["requester"] == "alice" and one["parameters"] == {"scope": "all"} and one["status"] == "succeeded"
    )
    rows = c.get(f"/api/operations/{ids['op']}/transitions").json()
    assert [(r["kind"], r["topic"], r["partition"]) for r in rows] == [
        ("partition", "orders", 0),
        ("replica", "orders", 0),
    ]
    assert rows[0]["leader_after"] == 1
    assert c.get(f"/api/operations/{ids['other']}/transitions").json() == []
    assert c.get("/api/operations/nope").status_code == 404
    assert c.get("/api/operations/nope/transitions").status_code == 404
    assert c.get("/api/operations", params={"limit": 0}).status_code == 422


def test_reconciliation_runs_findings_and_report(client) -> None:
    c, ids = client
    runs = c.get("/api/reconciliation/runs").json()
    assert [(r["run_id"], r["findings_count"], r["operation_id"]) for r in runs] == [
        (ids["run_id"], 2, ids["op"])
    ]
    findings = c.get("/api/reconciliation/findings").json()  # the latest run by default
    assert sorted(f["kind"] for f in findings) == ["not_on_preferred_leader", "under_replicated"]
    assert c.get("/api/reconciliation/findings", params={"run_id": "other"}).json() == []
    report = c.get("/api/report").json()
    assert report["summary"]["partition_transitions"] == 2 and report["summary"]["operations"] == 2


def test_html_pages_have_charts_links_and_escaped_values(client) -> None:
    c, ids = client
    page = c.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    html = page.text
    assert "<svg" in html  # the charts
    assert f'href="operations/{ids["op"]}"' in html
    assert "&lt;b&gt;x&lt;/b&gt;" in html and "<b>x</b>" not in html
    op_page = c.get(f"/operations/{ids['op']}").text
    assert "&lt;script&gt;" in op_page and "<script>" not in op_page
    assert op_page.count("<tr>") >= 3  # the operation, then its two transitions
    assert c.get("/operations/nope").status_code == 404


def test_a_database_that_cannot_be_reached_is_a_503(tmp_path) -> None:
    from fastapi.testclient import TestClient

    from kafka_controller.airflow.web import create_app
    from kafka_controller.audit.engine import AuditStoreError

    def broken() -> Any:
        raise AuditStoreError("no audit database at /nowhere")

    with TestClient(create_app(broken, auth=lambda: None)) as c:
        r = c.get("/api/operations")
    assert r.status_code == 503 and "no audit database" in r.json()["detail"]


@pytest.fixture
def airflow_token(airflow_db) -> str:
    """A JWT from Airflow's own (simple) auth manager, as the UI would hold."""
    from airflow.api_fastapi.app import get_auth_manager, init_auth_manager
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser

    init_auth_manager()
    return str(get_auth_manager().generate_jwt(SimpleAuthManagerUser(username="admin", role="admin")))


def test_mounted_in_airflows_api_server_it_requires_airflows_auth(seeded, airflow_token, monkeypatch) -> None:
    """The plugin's app inside Airflow's real API app: no token, no data; a valid token, data."""
    from fastapi.testclient import TestClient

    from tests.airflow.support import audit_conn_env

    url, ids = seeded
    monkeypatch.setenv(*audit_conn_env(url))
    from airflow.api_fastapi.app import create_app

    app = create_app(apps="core")
    with TestClient(app) as c:
        assert c.get("/kafka-controller/api/operations").status_code == 401
        assert c.get("/kafka-controller/").status_code == 401
        bad = c.get("/kafka-controller/api/operations", headers={"Authorization": "Bearer not-a-jwt"})
        assert bad.status_code in (401, 403)
        ok = c.get("/kafka-controller/api/operations", headers={"Authorization": f"Bearer {airflow_token}"})
        assert ok.status_code == 200 and {o["operation_id"] for o in ok.json()} == {ids["op"], ids["other"]}
        cookie = c.get("/kafka-controller/", cookies={"_token": airflow_token})
        assert cookie.status_code == 200 and "<svg" in cookie.text
