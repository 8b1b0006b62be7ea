"""Lifecycle backends on real processes: a stand-in broker for ``local``, scripts for ``command``."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafka_controller.airflow.lifecycle import (
    CommandLifecycle,
    LifecycleError,
    LocalLifecycle,
    lifecycle_backend,
)
from kafka_controller.cluster.process import is_broker_command
from kafka_controller.domain.errors import InvalidArgumentError

FAKE_BROKER = """
import signal, sys
print("started", sys.argv[1:], flush=True)
def term(*_):
    print("sigterm", flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, term)
while True:
    signal.pause()
"""
CONNECT = "127.0.0.1:1/lifecycle-test"


def wait_for(predicate, what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


@pytest.fixture
def fake_broker(tmp_path: Path) -> Iterator[tuple[list[str], Path]]:
    """A process whose command line is a broker's (``.../kafka-controller broker --broker-id 7 ...``)."""
    script = tmp_path / "bin" / "kafka-controller"
    script.parent.mkdir()
    script.write_text(FAKE_BROKER)
    argv = [sys.executable, str(script), "broker", "--broker-id", "7", "--zookeeper", CONNECT]
    log = tmp_path / "broker-7.log"
    with open(log, "ab") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    yield argv, log
    backend = LocalLifecycle(CONNECT, tmp_path / "state")
    for pid in backend.pids(7):
        os.kill(pid, 9)
    proc.kill()
    proc.wait()


def test_broker_commands_are_matched_on_id_and_connect_string() -> None:
    argv = [
        "/usr/bin/python3",
        "-m",
        "kafka_controller.cli.main",
        "broker",
        "--broker-id",
        "3",
        "--zookeeper",
        "zk:1/c",
    ]
    assert is_broker_command(argv, 3, "zk:1/c")
    assert not is_broker_command(argv, 4, "zk:1/c")
    assert not is_broker_command(argv, 3, "zk:1/other")
    assert not is_broker_command(
        ["python", "-m", "kafka_controller.cli.main", "describe", "--zookeeper", "zk:1/c"], 3, "zk:1/c"
    )


