"""``kafka-controller cluster up`` as a user runs it: it prints where everything is, serves until
SIGINT, then stops the brokers with a controlled shutdown and ZooKeeper, and exits 0."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from kafka_controller.cluster.process import process_alive
from kafka_controller.zk.kazoo_backend import KazooMetadataStore
from tests.integration.helpers import pump_stderr

pytestmark = [pytest.mark.integration, pytest.mark.zk]


def test_cluster_up_serves_until_sigint(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "kafka_controller.cli.main", "cluster", "up", "--port", "0", "--brokers", "2",
         "--data-dir", str(tmp_path / "c"), "--config", "sim.produce.rate.per.sec=10", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    lines = pump_stderr(proc)
    try:
        while True:
            line = lines.get(timeout=120)
            assert line is not None, f"cluster up exited with {proc.wait()} before it was ready"
            if line.startswith("kafka-controller cluster: ready"):
                break
        assert proc.stdout is not None
        info = orjson.loads(proc.stdout.readline())
        assert [b["id"] for b in info["brokers"]] == [1, 2]
        assert info["controller"] in (1, 2) and info["controller_epoch"] == 1
        pids = [b["pid"] for b in info["brokers"]]
        store = KazooMetadataStore(info["zookeeper"])
        try:
            assert store.get_sorted_broker_list() == [1, 2]
        finally:
            store.close()
        assert Path(info["brokers"][0]["log"]).is_file()
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=120) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert not [pid for pid in pids if process_alive(pid)]
    rest: list[str] = []
    while (line := lines.get(timeout=10)) is not None:
        rest.append(line)
    assert "kafka-controller cluster: stopped" in rest
    assert (tmp_path / "c" / "zookeeper").is_dir()  # --data-dir is kept
