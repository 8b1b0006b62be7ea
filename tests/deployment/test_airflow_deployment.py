"""The DAGs under a real Airflow deployment, looked at in a real browser.

api-server, scheduler, dag-processor and triggerer run as separate processes against a PostgreSQL
metadata database; the connections are added with ``airflow connections add``; an embedded cluster
(ZooKeeper + 3 broker processes) audits to a PostgreSQL audit store; a Spark standalone master and
worker run the reconciliation job. Each DAG is triggered through the REST API and must succeed with
every component still alive; the audit rows, the XComs and the task logs are checked; then headless
Chromium renders Airflow's UI and the plugin's pages and the test reads what a person would see.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.deployment.airflow_deployment import AirflowDeployment, DeploymentError, private_database
from tests.deployment.browser import Browser
from tests.deployment.spark_standalone import SparkStandalone

pytestmark = [
    pytest.mark.airflow,
    pytest.mark.integration,
    pytest.mark.postgres,
    pytest.mark.slow,
    pytest.mark.timeout(600),  # the first test also starts the whole deployment
]

REPO = Path(__file__).resolve().parents[2]
TOPICS: dict[str, tuple[int, int, int]] = {"orders": (6, 3, 0), "payments": (4, 2, 1)}
RUN_TIMEOUT_S = 240.0
#: Spark's start-up and a standalone executor on a loaded 2-core machine: minutes, not seconds.
SPARK_RUN_TIMEOUT_S = 420.0


@dataclass
class Site:
    airflow: AirflowDeployment
    cluster: Any
    audit_url: str
    spark: SparkStandalone
    work: Path
    runs: dict[str, str]

    def audit_engine(self) -> Any:
        from kafka_controller.audit.engine import create_audit_engine

        return create_audit_engine(self.audit_url)

    def operations(self, run_id: str) -> dict[str, dict[str, Any]]:
        """The run's operation rows by kind (the listener's rows as ``airflow_task:<task>``)."""
        from kafka_controller.airflow.audit_queries import list_operations

        engine = self.audit_engine()
        try:
            rows = [
                r for r in list_operations(engine, limit=1000, dry_runs=True) if r["airflow_run_id"] == run_id
            ]
        finally:
            engine.dispose()
        out: dict[str, dict[str, Any]] = {}
        for r in rows:
            key = r["kind"] if r["kind"] != "airflow_task" else f"airflow_task:{r['airflow_task_id']}"
            out[key] = r
        return out

    def run(self, dag_id: str, conf: dict[str, Any], timeout_s: float = RUN_TIMEOUT_S) -> str:
        self.airflow.wait_dag(dag_id)
        run_id = self.airflow.trigger(dag_id, conf)
        try:
            state = self.airflow.wait_run(dag_id, run_id, timeout_s)
        except DeploymentError:
            state = "unfinished"
        tasks = self.airflow.task_states(dag_id, run_id)
        if state != "success":
            logs = {
                t: self.airflow.task_log(dag_id, run_id, t)[-3000:]
                for t, s in tasks.items()
                if s != "success"
            }
            pytest.fail(f"{dag_id} run {run_id} ended {state}: {tasks}\n{logs}")
        if conf.get("dry_run") is not True:  # the pages are checked against the real runs
            self.runs[dag_id] = run_id
        return run_id


@pytest.fixture(scope="module")
def site() -> Iterator[Site]:
    from kafka_controller.admin.topics import assign_replicas_to_brokers
    from kafka_controller.airflow.connections import AUDIT_CONN_TYPE, CLUSTER_CONN_TYPE
    from kafka_controller.cluster.local import LocalCluster

    work = Path(tempfile.mkdtemp(prefix="kc-deploy-"))
    with contextlib.ExitStack() as stack:
        stack.callback(shutil.rmtree, work, ignore_errors=True)
        audit_url = stack.enter_context(private_database("kc_audit"))
        metadata_url = stack.enter_context(private_database("kc_airflow"))
        # Kafka's own detection (the session timeout), as on a host that does not supervise its
        # brokers: the kill drill's outage must be the one Kafka 2.8 would show. The supervised
        # path (the session closed at once) has its own tests (tests/integration/test_crash_detection.py).
        cluster = LocalCluster(3, audit_url=audit_url, data_dir=work / "cluster", close_dead_sessions=False)
        stack.callback(cluster.close, graceful=False)
        cluster.start()
        lifecycle_dir = work / "lifecycle"
        from kafka_controller.airflow.lifecycle import LocalLifecycle

        lifecycle = LocalLifecycle(cluster.connect_string, lifecycle_dir)
        # brokers a task relaunched are not the cluster's children: the backend ends them
        stack.callback(lambda: [lifecycle.kill(b, 10) for b in cluster.broker_ids])
        brokers = list(cluster.broker_ids)
        for topic, (partitions, rf, start) in TOPICS.items():
            cluster.create_topic(
                topic, assign_replicas_to_brokers(partitions, rf, brokers, start_index=start)
            )
        for topic in TOPICS:
            cluster.wait_topic_healthy(topic)

        spark = stack.enter_context(SparkStandalone(work / "spark"))
        airflow = AirflowDeployment(
            work / "airflow",
            metadata_url=metadata_url,
            dags=REPO / "dags",
            plugins=REPO / "plugins",
            plugin_config={"audit_url": audit_url},
        )
        stack.callback(airflow.stop)
        airflow.cli("db", "migrate", timeout_s=300)
        airflow.add_connection(
            "kafka_controller_default",
            CLUSTER_CONN_TYPE,
            host=cluster.zookeeper_connect,
            extra={"lifecycle": {"type": "local", "state_dir": str(lifecycle_dir)}},
        )
        airflow.add_connection("kafka_controller_audit_default", AUDIT_CONN_TYPE, extra={"url": audit_url})
        # the Apache Spark provider's connection layout, for the standalone master
        airflow.add_connection(
            "spark_default",
            "spark",
            host="spark://127.0.0.1",
            port=str(spark.port),
            extra={"deploy-mode": "client"},
        )
        airflow.start()
        airflow.healthy()
        yield Site(airflow, cluster, audit_url, spark, work, {})


def test_kill_drill_under_the_scheduler(site: Site) -> None:
    """kill -9 of the controller's broker: the outage lasts about the session timeout (6 s here)."""
    from kafka_controller.airflow.dag_ids import CONTROLLER_FAILOVER_DRILL as DAG

    before = site.cluster.controller()
    run_id = site.run(DAG, {"dry_run": False, "timeout_s": 90, "method": "kill"})
    result = site.airflow.xcom(DAG, run_id, "failover_drill")
    assert result["dry_run"] is False and result["method"] == "kill"
    assert result["resigned"] == {"broker_id": before[0], "epoch": before[1]}
    assert result["elected"]["epoch"] > before[1] and result["elected"]["broker_id"] != before[0]
    assert result["offline_after"] == 0 and result["recovery_ms"] >= 3000  # seconds, not milliseconds
    assert before[0] in site.cluster.store.get_sorted_broker_list()  # started again
    ops = site.operations(run_id)
    drill = ops["controller_failover_drill"]
    assert (drill["status"], drill["airflow_task_id"]) == ("succeeded", "failover_drill")
    assert ops["airflow_task:failover_drill"]["status"] == "succeeded"  # the task process's listener
    # the scheduler's listener: the DAG-run outcome, recorded without a connection lookup
    site.airflow.wait(lambda: "airflow_dag_run" in site.operations(run_id), 30, "the DAG-run row")
    assert site.operations(run_id)["airflow_dag_run"]["status"] == "succeeded"
    log = site.airflow.task_log(DAG, run_id, "failover_drill")
    assert "elected" in log and "every partition" in log, log[-2000:]
    # the audit report shows the outage the operator saw: from the kill, seconds long
    from kafka_controller.audit.reports import build_report

    rows = build_report(site.audit_url)["sections"]["failover_recovery"]["rows"]
    row = next(r for r in rows if r["controller_epoch"] == result["elected"]["epoch"])
    assert (row["previous_broker_id"], row["lost_via"]) == (before[0], "drill"), row
    assert row["lost_ms"] == result["lost_at_ms"] and float(row["time_to_recover_ms"]) >= 3000, row
    assert float(row["duration_ms"]) < float(row["time_to_recover_ms"])
    # one source: the task log, the XCom and the audit row carry the same numbers
    assert result["measured_by"] == "failover_record"
    assert result["offline_at_failover"] == row["offline_partitions"]
    assert result["recovery_ms"] == round(float(row["time_to_recover_ms"]), 1)
    said = (
        f"every partition led after {float(row['time_to_recover_ms']):.0f} ms, "
        f"{row['offline_partitions']} partition(s) offline at the failover"
    )
    assert said in log, log[-2000:]
    assert not site.airflow.dead()