def test_local_stop_start_kill_keep_the_command_line_and_the_log(
    fake_broker: tuple[list[str], Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    argv, log = fake_broker
    backend = LocalLifecycle(CONNECT, tmp_path / "state")
    wait_for(lambda: backend.pids(7), "the stand-in broker to be found")
    wait_for(lambda: "started" in log.read_text(), "the stand-in broker to install its SIGTERM handler")
    assert LocalLifecycle("127.0.0.1:1/elsewhere", tmp_path / "state").pids(7) == []

    backend.stop(7, timeout_s=10)
    assert backend.pids(7) == []
    wait_for(lambda: "sigterm" in log.read_text(), "the SIGTERM to reach the broker")
    state = next((tmp_path / "state").rglob("broker-7.json"))
    assert stat.S_IMODE(state.stat().st_mode) == 0o600  # the command line may hold an audit password

    monkeypatch.setenv("AIRFLOW_CONN_SECRET_THING", "do-not-pass-on")
    backend.start(7, timeout_s=10)
    wait_for(lambda: backend.pids(7), "the relaunched broker")
    (pid,) = backend.pids(7)
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        assert f.read().split(b"\0")[:-1] == [a.encode() for a in argv]
    with open(f"/proc/{pid}/environ", "rb") as f:
        assert b"do-not-pass-on" not in f.read()
    wait_for(lambda: log.read_text().count("started") == 2, "the relaunched broker to log to the same file")
    with pytest.raises(LifecycleError, match="already running"):
        backend.start(7, timeout_s=5)

    backend.kill(7, timeout_s=10)
    assert backend.pids(7) == []
    assert log.read_text().count("sigterm") == 1  # SIGKILL: no controlled shutdown


def test_local_start_without_a_saved_command_line_says_why(tmp_path: Path) -> None:
    with pytest.raises(LifecycleError, match="not stopped through the local lifecycle backend"):
        LocalLifecycle(CONNECT, tmp_path / "state").start(99, timeout_s=1)


def _recorder(tmp_path: Path, exit_code: int = 0) -> str:
    script = tmp_path / "rec.py"
    script.write_text(
        "import sys\n"
        f"open({str(tmp_path / 'calls')!r}, 'a').write(' '.join(sys.argv[1:]) + '\\n')\n"
        f"print('systemctl: unit failed', file=sys.stderr)\nsys.exit({exit_code})\n"
    )
    return f"{sys.executable} {script}"


def test_command_templates_run_without_a_shell_with_broker_and_host(tmp_path: Path) -> None:
    rec = _recorder(tmp_path)
    backend = CommandLifecycle(
        stop=f"{rec} stop {{broker_id}} {{host}}",
        start=f"{rec} start {{broker_id}} {{host}}",
        hosts={"2": "kafka2"},
    )
    backend.stop(2, timeout_s=30)
    backend.start(2, timeout_s=30)
    backend.kill(2, timeout_s=30)  # no kill template: stop is used
    assert (tmp_path / "calls").read_text().splitlines() == [
        "stop 2 kafka2",
        "start 2 kafka2",
        "stop 2 kafka2",
    ]
    with pytest.raises(LifecycleError, match="no host is configured for broker 5"):
        backend.stop(5, timeout_s=30)


def test_command_failure_reports_exit_code_and_last_line(tmp_path: Path) -> None:
    rec = _recorder(tmp_path, exit_code=3)
    with pytest.raises(LifecycleError, match=r"stop of broker 1: .* exited 3: systemctl: unit failed"):
        CommandLifecycle(stop=f"{rec} {{broker_id}}", start=f"{rec} {{broker_id}}").stop(1, timeout_s=30)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (None, "has no 'lifecycle'"),
        ("ssh", "unknown lifecycle type 'ssh'"),
        ({"type": "command", "stop": "x {broker_id}"}, "needs a 'start' template"),
        ({"type": "command", "stop": "x {broker}", "start": "y"}, r"unknown placeholder \{broker\}"),
        ({"type": "command", "stop": "x {host}", "start": "y"}, "no 'hosts' map"),
        ({"type": "local", "statedir": "/x"}, "unknown option 'statedir'"),
        (["local"], "must be a name or an object"),
    ],
)
def test_bad_lifecycle_specs_are_refused(spec: object, message: str) -> None:
    with pytest.raises(InvalidArgumentError, match=message):
        lifecycle_backend(spec, CONNECT)


def test_lifecycle_spec_builds_the_named_backend(tmp_path: Path) -> None:
    assert isinstance(lifecycle_backend("local", CONNECT), LocalLifecycle)
    local = lifecycle_backend({"type": "local", "state_dir": str(tmp_path)}, CONNECT)
    assert isinstance(local, LocalLifecycle) and local.state_dir == tmp_path
    command = lifecycle_backend(
        {"type": "command", "stop": "a {broker_id}", "start": "b {broker_id}"}, CONNECT
    )
    assert isinstance(command, CommandLifecycle) and command.command("start", 4) == ["b", "4"]


@pytest.mark.integration
def test_closing_a_local_cluster_stops_the_brokers_the_local_backend_relaunched(
    zk_server: Any, tmp_path: Path
) -> None:
    from kafka_controller.cluster.local import LocalCluster
    from kafka_controller.cluster.process import broker_pids

    cluster = LocalCluster(
        1, zookeeper=zk_server.connect_string, chroot="/relaunched", data_dir=tmp_path / "c"
    )
    lifecycle = LocalLifecycle(cluster.connect_string, tmp_path / "lifecycle")
    try:
        cluster.start(timeout=120)
        lifecycle.stop(1, 30)
        lifecycle.start(1, 30)  # detached: not a child of the cluster
        cluster.waits.wait_until(
            lambda: any(b.id == 1 for b in cluster.store.get_all_brokers_and_epochs()), 60, "broker 1 back"
        )
        relaunched = broker_pids(1, cluster.connect_string)
        assert relaunched and relaunched[0] != cluster.processes[1].pid
    finally:
        cluster.close(graceful=False)
    assert broker_pids(1, cluster.connect_string) == []
