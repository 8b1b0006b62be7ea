"""``kafka-controller demo`` (the Airflow scenario, the default) as a user runs it: a subprocess with
its own private Airflow, the drill and rolling-restart DAGs run for real on an embedded cluster, a
JSON summary whose facts come from the runs' XComs, ZooKeeper and the audit store, and nothing left
behind. This session's ``AIRFLOW_*`` settings are in the child's environment on purpose: the demo
must not use them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from kafka_controller.cluster.process import process_alive
from tests.airflow.support import REPO
from tests.child_watch import ChildWatch

pytestmark = [pytest.mark.airflow, pytest.mark.zk, pytest.mark.integration, pytest.mark.slow]

DEMO_TIMEOUT_S = 420


def _run_demo(tmp: Path, *args: str) -> tuple[int, bytes, bytes, set[int]]:
    """Run the demo to its end (SIGTERM, its own clean-up, past the deadline); its exit code,
    stdout, stderr and every child process seen meanwhile."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "kafka_controller.cli.main", "demo", "--json", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "TMPDIR": str(tmp)},
    )
    try:
        with ChildWatch(proc.pid) as watch:
            try:
                out, err = proc.communicate(timeout=DEMO_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.terminate()
                proc.communicate(timeout=60)
                raise
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, out, err, watch.seen


def _ops(doc: dict[str, Any], dag_id: str) -> dict[str, dict[str, Any]]:
    return {o["kind"]: o for o in doc["audit"]["operations"] if o["airflow_dag_id"] == dag_id}


@pytest.mark.timeout(DEMO_TIMEOUT_S + 60)
def test_the_demo_runs_the_drill_and_the_rolling_restart_for_real(tmp_path: Path) -> None:
    code, out, err, children = _run_demo(tmp_path)
    assert code == 0, err.decode()[-3000:]
    doc = orjson.loads(out)
    assert doc["ok"] is True and doc["scenario"] == "airflow"
    # restarts the run asked for are no news: kafka-python's transport errors and the
    # supervisor's note of a clean exit stay at DEBUG
    for noise in (b"socket disconnected", b"ECONNREFUSED", b"[kafka.", b"not at our request"):
        assert noise not in err, err.decode()[-3000:]
    assert doc["setup"]["airflow_home"] != os.environ["AIRFLOW_HOME"]  # a private Airflow

    runs = {d["dag_id"]: d for d in doc["dags"]}
    assert set(runs) == {"controller_failover_drill", "rolling_controlled_shutdown"}
    for run in runs.values():
        assert run["state"] == "success" and run["conf"]["dry_run"] is False
        assert run["tasks"] and set(run["tasks"].values()) == {"success"}

    drill = doc["drill"]
    assert drill["time_to_recover_ms"] > 0 and drill["offline_at_failover"] == 0
    assert drill["measured_by"] == "failover_record"  # the brokers audit: the log and the report agree
    assert drill["elected"]["epoch"] == drill["resigned"]["epoch"] + 1

    rolling = doc["rolling_restart"]
    assert sorted(rolling["restarted"]) == [1, 2, 3]  # each broker exactly once...
    assert rolling["restarted"][-1] == rolling["controller_before"]  # ...the controller last
    # ZooKeeper agrees: every broker registered anew, in that order (a registration's czxid)
    assert rolling["reregistered_in_order"] == rolling["restarted"]
    assert rolling["max_offline_seen"] == 0
    # A Kafka client (kafka-python over Kafka's protocol) read every partition as ZooKeeper holds it
    client = doc["kafka_client"]
    assert client["client"].startswith("kafka-python ") and client["mismatches"] == []
    assert client["partitions"] == {"orders": 6, "payments": 4}
    assert sum(client["leaders"].values()) == 10

    audit = doc["audit"]
    assert audit["unclean_elections"] == 0
    # the brokers' own audit: the first controller, the drill's and the controller's restart
    assert audit["controller_events"].get("elected", 0) >= 3
    drill_ops = _ops(doc, "controller_failover_drill")
    rolling_ops = _ops(doc, "rolling_controlled_shutdown")
    assert drill_ops["controller_failover_drill"]["operation_id"] == drill["operation_id"]
    assert rolling_ops["rolling_restart"]["operation_id"] == rolling["operation_id"]
    for dag_id, op in (
        ("controller_failover_drill", drill_ops["controller_failover_drill"]),
        ("rolling_controlled_shutdown", rolling_ops["rolling_restart"]),
    ):
        assert op["status"] == "succeeded" and op["dry_run"] is False
        assert op["airflow_run_id"] == runs[dag_id]["run_id"]
    for ops in (drill_ops, rolling_ops):  # the plugin's listener recorded each run
        assert ops["airflow_dag_run"]["status"] == "succeeded"
    # the controlled shutdowns and preferred elections carried the operation id: linked transitions
    assert rolling_ops["rolling_restart"]["partition_transitions"] > 0
    assert rolling_ops["rolling_restart"]["replica_transitions"] > 0

    assert len(children) >= 4  # ZooKeeper and the brokers, then all gone with the temp dir
    assert not [pid for pid in children if process_alive(pid)]
    assert not list(tmp_path.glob("kc-demo-*"))


@pytest.mark.timeout(DEMO_TIMEOUT_S + 60)
def test_a_failed_dag_run_ends_the_demo_in_one_line(tmp_path: Path) -> None:
    dags = tmp_path / "dags"
    dags.mkdir()
    drill = (REPO / "dags" / "controller_failover_drill.py").read_text()
    marker = 'task_id="failover_drill",'
    assert marker in drill
    (dags / "controller_failover_drill.py").write_text(
        drill.replace(marker, marker + ' kafka_controller_conn_id="no_such_cluster",')
    )
    (dags / "rolling_controlled_shutdown.py").write_text(
        (REPO / "dags" / "rolling_controlled_shutdown.py").read_text()
    )
    code, out, err, children = _run_demo(tmp_path, "--dags-folder", str(dags))
    assert code == 1
    last = err.decode().strip().splitlines()[-1]
    assert last.startswith("kafka-controller demo: error: DAG controller_failover_drill run failed: ")
    assert "task failover_drill failed" in last and "no_such_cluster" in last
    assert out == b""  # --json: Airflow's task log went to stderr
    assert not [pid for pid in children if process_alive(pid)]
    kept = list(tmp_path.glob("kc-demo-*"))  # the logs stay for a post-mortem
    assert len(kept) == 1 and (kept[0] / "airflow" / "logs").is_dir()


@pytest.mark.timeout(DEMO_TIMEOUT_S + 60)
def test_ctrl_c_during_the_rolling_restart_stops_every_broker_even_relaunched_ones(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "kafka_controller.cli.main", "demo"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, "TMPDIR": str(tmp_path)},
        text=True,
    )
    relaunched = False
    try:
        with ChildWatch(proc.pid) as watch:
            assert proc.stdout is not None
            in_rolling = False
            for line in proc.stdout:
                in_rolling = in_rolling or line.startswith("== 4. DAG rolling_controlled_shutdown")
                if in_rolling and "registered (broker epoch" in line:  # the lifecycle relaunched one
                    relaunched = True
                    break
            else:
                raise AssertionError(f"the demo ended before restarting a broker (exit {proc.wait()})")
            proc.send_signal(signal.SIGINT)
            proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    seen = watch.seen
    assert relaunched and proc.returncode == 130  # interrupted, not "the DAG failed"
    assert len(seen) >= 5  # ZooKeeper, the three brokers and at least one relaunched broker
    assert not [pid for pid in seen if process_alive(pid)]
    assert not list(tmp_path.glob("kc-demo-*"))
