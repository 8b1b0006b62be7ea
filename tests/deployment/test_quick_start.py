"""The README's quick-start under a real Airflow deployment, as a new operator follows it.

``kafka-controller cluster up`` (a separate process, auditing to PostgreSQL) runs the brokers; the
Airflow deployment of ``airflow_deployment`` (api-server, scheduler, dag-processor, triggerer, a
PostgreSQL metadata database) has the cluster connection with ``lifecycle: "local"``. The kill drill,
a rolling restart and a reassignment run under the scheduler; afterwards ``cluster status`` is true
(every broker one process, ``cluster up``'s child), the drill's log line and its audit row carry the
same numbers, and stopping ``cluster up`` stops every broker with a controlled shutdown, leaving no
process behind. Then the connection's lifecycle becomes the ``command`` backend over ssh (a private
sshd), and the rolling restart with ``demote="reorder"`` restarts every broker through it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest

from kafka_controller.cluster.process import broker_pids, parent_of
from tests.airflow.sshd import PrivateSshd
from tests.airflow.test_command_lifecycle_ssh import command_spec
from tests.deployment.airflow_deployment import AirflowDeployment, DeploymentError, private_database
from tests.integration.helpers import pump_stderr

pytestmark = [
    pytest.mark.airflow,
    pytest.mark.integration,
    pytest.mark.postgres,
    pytest.mark.slow,
    pytest.mark.timeout(600),
]

REPO = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "kafka_controller.cli.main"]
RUN_TIMEOUT_S = 240.0
BROKERS = (1, 2, 3)


@dataclass
class QuickStart:
    airflow: AirflowDeployment
    cluster_up: subprocess.Popen[str]
    lines: Any
    zookeeper: str
    data_dir: Path
    audit_url: str
    work: Path
    said: list[str] = field(default_factory=list)

    def kc(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*CLI, *args], capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL
        )

    def status(self) -> dict[int, dict[str, Any]]:
        done = self.kc("cluster", "status", "--data-dir", str(self.data_dir), "--json")
        assert done.returncode == 0, done.stderr
        return {b["id"]: b for b in orjson.loads(done.stdout)["brokers"]}

    def epochs(self) -> dict[int, int]:
        from kafka_controller.zk.kazoo_backend import KazooMetadataStore

        store = KazooMetadataStore(self.zookeeper)
        try:
            return {b.id: e for b, e in store.get_all_brokers_and_epochs().items()}
        finally:
            store.close()

    def run(self, dag_id: str, conf: dict[str, Any]) -> str:
        self.airflow.wait_dag(dag_id)
        run_id = self.airflow.trigger(dag_id, conf)
        try:
            state = self.airflow.wait_run(dag_id, run_id, RUN_TIMEOUT_S)
        except DeploymentError:
            state = "unfinished"
        if state != "success":
            tasks = self.airflow.task_states(dag_id, run_id)
            failed = [t for t, s in tasks.items() if s != "success"]
            logs = {t: self.airflow.task_log(dag_id, run_id, t)[-3000:] for t in failed}
            pytest.fail(f"{dag_id} run {run_id} ended {state}: {tasks}\n{logs}")
        return run_id

    def assert_one_owner(self) -> None:
        """``cluster status`` is true: each broker runs once, as ``cluster up``'s own child."""
        status = self.status()
        for b in BROKERS:
            running = broker_pids(b, self.zookeeper)
            assert running == [status[b]["pid"]], (b, running, status[b])
            assert not status[b].get("outside"), status[b]
            assert parent_of(running[0]) == self.cluster_up.pid, f"broker {b} is not cluster up's child"


@pytest.fixture(scope="module")
def quick() -> Iterator[QuickStart]:
    from kafka_controller.airflow.connections import AUDIT_CONN_TYPE, CLUSTER_CONN_TYPE

    work = Path(tempfile.mkdtemp(prefix="kc-quick-"))
    with contextlib.ExitStack() as stack:
        stack.callback(shutil.rmtree, work, ignore_errors=True)
        audit_url = stack.enter_context(private_database("kc_audit"))
        metadata_url = stack.enter_context(private_database("kc_airflow"))
        data_dir = work / "kc"
        proc = subprocess.Popen(
            [*CLI, "cluster", "up", "--brokers", "3", "--port", "0", "--data-dir", str(data_dir),
             "--audit-url", audit_url, "--json"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
        )  # fmt: skip

        def end_cluster_up() -> None:
            if proc.poll() is None:
                proc.kill()
                proc.wait(30)
            for b in BROKERS:  # whatever the test left, never a broker outliving the module
                for pid in broker_pids(b, zookeeper) if zookeeper else []:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)

        zookeeper = ""
        stack.callback(end_cluster_up)
        lines = pump_stderr(proc)
        said: list[str] = []
        while True:
            line = lines.get(timeout=180)
            assert line is not None, f"cluster up exited with {proc.wait()}: {said}"
            said.append(line)
            if line.startswith("kafka-controller cluster: ready"):
                break
        assert proc.stdout is not None
        zookeeper = orjson.loads(proc.stdout.readline())["zookeeper"]
        for topic, partitions, rf in (("orders", 6, 3), ("payments", 3, 2)):
            done = subprocess.run(
                [*CLI, "topics", "create", "--zookeeper", zookeeper, "--topic", topic,
                 "--partitions", str(partitions), "--replication-factor", str(rf)],
                capture_output=True, text=True, timeout=120,
            )  # fmt: skip
            assert done.returncode == 0, done.stderr

        airflow = AirflowDeployment(
            work / "airflow",
            metadata_url=metadata_url,
            dags=REPO / "dags",
            plugins=REPO / "plugins",
            plugin_config={"audit_url": audit_url},
        )
        stack.callback(airflow.stop)
        airflow.cli("db", "migrate", timeout_s=300)
        # the README's connection: the local lifecycle backend, nothing else
        airflow.add_connection(
            "kafka_controller_default", CLUSTER_CONN_TYPE, host=zookeeper, extra={"lifecycle": "local"}
        )
        airflow.add_connection("kafka_controller_audit_default", AUDIT_CONN_TYPE, extra={"url": audit_url})
        airflow.start()
        airflow.healthy()
        yield QuickStart(airflow, proc, lines, zookeeper, data_dir, audit_url, work, said)