def test_a_dry_run_leaves_the_real_history_alone(site: Site) -> None:
    """A dry-run drill plans a failover on an in-memory copy: its rows are marked, the report's
    totals leave them out, and the real controller is untouched."""
    from sqlalchemy import create_engine, text

    from kafka_controller.airflow.dag_ids import CONTROLLER_FAILOVER_DRILL as DAG
    from kafka_controller.audit.reports import build_report

    before = site.cluster.controller()
    real_before = build_report(site.audit_url)["summary"]
    run_id = site.run(DAG, {"dry_run": True})
    op = site.operations(run_id)["controller_failover_drill"]
    assert op["dry_run"] is True and op["status"] == "succeeded"
    assert site.cluster.controller() == before
    engine = create_engine(site.audit_url)
    try:
        with engine.connect() as conn:
            planned = conn.execute(
                text(
                    "SELECT dry_run, count(*) FROM (SELECT dry_run FROM partition_transitions "
                    "WHERE operation_id = :op UNION ALL SELECT dry_run FROM replica_transitions "
                    "WHERE operation_id = :op) t GROUP BY dry_run"
                ),
                {"op": op["operation_id"]},
            ).all()
    finally:
        engine.dispose()
    assert [(bool(d), n > 0) for d, n in planned] == [(True, True)]  # planned, and only planned
    after = build_report(site.audit_url)["summary"]
    assert after["operations"] == real_before["operations"]  # the dry run's row is not counted
    assert after["dry_run_rows"] > real_before["dry_run_rows"]
    assert not site.airflow.dead()


