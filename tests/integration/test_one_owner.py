"""One owner of the broker processes: Airflow's ``local`` lifecycle backend and a running
``cluster up`` agree on every broker, whoever stopped or started it.

The backend restarts a broker through ``cluster up``'s control socket, so the broker comes back as
``cluster up``'s child: ``cluster status`` tells the truth, and stopping ``cluster up`` stops it with
a controlled shutdown. A broker started by hand outside ``cluster up`` is listed as running (not
"stopped"), ``start-broker`` of it says so at once, and ``cluster up`` stops it too when it stops.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from kafka_controller.airflow.lifecycle import LocalLifecycle
from kafka_controller.cluster.process import argv_of, broker_pids, parent_of, process_alive
from tests.broker.helpers import wait_until
from tests.integration.helpers import pump_stderr

pytestmark = [pytest.mark.integration, pytest.mark.zk, pytest.mark.timeout(420)]

CLI = [sys.executable, "-m", "kafka_controller.cli.main"]


def _cli(env: dict[str, str], *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], env=env, capture_output=True, text=True, timeout=timeout)


def _status(env: dict[str, str]) -> dict[int, dict[str, object]]:
    done = _cli(env, "cluster", "status", "--json")
    assert done.returncode == 0, done.stderr
    return {b["id"]: b for b in orjson.loads(done.stdout)["brokers"]}


def test_the_local_backend_restarts_brokers_through_cluster_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KAFKA_CONTROLLER_RUNTIME_DIR", str(tmp_path / "run"))  # the backend's too
    env = dict(os.environ)
    data_dir = tmp_path / "c"
    proc = subprocess.Popen(
        [*CLI, "cluster", "up", "--port", "0", "--brokers", "3", "--data-dir", str(data_dir), "--json"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    lines = pump_stderr(proc)
    seen: list[str] = []
    zookeeper = ""
    outsider: subprocess.Popen[bytes] | None = None
    try:
        while True:
            line = lines.get(timeout=180)
            assert line is not None, f"cluster up exited with {proc.wait()} before it was ready: {seen}"
            seen.append(line)
            if line.startswith("kafka-controller cluster: ready"):
                break
        assert proc.stdout is not None
        zookeeper = orjson.loads(proc.stdout.readline())["zookeeper"]
        backend = LocalLifecycle(zookeeper, tmp_path / "lifecycle")

        # a rolling restart's bounce of each broker, as the DAG's tasks do it
        for b in (1, 2, 3):
            before = broker_pids(b, zookeeper)
            backend.stop(b, 60)
            assert not backend.is_running(b)
            assert _status(env)[b]["pid"] is None
            backend.start(b, 60)
            after = broker_pids(b, zookeeper)
            assert len(after) == 1 and after != before
            assert parent_of(after[0]) == proc.pid, "restarted as cluster up's own child"
            assert _status(env)[b]["pid"] == after[0]

        # the kill drill: SIGKILL, then a start through cluster up
        backend.kill(2, 30)
        assert not backend.is_running(2)
        wait_until(lambda: _status(env)[2]["pid"] is None, "cluster up saw the kill", timeout=30)
        backend.start(2, 90)
        (pid,) = broker_pids(2, zookeeper)
        assert parent_of(pid) == proc.pid

        # a broker started by hand, outside cluster up: listed as running, start-broker says so
        argv = argv_of(broker_pids(3, zookeeper)[0])
        stopped = _cli(env, "cluster", "stop-broker", "3")
        assert stopped.returncode == 0, stopped.stderr
        outsider = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
        wait_until(lambda: broker_pids(3, zookeeper) == [outsider.pid], "the outsider runs", timeout=30)
        row = _status(env)[3]
        assert row["pid"] == outsider.pid and row["outside"] is True
        table = _cli(env, "cluster", "status")
        assert "running (started outside)" in table.stdout
        started = time.monotonic()
        again = _cli(env, "cluster", "start-broker", "3")
        assert again.returncode == 1 and "already running" in again.stderr
        assert time.monotonic() - started < 30  # at once, not after a registration timeout
        # the backend, too, does not start a second broker 3
        with pytest.raises(Exception, match="already running"):
            backend.start(3, 10)

        owned = {b: broker_pids(b, zookeeper)[0] for b in (1, 2, 3)}
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=180) == 0
        assert outsider.wait(timeout=30) == 0, "the outsider ran its controlled shutdown (exit 0)"
        for b, pid in owned.items():
            assert not process_alive(pid), f"broker {b} (pid {pid}) outlived cluster up"
            assert broker_pids(b, zookeeper) == []
        for b in (1, 2):
            log = (data_dir / "logs" / f"broker-{b}.log").read_text(errors="replace")
            assert f"Controlled shutdown of broker {b} succeeded" in log
    finally:
        if outsider is not None and outsider.poll() is None:
            outsider.kill()
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
