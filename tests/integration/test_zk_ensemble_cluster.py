"""Brokers, the controller and the CLI on a 3-server ZooKeeper ensemble: every
client gets the connect string listing all servers, and the cluster keeps working through a
ZooKeeper leader's death and converges after the quorum is lost for ~10 s and regained."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from kafka_controller.cluster.local import LocalCluster
from kafka_controller.cluster.process import process_alive
from kafka_controller.zk.ensemble import ZooKeeperEnsemble
from tests.integration.helpers import TIMEOUT, pump_stderr, wait_all_led

pytestmark = [pytest.mark.integration, pytest.mark.zk, pytest.mark.timeout(600)]

#: How long the quorum stays lost: longer than the brokers' 6 s session timeout.
QUORUM_LOSS_S = 10.0
#: The stated bound on convergence after the quorum returns (the README's reliability table).
CONVERGE_S = 60.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    c = LocalCluster(3, zk_servers=3, data_dir=tmp_path_factory.mktemp("ensemble-cluster"))
    try:
        c.start(timeout=180)
        yield c
    finally:
        c.close(graceful=False)


def _ensemble(cluster: LocalCluster) -> ZooKeeperEnsemble:
    assert isinstance(cluster.zk, ZooKeeperEnsemble)
    return cluster.zk


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kafka_controller.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_brokers_and_the_cli_use_the_multi_server_connect_string(cluster: LocalCluster) -> None:
    assert cluster.connect_string.count(",") == 2
    for proc in cluster.processes.values():
        assert cluster.connect_string in proc.command
    done = _cli("topics", "create", "--zookeeper", cluster.connect_string, "--topic", "cli",
                "--partitions", "3", "--replication-factor", "2")  # fmt: skip
    assert done.returncode == 0, done.stderr
    cluster.wait_topic_healthy("cli", timeout=TIMEOUT)
    described = _cli("describe", "--zookeeper", cluster.connect_string)
    assert described.returncode == 0 and "cli" in described.stdout, described.stderr


def test_zookeeper_leader_killed_topic_create_and_controller_failover_complete(cluster: LocalCluster) -> None:
    ensemble = _ensemble(cluster)
    dead = ensemble.kill_leader()
    ensemble.wait_quorum(timeout=TIMEOUT)
    ids = cluster.broker_ids
    cluster.waits.wait_until(lambda: _try_create(cluster, "after-zk-leader", ids), TIMEOUT, "topic created")
    cluster.wait_topic_healthy("after-zk-leader", timeout=TIMEOUT)
    controller, epoch = cluster.waits.wait_for_controller(timeout=TIMEOUT)
    assert set(cluster.registered()) == set(ids), "no broker lost its registration"
    cluster.kill_broker(controller)

    def moved() -> bool:
        new, new_epoch = cluster.controller()
        return new not in (None, controller) and (new_epoch or 0) > epoch

    cluster.waits.wait_until(moved, TIMEOUT, "a new controller with a higher epoch")
    ensemble.member(dead).start(timeout=TIMEOUT)
    cluster.start_broker(controller, timeout=TIMEOUT)
    wait_all_led(cluster)
    cluster.wait_topic_healthy("after-zk-leader", timeout=TIMEOUT)


def test_quorum_lost_for_ten_seconds_then_the_cluster_converges(cluster: LocalCluster) -> None:
    ensemble = _ensemble(cluster)
    stopped = ensemble.lose_quorum()
    threading.Event().wait(QUORUM_LOSS_S)  # the length of the outage, not a wait for anything
    regained = time.monotonic()
    ensemble.start_members(stopped, timeout=TIMEOUT)
    ensemble.wait_quorum(timeout=TIMEOUT)
    cluster.waits.wait_until(
        lambda: set(cluster.registered()) == set(cluster.broker_ids), CONVERGE_S, "every broker registered"
    )
    cluster.waits.wait_for_controller(timeout=CONVERGE_S)
    wait_all_led(cluster)
    ids = cluster.broker_ids
    cluster.waits.wait_until(lambda: _try_create(cluster, "after-quorum", ids), CONVERGE_S, "topic created")
    cluster.wait_topic_healthy("after-quorum", timeout=CONVERGE_S)
    assert time.monotonic() - regained < 2 * CONVERGE_S


def _try_create(cluster: LocalCluster, topic: str, ids: tuple[int, ...]) -> bool:
    try:
        cluster.create_topic(topic, {p: [ids[p % 3], ids[(p + 1) % 3]] for p in range(3)})
    except Exception as e:
        return "exists" in str(e).lower()
    return True


def test_cluster_up_with_a_zookeeper_ensemble(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "kafka_controller.cli.main", "cluster", "up", "--port", "0", "--brokers", "2",
         "--zookeeper-servers", "3", "--data-dir", str(tmp_path / "c"), "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    lines = pump_stderr(proc)
    try:
        while True:
            line = lines.get(timeout=180)
            assert line is not None, f"cluster up exited with {proc.wait()} before it was ready"
            if line.startswith("kafka-controller cluster: ready"):
                break
        assert proc.stdout is not None
        info = orjson.loads(proc.stdout.readline())
        assert info["zookeeper"].count(",") == 2
        zk_dirs = sorted(p.name for p in (tmp_path / "c" / "zookeeper").iterdir())
        assert zk_dirs == ["zk-1", "zk-2", "zk-3"]
        described = _cli("describe", "--zookeeper", info["zookeeper"])
        assert described.returncode == 0, described.stderr
        pids = [b["pid"] for b in info["brokers"]]
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=120) == 0
        assert not [pid for pid in pids if process_alive(pid)]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