def test_rolling_restart_under_the_scheduler(site: Site) -> None:
    from kafka_controller.airflow.dag_ids import ROLLING_CONTROLLED_SHUTDOWN as DAG

    controller = site.cluster.controller()[0]
    run_id = site.run(DAG, {"dry_run": False, "catch_up_timeout_s": 120})
    result = site.airflow.xcom(DAG, run_id, "rolling_restart")
    order = [s["broker_id"] for s in result["steps"]]
    assert sorted(order) == sorted(site.cluster.broker_ids) and order[-1] == controller
    assert result["max_offline_seen"] == 0
    assert site.operations(run_id)["rolling_restart"]["status"] == "succeeded"
    log = site.airflow.task_log(DAG, run_id, "rolling_restart")
    for b in order:
        assert f"broker {b}" in log, log[-2000:]
    assert not site.airflow.dead()


def test_a_broker_killed_during_a_rolling_restart_fails_the_run_naming_it(site: Site) -> None:
    """SIGKILL of another broker while the scheduler's rolling restart has one broker down: the run
    fails within seconds naming the dead broker, not after the catch-up timeout."""
    from kafka_controller.airflow.dag_ids import ROLLING_CONTROLLED_SHUTDOWN as DAG
    from kafka_controller.airflow.lifecycle import LocalLifecycle

    lifecycle = LocalLifecycle(site.cluster.connect_string, site.work / "lifecycle")
    controller = site.cluster.controller()[0]
    first, victim = (b for b in site.cluster.broker_ids if b != controller)
    conf = {"dry_run": False, "brokers": [first, victim], "catch_up_timeout_s": 900}
    site.airflow.wait_dag(DAG)
    run_id = site.airflow.trigger(DAG, conf)
    registered = site.cluster.store.get_sorted_broker_list
    site.airflow.wait(lambda: first not in registered(), 180, f"broker {first} to stop", interval_s=0.1)
    lifecycle.kill(victim, 30)
    killed_at = time.monotonic()
    try:
        state = site.airflow.wait_run(DAG, run_id, 120)
        took = time.monotonic() - killed_at
        assert state == "failed" and took < 60, (state, took)
        log = site.airflow.task_log(DAG, run_id, "rolling_restart")
        assert f"broker {victim} left the cluster during the rolling restart, at broker {first}" in log, log[
            -3000:
        ]
        assert site.operations(run_id)["rolling_restart"]["status"] == "failed"
        # the task failed without its retries: a lost broker needs a person
        assert site.airflow.task_states(DAG, run_id)["rolling_restart"] == "failed"
    finally:
        for b in site.cluster.broker_ids:
            if b not in registered() and not lifecycle.is_running(b):
                lifecycle.start(b, 60)
        site.airflow.wait(
            lambda: (
                all(
                    not p.offline and not p.under_replicated for p in site.cluster.waits.describe().partitions
                )
                and len(registered()) == 3
            ),
            180,
            "the cluster to be whole again",
        )
    assert not site.airflow.dead()


