"""``cluster up --metrics-port`` and ``cluster stop-broker|start-broker|restart-broker|status`` against
a running ``cluster up``, as an operator uses them from a second terminal."""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import orjson
import pytest

from kafka_controller.cluster.process import process_alive
from kafka_controller.zk.kazoo_backend import KazooMetadataStore
from tests.integration.helpers import pump_stderr

pytestmark = [pytest.mark.integration, pytest.mark.zk]

CLI = [sys.executable, "-m", "kafka_controller.cli.main"]


def _free_run(length: int) -> int:
    """A base port whose ``length`` successors are free now, below the kernel's ephemeral range:
    the kernel hands no client socket of another process one of them meanwhile (a port next to an
    ephemeral one was taken that way in a busy CI run)."""
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    for base in random.Random().sample(range(10_000, low - length), 50):
        try:
            for port in range(base, base + length):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port))
        except OSError:
            continue
        return base
    raise AssertionError("no run of free ports")


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], env=env, capture_output=True, text=True, timeout=180)


def _metrics(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as r:
        return str(r.read().decode())


def _broker_epoch(zookeeper: str, broker_id: int) -> int:
    store = KazooMetadataStore(zookeeper)
    try:
        return next(e for b, e in store.get_all_brokers_and_epochs().items() if b.id == broker_id)
    finally:
        store.close()


def test_control_a_running_cluster_up(tmp_path: Path) -> None:
    env = {**os.environ, "KAFKA_CONTROLLER_RUNTIME_DIR": str(tmp_path / "run")}
    base = _free_run(2)
    data_dir = tmp_path / "c"
    # no cluster yet: one line, exit 1
    missing = _cli(env, "cluster", "restart-broker", "1")
    assert missing.returncode == 1 and "no `cluster up` is running" in missing.stderr
    assert "Traceback" not in missing.stderr

    proc = subprocess.Popen(
        [*CLI, "cluster", "up", "--port", "0", "--brokers", "2", "--data-dir", str(data_dir),
         "--metrics-port", str(base), "--config", "sim.produce.rate.per.sec=10", "--json"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    lines = pump_stderr(proc)
    seen: list[str] = []
    pids: list[int] = []
    try:
        while True:
            line = lines.get(timeout=120)
            assert line is not None, f"cluster up exited with {proc.wait()} before it was ready: {seen}"
            seen.append(line)
            if line.startswith("kafka-controller cluster: ready"):
                break
        assert "kafka-controller cluster: audit: not audited (no --audit-url)" in seen
        assert proc.stdout is not None
        info = orjson.loads(proc.stdout.readline())
        assert [b["metrics"] for b in info["brokers"]] == [
            f"http://127.0.0.1:{base}/metrics",
            f"http://127.0.0.1:{base + 1}/metrics",
        ]
        assert "kafka_server_replicamanager_leadercount" in _metrics(info["brokers"][1]["metrics"])
        zookeeper = info["zookeeper"]
        pids = [b["pid"] for b in info["brokers"]]

        epoch_before = _broker_epoch(zookeeper, 2)
        bounced = _cli(env, "cluster", "restart-broker", "2")
        assert bounced.returncode == 0, bounced.stderr
        assert bounced.stdout.startswith("broker 2 restarted on ")
        assert _broker_epoch(zookeeper, 2) > epoch_before
        assert not process_alive(pids[1])
        # the same metrics port after the restart
        assert "kafka_server_replicamanager_leadercount" in _metrics(info["brokers"][1]["metrics"])

        unknown = _cli(env, "cluster", "stop-broker", "9", "--data-dir", str(data_dir))
        assert unknown.returncode == 2
        assert (
            unknown.stderr.strip()
            == "kafka-controller cluster: error: broker 9 is not part of this cluster [1, 2]"
        )

        stopped = _cli(env, "cluster", "stop-broker", "1", "--data-dir", str(data_dir))
        assert stopped.returncode == 0, stopped.stderr
        assert stopped.stdout.strip() == "broker 1 stopped (controlled shutdown, exit code 0)"
        assert not process_alive(pids[0])
        status = _cli(env, "cluster", "status", "--json")
        assert status.returncode == 0, status.stderr
        state = {b["id"]: b["pid"] for b in orjson.loads(status.stdout)["brokers"]}
        assert state[1] is None and state[2] is not None
        again = _cli(env, "cluster", "stop-broker", "1")
        assert again.returncode == 1 and again.stderr.strip().endswith("broker 1 is not running")

        started = _cli(env, "cluster", "start-broker", "1")
        assert started.returncode == 0, started.stderr
        store = KazooMetadataStore(zookeeper)
        try:
            assert store.get_sorted_broker_list() == [1, 2]
        finally:
            store.close()

        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=120) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    rest: list[str] = []
    while (line := lines.get(timeout=10)) is not None:
        rest.append(line)
    assert "kafka-controller cluster: stopped" in rest
    assert not any("exited with code" in line for line in rest + seen)  # stops on request are not news
    assert not (data_dir / "cluster-up.json").exists()
    assert not list((tmp_path / "run").glob("*.sock"))
    gone = _cli(env, "cluster", "status")
    assert gone.returncode == 1 and "no `cluster up` is running" in gone.stderr
