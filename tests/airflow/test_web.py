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
    log.finish_operation(
        op, "succeeded", None, {"elected": {"broker_id": 2, "epoch": 9}, "recovery_ms": 6120.5}
    )
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
    # a later run that was interrupted: it must not hide the findings above
    interrupted = str(uuid.uuid4())
    results.start_run(interrupted, 1_700_000_000_300, "/snap2", None)
    results.fail_run(interrupted, 1_700_000_000_400, "Spark was killed")
    results.close()
    return {"op": op, "other": other, "run_id": run_id, "interrupted": interrupted}


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
    assert [o["operation_id"] for o in c.get("/api/operations").json()] == [ids["op"]]  # no dry runs
    ops = c.get("/api/operations", params={"dry_runs": "true"}).json()
    assert [o["operation_id"] for o in ops] == [ids["other"], ids["op"]]  # newest first
    kind = {"kind": "rolling_restart", "dry_runs": "true"}
    assert c.get("/api/operations", params=kind).json()[0]["dry_run"] is True
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
        (ids["interrupted"], None, None),
        (ids["run_id"], 2, ids["op"]),
    ]
    findings = c.get("/api/reconciliation/findings").json()  # the latest completed run by default
    assert sorted(f["kind"] for f in findings) == ["not_on_preferred_leader", "under_replicated"]
    assert c.get("/api/reconciliation/findings", params={"run_id": "other"}).json() == []
    report = c.get("/api/report").json()
    assert report["summary"]["partition_transitions"] == 2 and report["summary"]["operations"] == 1
    assert c.get("/api/report", params={"dry_runs": "true"}).json()["summary"]["operations"] == 2


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
    assert op_page.count("<tr>") >= 4  # the operation, its result, then its two transitions
    assert c.get("/operations/nope").status_code == 404


def test_pages_are_styled_and_say_what_an_operation_did(client) -> None:
    from kafka_controller.audit.html import CSS

    c, ids = client
    index = c.get("/").text
    assert CSS in index
    assert f'href="operations/{ids["other"]}"' not in index  # the dry run is left out...
    assert (
        f'href="operations/{ids["other"]}"' in c.get("/", params={"dry_runs": "true"}).text
    )  # ...unless asked
    findings = index.split("Reconciliation findings (latest completed run)")[1]
    assert "not_on_preferred_leader" in findings and "under_replicated" in findings
    assert f"A later run, {ids['interrupted']}" in findings and "Spark was killed" in findings

    op_page = c.get(f"/operations/{ids['op']}").text
    assert CSS in op_page
    result = op_page.split("<h2>Result</h2>")[1].split("<h2>")[0]
    assert "recovery_ms" in result and "6120.5" in result
    assert "&quot;broker_id&quot;: 2" in result  # the whole result, escaped JSON
    assert "Parameters" in op_page and "&quot;scope&quot;: &quot;all&quot;" in op_page

    plan_page = c.get(f"/operations/{ids['other']}").text
    assert "Dry run: nothing was changed" in plan_page
    assert "No result recorded" in plan_page


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
        ok = c.get(
            "/kafka-controller/api/operations",
            params={"dry_runs": "true"},
            headers={"Authorization": f"Bearer {airflow_token}"},
        )
        assert ok.status_code == 200 and {o["operation_id"] for o in ok.json()} == {ids["op"], ids["other"]}
        cookie = c.get("/kafka-controller/", cookies={"_token": airflow_token})
        assert cookie.status_code == 200 and "<svg" in cookie.text


def test_an_unauthenticated_browser_is_sent_to_airflows_login(seeded, airflow_db, monkeypatch) -> None:
    """A browser (Accept: text/html) without a token goes to Airflow's login page, which brings it
    back to the page it asked for; an API client still gets its 401 JSON."""
    from fastapi.testclient import TestClient

    from tests.airflow.support import audit_conn_env

    url, ids = seeded
    monkeypatch.setenv(*audit_conn_env(url))
    from airflow.api_fastapi.app import create_app

    browser = {"Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}
    page = f"/kafka-controller/operations/{ids['op']}"
    with TestClient(create_app(apps="core"), follow_redirects=False) as c:
        r = c.get(page, headers=browser)
        assert r.status_code == 307, r.text
        assert (
            r.headers["location"] == "/api/v2/auth/login?next=%2Fkafka-controller%2Foperations%2F" + ids["op"]
        )
        login = c.get(r.headers["location"])  # Airflow's own route: on to the auth manager's page
        assert login.status_code == 307 and "login" in login.headers["location"]
        assert "next=" in login.headers["location"]
        api = c.get("/kafka-controller/api/operations", headers={"Accept": "application/json"})
        assert api.status_code == 401 and api.json() == {"detail": "Not authenticated"}
        assert c.get("/kafka-controller/", headers={"Accept": "*/*"}).status_code == 401


def test_one_store_two_clusters_each_page_keeps_to_the_cluster_asked(tmp_path) -> None:
    import tempfile

    from fastapi.testclient import TestClient

    from kafka_controller.airflow.web import create_app
    from kafka_controller.audit.writer import AuditWriter
    from kafka_controller.reconcile.results import ResultsStore

    url = f"sqlite:///{tmp_path / 'two.db'}"
    log = OperationLog(url)
    ops = {
        c: log.start_operation("topics_create", f"user-{c}", "r", None, False, cluster_id=c)
        for c in ("clusterA", "clusterB")
    }
    log.close()
    for cluster, leader in (("clusterA", 1), ("clusterB", 2)):
        with tempfile.TemporaryDirectory() as spool:
            writer = AuditWriter(url, spool_dir=spool, cluster_id=cluster)
            # the same controller key in both clusters: both rows stay
            writer.record(
                [
                    PartitionTransition(
                        "orders", 0, "NewPartition", "OnlinePartition", leader_after=leader,
                        controller_id=1, controller_epoch=1, sequence=1, timestamp_ms=1_700_000_000_000,
                    )
                ]
            )  # fmt: skip
            writer.close()
    results = ResultsStore(url)
    for n, cluster in enumerate(("clusterA", "clusterB")):
        run_id = f"run-{cluster}"
        results.start_run(run_id, 1_700_000_000_100 + n, "/snap", None, cluster)
        finding = {
            "kind": f"finding_of_{cluster}", "severity": "warning", "topic": "orders", "partition": 0,
            "broker": None, "expected": "1", "actual": "2", "detail": None,
        }  # fmt: skip
        results.finish_run(
            run_id, finished_ms=1_700_000_000_200 + n, partitions_checked=1, findings=[finding], detail="{}"
        )
    results.close()

    engine = create_audit_engine(url)
    try:
        with TestClient(create_app(lambda: engine, auth=lambda: None)) as c:
            mine = c.get("/api/operations", params={"cluster_id": "clusterA"}).json()
            assert [o["operation_id"] for o in mine] == [ops["clusterA"]]
            assert len(c.get("/api/operations").json()) == 2
            report = c.get("/api/report", params={"cluster_id": "clusterA"}).json()
            assert report["summary"]["partition_transitions"] == 1 and report["summary"]["operations"] == 1
            assert c.get("/api/report").json()["summary"]["partition_transitions"] == 2
            page = c.get("/", params={"cluster_id": "clusterA"}).text
            assert "This store holds 2 clusters; showing cluster clusterA" in page
            assert ops["clusterA"] in page and ops["clusterB"] not in page
            # the latest completed run of this cluster, not the other's later one
            assert "finding_of_clusterA" in page and "finding_of_clusterB" not in page
            assert "finding_of_clusterB" in c.get("/").text  # unfiltered: the latest run overall
    finally:
        engine.dispose()
