"""The failover drill, the rolling restart and a reassignment under a real Airflow deployment
against a ``cluster up --security sasl_ssl`` cluster: every broker's only listener is SASL_SSL with
SCRAM-SHA-512 and Kafka's ACL authorizer, so each DAG's Kafka requests (elections, reassignments,
the controlled shutdowns) reach the brokers only with the connection's login, password and CA.
No Spark and no browser here: ``test_airflow_deployment`` covers those on a plaintext cluster. The
SASL password must appear in no task log, XCom or audit row."""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.deployment.airflow_deployment import AirflowDeployment, DeploymentError, private_database

pytestmark = [
    pytest.mark.airflow,
    pytest.mark.integration,
    pytest.mark.postgres,
    pytest.mark.slow,
    pytest.mark.timeout(600),
]

REPO = Path(__file__).resolve().parents[2]
RUN_TIMEOUT_S = 240.0


@dataclass
class SecuredSite:
    airflow: AirflowDeployment
    cluster: Any
    audit_url: str
    password: str
    runs: list[tuple[str, str]]

    def run(self, dag_id: str, conf: dict[str, Any]) -> str:
        self.airflow.wait_dag(dag_id)
        run_id = self.airflow.trigger(dag_id, conf)
        try:
            state = self.airflow.wait_run(dag_id, run_id, RUN_TIMEOUT_S)
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
        self.runs.append((dag_id, run_id))
        return run_id


@pytest.fixture(scope="module")
def site() -> Iterator[SecuredSite]:
    from kafka_controller.admin.topics import assign_replicas_to_brokers
    from kafka_controller.airflow.connections import AUDIT_CONN_TYPE, CLUSTER_CONN_TYPE
    from kafka_controller.cluster.local import LocalCluster

    work = Path(tempfile.mkdtemp(prefix="kc-deploy-sasl-"))
    with contextlib.ExitStack() as stack:
        stack.callback(shutil.rmtree, work, ignore_errors=True)
        audit_url = stack.enter_context(private_database("kc_audit_sasl"))
        metadata_url = stack.enter_context(private_database("kc_airflow_sasl"))
        cluster = LocalCluster(
            3, audit_url=audit_url, data_dir=work / "cluster", close_dead_sessions=False, security="sasl_ssl"
        )
        stack.callback(cluster.close, graceful=False)
        cluster.start(timeout=180)
        lifecycle_dir = work / "lifecycle"
        from kafka_controller.airflow.lifecycle import LocalLifecycle

        lifecycle = LocalLifecycle(cluster.connect_string, lifecycle_dir)
        stack.callback(lambda: [lifecycle.kill(b, 10) for b in cluster.broker_ids])
        brokers = list(cluster.broker_ids)
        cluster.create_topic("orders", assign_replicas_to_brokers(6, 3, brokers, start_index=0))
        cluster.create_topic("payments", assign_replicas_to_brokers(4, 2, brokers, start_index=1))
        for topic in ("orders", "payments"):
            cluster.wait_topic_healthy(topic)
        security = cluster.client_security()
        assert cluster.zk_login is not None
        zk_jaas = cluster.zk_login.client_jaas
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
            login=str(security.username),
            password=str(security.password),
            extra={
                "lifecycle": {"type": "local", "state_dir": str(lifecycle_dir)},
                "security_protocol": "SASL_SSL",
                "sasl_mechanism": "SCRAM-SHA-512",
                "ssl_cafile": str(security.cafile),
                # its ZooKeeper takes only the kafka SASL login, from the JAAS file cluster up prints
                "zk_jaas_config_file": str(zk_jaas),
            },
        )
        airflow.add_connection("kafka_controller_audit_default", AUDIT_CONN_TYPE, extra={"url": audit_url})
        airflow.start()
        airflow.healthy()
        yield SecuredSite(airflow, cluster, audit_url, str(security.password), [])


def test_kill_drill_on_a_sasl_ssl_cluster(site: SecuredSite) -> None:
    from kafka_controller.airflow.dag_ids import CONTROLLER_FAILOVER_DRILL as DAG

    before = site.cluster.controller()
    run_id = site.run(DAG, {"dry_run": False, "timeout_s": 90, "method": "kill"})
    result = site.airflow.xcom(DAG, run_id, "failover_drill")
    assert result["elected"]["epoch"] > before[1] and result["elected"]["broker_id"] != before[0]
    assert result["offline_after"] == 0
    assert before[0] in site.cluster.store.get_sorted_broker_list()  # started again, with its SASL login
    assert not site.airflow.dead()


def test_rolling_restart_on_a_sasl_ssl_cluster(site: SecuredSite) -> None:
    from kafka_controller.airflow.dag_ids import ROLLING_CONTROLLED_SHUTDOWN as DAG

    run_id = site.run(DAG, {"dry_run": False, "catch_up_timeout_s": 120})
    result = site.airflow.xcom(DAG, run_id, "rolling_restart")
    assert sorted(s["broker_id"] for s in result["steps"]) == sorted(site.cluster.broker_ids)
    assert result["max_offline_seen"] == 0
    assert not site.airflow.dead()


def test_reassignment_on_a_sasl_ssl_cluster(site: SecuredSite) -> None:
    from kafka_controller.airflow.dag_ids import PARTITION_REASSIGNMENT as DAG

    brokers = list(site.cluster.broker_ids)
    conf = {"topics": ["payments"], "broker_list": brokers[:2], "dry_run": False}
    site.run(DAG, conf)
    moved = [p for p in site.cluster.waits.describe(["payments"]).partitions]
    assert moved and all(set(p.replicas) <= set(brokers[:2]) for p in moved), moved
    assert not site.airflow.dead()


def test_the_sasl_password_is_in_no_task_log_xcom_or_audit_row(site: SecuredSite) -> None:
    from kafka_controller.airflow.audit_queries import list_operations
    from kafka_controller.audit.engine import create_audit_engine

    assert site.runs, "the DAG tests must run first"
    for dag_id, run_id in site.runs:
        for task in site.airflow.task_states(dag_id, run_id):
            assert site.password not in site.airflow.task_log(dag_id, run_id, task)
            try:
                xcom = site.airflow.xcom(dag_id, run_id, task)
            except httpx.HTTPStatusError as e:  # a task without a return value has no XCom
                if e.response.status_code != 404:
                    raise
                continue
            assert site.password not in json.dumps(xcom, default=str)
    engine = create_audit_engine(site.audit_url)
    try:
        rows = list_operations(engine, limit=1000, dry_runs=True)
    finally:
        engine.dispose()
    assert rows and site.password not in json.dumps(rows, default=str)
    logs = [p for p in site.airflow.logs.rglob("*") if p.is_file()]
    assert logs and all(site.password not in p.read_text(errors="replace") for p in logs)
    assert site.cluster.zk_login is not None  # nor the ZooKeeper login's, which the tasks read
    assert all(site.cluster.zk_login.password not in p.read_text(errors="replace") for p in logs)