def test_drill_restart_and_reassignment_leave_cluster_up_the_one_owner(quick: QuickStart) -> None:
    from kafka_controller.airflow.dag_ids import (
        CONTROLLER_FAILOVER_DRILL,
        PARTITION_REASSIGNMENT,
        ROLLING_CONTROLLED_SHUTDOWN,
    )
    from kafka_controller.audit.reports import build_report

    quick.assert_one_owner()

    # the kill drill: SIGKILL of the controller's broker, started again through cluster up
    run_id = quick.run(CONTROLLER_FAILOVER_DRILL, {"dry_run": False, "method": "kill", "timeout_s": 90})
    result = quick.airflow.xcom(CONTROLLER_FAILOVER_DRILL, run_id, "failover_drill")
    quick.assert_one_owner()
    rows = build_report(quick.audit_url)["sections"]["failover_recovery"]["rows"]
    row = next(r for r in rows if r["controller_epoch"] == result["elected"]["epoch"])
    log = quick.airflow.task_log(CONTROLLER_FAILOVER_DRILL, run_id, "failover_drill")
    said = (
        f"every partition led after {float(row['time_to_recover_ms']):.0f} ms, "
        f"{row['offline_partitions']} partition(s) offline at the failover"
    )
    assert said in log, (said, log[-2000:])
    assert result["offline_at_failover"] == row["offline_partitions"]
    assert result["recovery_ms"] == round(float(row["time_to_recover_ms"]), 1)

    # a rolling restart: every broker bounced, each back as cluster up's child
    before = quick.epochs()
    run_id = quick.run(ROLLING_CONTROLLED_SHUTDOWN, {"dry_run": False, "catch_up_timeout_s": 120})
    steps = quick.airflow.xcom(ROLLING_CONTROLLED_SHUTDOWN, run_id, "rolling_restart")["steps"]
    assert sorted(s["broker_id"] for s in steps) == list(BROKERS)
    after = quick.epochs()
    assert all(after[b] > before[b] for b in BROKERS), (before, after)
    quick.assert_one_owner()

    # a reassignment onto brokers 1 and 2
    quick.run(PARTITION_REASSIGNMENT, {"topics": ["payments"], "broker_list": [1, 2], "dry_run": False})
    quick.assert_one_owner()
    table = quick.kc("cluster", "status", "--data-dir", str(quick.data_dir))
    assert table.returncode == 0 and "stopped" not in table.stdout and "outside" not in table.stdout, table
    assert not quick.airflow.dead()


def test_rolling_restart_over_ssh_with_demote_reorder(quick: QuickStart) -> None:
    """The connection's lifecycle becomes ``command`` templates through ssh to a private sshd; the
    scheduler's rolling restart with ``demote="reorder"`` restarts every broker through them."""
    from kafka_controller.airflow.connections import CLUSTER_CONN_TYPE
    from kafka_controller.airflow.dag_ids import ROLLING_CONTROLLED_SHUTDOWN as DAG

    sshd = PrivateSshd(quick.work / "sshd").start()
    try:
        spec = command_spec(sshd, quick.zookeeper, quick.work / "ssh-state", list(BROKERS))
        quick.airflow.cli("connections", "delete", "kafka_controller_default")
        quick.airflow.add_connection(
            "kafka_controller_default", CLUSTER_CONN_TYPE, host=quick.zookeeper, extra={"lifecycle": spec}
        )
        logins = sshd.logins()
        before = quick.epochs()
        run_id = quick.run(DAG, {"dry_run": False, "demote": "reorder", "catch_up_timeout_s": 120})
        steps = quick.airflow.xcom(DAG, run_id, "rolling_restart")["steps"]
        assert sorted(s["broker_id"] for s in steps) == list(BROKERS)
        after = quick.epochs()
        assert all(after[b] > before[b] for b in BROKERS), (before, after)
        assert sshd.logins() - logins >= 2 * len(BROKERS)  # a stop and a start per broker, over ssh
        # the far side's local handling restarted them through cluster up: still its children
        quick.assert_one_owner()
    finally:
        sshd.close()
    assert not quick.airflow.dead()


def test_cluster_up_stops_every_broker_with_a_controlled_shutdown(quick: QuickStart) -> None:
    pids = {b: broker_pids(b, quick.zookeeper) for b in BROKERS}
    assert all(len(p) == 1 for p in pids.values()), pids
    quick.cluster_up.send_signal(signal.SIGINT)
    assert quick.cluster_up.wait(timeout=180) == 0
    for b in BROKERS:
        assert broker_pids(b, quick.zookeeper) == [], f"broker {b} outlived cluster up"
        log = (quick.data_dir / "logs" / f"broker-{b}.log").read_text(errors="replace")
        last = [line for line in log.splitlines() if line.strip()][-1]
        # SIGTERM, not SIGKILL: each ran its controlled shutdown (the last broker standing has no
        # one to hand its leaderships to, so its own may end "controlled shutdown failed", as in Kafka)
        assert f"broker {b} stopped (controlled" in last, log[-1500:]
