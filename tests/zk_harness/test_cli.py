"""``kafka-controller zookeeper`` as a user runs it: a subprocess, signals, exit codes, stderr."""

from __future__ import annotations

import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafka_controller.cluster.process import process_alive
from kafka_controller.testing.zk_harness import wait_for
from kafka_controller.zk.embedded_os import four_letter_word

READY = re.compile(
    r"^kafka-controller zookeeper: ready on 127\.0\.0\.1:(?P<port>\d+) "
    r"\(pid (?P<pid>\d+), data dir (?P<dir>.+)\)$"
)
ERROR_PREFIX = "kafka-controller zookeeper: error: "


class Cli:
    """The command in a subprocess, its stderr read line by line on a thread (to wait with a deadline)."""

    def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kafka_controller.cli.main", "zookeeper", *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def wait_ready(self, timeout: float = 60.0) -> re.Match[str]:
        return self.wait_ready_line(READY, timeout)

    def wait_ready_line(self, ready: re.Pattern[str], timeout: float = 60.0) -> re.Match[str]:
        seen: list[str] = []
        while True:
            try:
                line = self.lines.get(timeout=timeout)
            except queue.Empty:
                raise AssertionError(f"no ready line within {timeout}s; stderr so far: {seen}") from None
            if line is None:
                raise AssertionError(f"exited with {self.proc.wait()} before ready: {seen}")
            seen.append(line)
            if m := ready.match(line):
                return m

    def rest_of_stderr(self) -> list[str]:
        out = []
        while (line := self.lines.get(timeout=30)) is not None:
            out.append(line)
        return out


@pytest.fixture
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture
def cli_procs() -> Iterator[list[Cli]]:
    procs: list[Cli] = []
    yield procs
    for cli in procs:
        if cli.proc.poll() is None:
            cli.proc.kill()
            cli.proc.wait()


@pytest.mark.zk
def test_runs_in_foreground_until_sigterm(free_port: int, cli_procs: list[Cli]) -> None:
    cli = Cli("--port", str(free_port))
    cli_procs.append(cli)
    ready = cli.wait_ready()
    assert int(ready["port"]) == free_port
    data_dir, java_pid = Path(ready["dir"]), int(ready["pid"])
    assert data_dir.is_dir() and process_alive(java_pid)
    assert four_letter_word("127.0.0.1", free_port, "ruok") == "imok"

    cli.proc.send_signal(signal.SIGTERM)
    assert cli.proc.wait(timeout=30) == 0
    assert not any(line.startswith(ERROR_PREFIX) for line in cli.rest_of_stderr())
    assert not process_alive(java_pid)
    assert not data_dir.exists()  # the default data dir is temporary


@pytest.mark.zk
def test_given_data_dir_is_kept_and_sigint_stops_cleanly(tmp_path: Path, cli_procs: list[Cli]) -> None:
    cli = Cli("--port", "0", "--data-dir", str(tmp_path / "zk"))
    cli_procs.append(cli)
    ready = cli.wait_ready()
    assert Path(ready["dir"]) == tmp_path / "zk"
    assert four_letter_word("127.0.0.1", int(ready["port"]), "srvr").count("Mode:") == 1

    cli.proc.send_signal(signal.SIGINT)
    assert cli.proc.wait(timeout=30) == 0
    assert not process_alive(int(ready["pid"]))
    assert any((tmp_path / "zk" / "version-2").iterdir())


@pytest.mark.zk
def test_server_dies_with_a_killed_cli(free_port: int, cli_procs: list[Cli]) -> None:
    cli = Cli("--port", str(free_port))
    cli_procs.append(cli)
    java_pid = int(cli.wait_ready()["pid"])
    cli.proc.send_signal(signal.SIGKILL)
    cli.proc.wait(timeout=10)
    wait_for(lambda: not process_alive(java_pid), timeout=10, message="ZooKeeper outlived the killed CLI")


def _env(**changes: str | None) -> dict[str, str]:
    env = dict(os.environ)
    for key, value in changes.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("java-arg", "Java 17 is needed"),
        ("no-java-on-path", "Java 17 is needed"),
        ("empty-jars-dir", "no ZooKeeper jars"),
        ("empty-zookeeper-home", "ZOOKEEPER_HOME="),
        ("bad-port", "port must be an integer in [0, 65535], got 70000"),
    ],
)
def test_set_up_errors_are_one_line_with_exit_code_2(tmp_path: Path, case: str, expected: str) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    args, env = {
        "java-arg": (["--java", str(tmp_path / "no-java")], None),
        "no-java-on-path": ([], _env(PATH=str(empty), JAVA_HOME=None)),
        "empty-jars-dir": (["--jars-dir", str(empty)], None),
        "empty-zookeeper-home": ([], _env(ZOOKEEPER_HOME=str(empty))),
        "bad-port": (["--port", "70000"], None),
    }[case]
    cli = Cli(*args, env=env)
    assert cli.proc.wait(timeout=60) == 2
    lines = cli.rest_of_stderr()
    assert len(lines) == 1, lines
    assert lines[0].startswith(ERROR_PREFIX) and expected in lines[0]
    if case in ("empty-jars-dir", "empty-zookeeper-home"):
        assert str(empty) in lines[0]
    assert os.listdir(empty) == []


def test_help_documents_the_contract_options() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "kafka_controller.cli.main", "zookeeper", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert "--port" in out and "--data-dir" in out
