"""``kafka-controller demo --scenario scripted`` end to end, as a user runs it: a subprocess, exit 0,
a JSON summary whose facts were read back from ZooKeeper and the audit store, and no process left
behind. The default scenario (Airflow) is tested in ``tests/airflow/test_demo.py``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from kafka_controller.cluster.process import process_alive
from tests.child_watch import ChildWatch

pytestmark = [pytest.mark.integration, pytest.mark.zk, pytest.mark.slow]


def test_demo_runs_the_whole_scenario_and_cleans_up(tmp_path: Path) -> None:
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "kafka_controller.cli.main", "demo", "--scenario", "scripted", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        with ChildWatch(proc.pid) as watch:
            out, err = proc.communicate(timeout=270)
    finally:
        if proc.poll() is None:
            proc.kill()
    seen_children = watch.seen
    assert proc.returncode == 0, err.decode()[-3000:]
    doc = orjson.loads(out)
    steps = {s["name"]: s for s in doc["steps"]}
    assert list(steps) == [
        "cluster",
        "create_topics",
        "hard_kill",
        "restart",
        "controlled_shutdown",
        "preferred_election",
        "reassignment",
        "failover",
        "delete_topic",
    ]
    assert steps["cluster"]["controller_epoch"] == 1
    assert steps["hard_kill"]["leaders_before"] > 0 and len(steps["hard_kill"]["offline_partitions"]) == 1
    assert (
        steps["restart"]["summary"]["offline"] == 0 and steps["restart"]["summary"]["under_replicated"] == 0
    )
    assert steps["controlled_shutdown"]["led_before"] > 0
    assert steps["controlled_shutdown"]["led_at_exit_movable"] == 0
    assert steps["preferred_election"]["not_preferred_after"] == 0
    assert steps["preferred_election"]["elected"] == steps["preferred_election"]["not_preferred_before"]
    r = steps["reassignment"]
    assert r["leader_epoch_after"] - r["leader_epoch_before"] == 3
    f = steps["failover"]
    assert f["new_epoch"] == f["old_epoch"] + 1 and f["new_controller"] != f["old_controller"]
    assert "clicks" not in steps["delete_topic"]["remaining_topics"]
    audit = doc["audit"]
    assert audit["unclean_elections"] == 0
    assert audit["controller_events"].get("elected", 0) >= 2
    kinds = {(t["machine"], t["to_state"]) for t in audit["transitions"]}
    assert {("partition", "OnlinePartition"), ("replica", "ReplicaDeletionSuccessful")} <= kinds
    # Every process the demo started (ZooKeeper, the brokers) is gone, and so is its temp dir.
    assert len(seen_children) >= 4
    assert not [pid for pid in seen_children if process_alive(pid)]
    assert not list(tmp_path.glob("kc-demo-*"))


def test_ctrl_c_stops_every_process(tmp_path: Path) -> None:
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "kafka_controller.cli.main", "demo", "--scenario", "scripted"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
        text=True,
    )
    try:
        with ChildWatch(proc.pid) as watch:
            assert proc.stdout is not None
            for line in proc.stdout:  # the cluster is up once the scenario's first step prints
                if line.startswith("== 2."):
                    break
            else:
                raise AssertionError(f"the demo ended before its second step (exit {proc.wait()})")
            proc.send_signal(signal.SIGINT)
            proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    seen_children = watch.seen
    assert proc.returncode == 130
    assert len(seen_children) >= 4
    assert not [pid for pid in seen_children if process_alive(pid)]
    assert not list(tmp_path.glob("kc-demo-*"))