def test_preferred_leader_rebalance_under_the_scheduler(site: Site) -> None:
    from kafka_controller.airflow.dag_ids import PREFERRED_LEADER_REBALANCE as DAG

    run_id = site.run(DAG, {"dry_run": False})
    result = site.airflow.xcom(DAG, run_id, "preferred_election")
    assert not result["failed"]
    view = site.cluster.waits.describe()
    assert all(p.leader == p.replicas[0] for p in view.partitions)
    assert site.operations(run_id)["preferred_leader_election"]["status"] == "succeeded"
    assert not site.airflow.dead()


def test_reconciliation_on_a_spark_standalone_cluster(site: Site) -> None:
    from kafka_controller.airflow.dag_ids import PARTITION_STATE_RECONCILIATION as DAG

    apps_before = site.spark.completed_apps()
    run_id = site.run(
        DAG,
        {"spark_conn_id": "spark_default", "output_dir": str(site.work / "reconcile")},
        SPARK_RUN_TIMEOUT_S,
    )
    result = site.airflow.xcom(DAG, run_id, "reconcile")
    assert result["exit_code"] == 0 and result["job"]["partitions_checked"] == sum(
        p for p, _, _ in TOPICS.values()
    )
    # the job ran on the standalone cluster's executors, not in a local[N] driver
    site.airflow.wait(lambda: len(site.spark.completed_apps()) > len(apps_before), 60, "the app to complete")
    row = site.operations(run_id)["reconciliation"]
    assert row["status"] == "succeeded" and row["parameters"]["master"] == site.spark.master_url
    assert not site.airflow.dead()


def test_what_a_person_sees(site: Site, tmp_path: Path) -> None:
    """Airflow's own UI and the plugin's pages, rendered by headless Chromium."""
    from kafka_controller.airflow.dag_ids import CONTROLLER_FAILOVER_DRILL

    browser = Browser(tmp_path)
    base = site.airflow.base_url
    home = browser.text(f"{base}/dags", wait_for="controller_failover_drill")
    assert "rolling_controlled_shutdown" in home
    index = browser.text(f"{base}/kafka-controller/", wait_for="Operations")
    for kind in ("controller_failover_drill", "rolling_restart", "preferred_leader_election"):
        assert kind in index, index[:3000]
    assert "failover" in index.lower() and "findings" in index.lower()
    drill_run = site.runs.get(CONTROLLER_FAILOVER_DRILL)
    assert drill_run is not None, "the drill test must run first"
    op = site.operations(drill_run)["controller_failover_drill"]
    assert "drill" in index.split("Time to recover per controller failover")[1], index[:3000]
    page = browser.text(f"{base}/kafka-controller/operations/{op['operation_id']}", wait_for="succeeded")
    assert "controller_failover_drill" in page and "elected" in page, page[:3000]
    assert "recovery_ms" in page and "Transitions" in page, page[:3000]
    shots = browser.screenshot(f"{base}/kafka-controller/", "plugin-index.png")
    assert shots.stat().st_size > 10_000
    assert not site.airflow.dead()


def test_every_component_survived(site: Site) -> None:
    health = site.airflow.healthy(timeout_s=60)
    assert health["scheduler"]["status"] == "healthy"
    assert not site.airflow.dead()
    errors = subprocess.run(
        ["grep", "-c", "DetachedInstanceError", str(site.airflow.logs / "scheduler.log")],
        capture_output=True,
        text=True,
    )
    assert errors.stdout.strip() in ("0", ""), site.airflow.log_tail("scheduler")
