"""``cluster up --listener-port BASE`` and ``cluster start-broker`` of a broker someone else runs.

Broker i listens on BASE+i; a taken port is refused before anything starts, in one line naming the
port and the broker. A broker relaunched outside ``cluster up`` (as Airflow's ``local`` lifecycle
backend does, detached) makes ``start-broker`` say it is already running at once, instead of
waiting out its timeout for a registration that never goes.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from kafka_controller.zk.kazoo_backend import KazooMetadataStore
from tests.broker.helpers import wait_until
from tests.integration.helpers import pump_stderr
from tests.integration.test_cluster_control import _free_run

pytestmark = [pytest.mark.integration, pytest.mark.zk]

CLI = [sys.executable, "-m", "kafka_controller.cli.main"]


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], env=env, capture_output=True, text=True, timeout=180)


def test_a_taken_listener_port_is_refused_before_anything_starts(tmp_path: Path) -> None:
    env = {**os.environ, "KAFKA_CONTROLLER_RUNTIME_DIR": str(tmp_path / "run")}
    base = _free_run(2)  # broker 1's port stays free; broker 2's is taken here
    with socket.socket() as taken:
        port = base + 1
        taken.bind(("127.0.0.1", port))
        taken.listen(1)
        done = _cli(env, "cluster", "up", "--port", "0", "--brokers", "2", "--listener-port", str(base),
                    "--data-dir", str(tmp_path / "c"))  # fmt: skip
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert f"--listener-port {port - 1}: port {port} (broker 2) cannot be used" in lines[0]
    assert not (tmp_path / "c" / "zookeeper").exists()  # nothing started


def test_listener_ports_and_a_broker_running_elsewhere(tmp_path: Path) -> None:
    env = {**os.environ, "KAFKA_CONTROLLER_RUNTIME_DIR": str(tmp_path / "run")}
    base = _free_run(2)
    data_dir = tmp_path / "c"
    proc = subprocess.Popen(
        [*CLI, "cluster", "up", "--port", "0", "--brokers", "2", "--data-dir", str(data_dir),
         "--listener-port", str(base), "--json"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    lines = pump_stderr(proc)
    outsider: subprocess.Popen[bytes] | None = None
    try:
        while True:
            line = lines.get(timeout=120)
            assert line is not None, f"cluster up exited with {proc.wait()} before it was ready"
            if line.startswith("kafka-controller cluster: ready"):
                break
        assert proc.stdout is not None
        info = orjson.loads(proc.stdout.readline())
        assert [b["listener"] for b in info["brokers"]] == [f"127.0.0.1:{base}", f"127.0.0.1:{base + 1}"]

        # Broker 2 stopped, then relaunched detached with its own command line, as Airflow would.
        command = Path(f"/proc/{info['brokers'][1]['pid']}/cmdline").read_bytes().split(b"\0")[:-1]
        stopped = _cli(env, "cluster", "stop-broker", "2")
        assert stopped.returncode == 0, stopped.stderr
        outsider = subprocess.Popen(
            command,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=(tmp_path / "outsider.log").open("wb"),
            start_new_session=True,
        )
        store = KazooMetadataStore(info["zookeeper"])
        try:
            wait_until(lambda: 2 in store.get_sorted_broker_list(), "the relaunched broker 2 to register", 90)
        except AssertionError:
            raise AssertionError((tmp_path / "outsider.log").read_text()[-3000:]) from None
        finally:
            store.close()

        started = time.monotonic()
        again = _cli(env, "cluster", "start-broker", "2", "--timeout", "120")
        took = time.monotonic() - started
        assert again.returncode == 1, again.stderr
        assert again.stderr.count("\n") == 1, again.stderr
        assert f"broker 2 is already running (pid {outsider.pid})" in again.stderr
        assert took < 60, f"start-broker took {took:.0f}s: it waited instead of saying so"

        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=120) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        if outsider is not None and outsider.poll() is None:
            outsider.kill()
            outsider.wait(10)
