"""The control socket of ``cluster up`` without a cluster: discovery, the one-line protocol, refusals."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from kafka_controller.cluster.control import (
    POINTER_FILE,
    RUNTIME_DIR_ENV,
    ControlError,
    ControlServer,
    ask,
    find_socket,
    parse_request,
    runtime_dir,
)


@pytest.fixture
def run_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "run"
    monkeypatch.setenv(RUNTIME_DIR_ENV, str(path))
    return path


def _answer(server: ControlServer, reply: dict[str, object]) -> threading.Thread:
    def serve() -> None:
        request = server.next_request(30)
        assert request is not None
        request.reply = {**reply, "echo": [request.action, request.broker, request.timeout]}
        request.done.set()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return thread


def test_a_request_reaches_the_owner_and_the_reply_comes_back(run_dir: Path, tmp_path: Path) -> None:
    server = ControlServer(tmp_path, {"zookeeper": "127.0.0.1:1"})
    try:
        assert (run_dir.stat().st_mode & 0o777) == 0o700
        assert find_socket(None) == server.path == find_socket(tmp_path)
        thread = _answer(server, {"ok": True, "message": "done"})
        reply = ask(server.path, "restart-broker", 2, 5.0)
        thread.join(5)
        assert reply == {"ok": True, "message": "done", "echo": ["restart-broker", 2, 5.0]}
    finally:
        server.close()
    assert not server.path.exists() and not (tmp_path / POINTER_FILE).exists()
    with pytest.raises(ControlError, match="no `cluster up` is running"):
        find_socket(None)


def test_requests_left_when_stopping_are_answered(run_dir: Path, tmp_path: Path) -> None:
    server = ControlServer(tmp_path, {})
    replies: list[dict[str, object]] = []
    client = threading.Thread(target=lambda: replies.append(ask(server.path, "stop-broker", 1, 5.0)))
    client.start()
    while server.requests.empty():
        client.join(0.01)
    server.close()
    client.join(10)
    assert replies == [{"ok": False, "error": "cluster up is stopping"}]


def test_several_running_need_data_dir(run_dir: Path, tmp_path: Path) -> None:
    server = ControlServer(tmp_path, {})
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (run_dir / f"cluster-{other.pid}.sock").touch()
        (run_dir / "cluster-999999999.sock").touch()  # a dead one is ignored
        with pytest.raises(ControlError, match=r"2 `cluster up` processes are running .*: pass --data-dir"):
            find_socket(None)
        assert find_socket(tmp_path) == server.path
    finally:
        other.kill()
        other.wait()
        server.close()


def test_a_data_dir_without_cluster_up(run_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(ControlError, match=r"no `cluster up` is running with --data-dir .*does not exist"):
        find_socket(tmp_path)
    (tmp_path / POINTER_FILE).write_text('{"pid": 999999999, "socket": "/nowhere"}')
    with pytest.raises(ControlError, match=r"\(pid 999999999\) is no longer running"):
        find_socket(tmp_path)
    (tmp_path / POINTER_FILE).write_text("[1]")
    with pytest.raises(ControlError, match="is not a `cluster up` control file"):
        find_socket(tmp_path)


def test_a_runtime_dir_open_to_others_is_refused(run_dir: Path) -> None:
    run_dir.mkdir(mode=0o777)
    os.chmod(run_dir, 0o777)
    with pytest.raises(ControlError, match="closed to others"):
        runtime_dir()


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"{", "not JSON"),
        (b'{"action": "rm -rf"}', "must name an action"),
        (b'{"action": "stop-broker", "broker": "1"}', "broker must be an integer"),
        (b'{"action": "stop-broker", "broker": true}', "broker must be an integer"),
        (b'{"action": "stop-broker", "broker": 1, "timeout": -1}', "timeout must be seconds"),
    ],
)
def test_bad_requests_are_refused(raw: bytes, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_request(raw)


def test_cluster_up_without_a_control_socket_starts_nothing(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from kafka_controller.cli.main import main

    run_dir.mkdir()
    os.chmod(run_dir, 0o777)  # another user could answer for us: refused before anything starts
    data_dir = tmp_path / "c"
    code = main(["cluster", "up", "--port", "0", "--brokers", "1", "--data-dir", str(data_dir)])
    err = capsys.readouterr().err.strip()
    assert code == 1 and "\n" not in err
    assert err.startswith("kafka-controller cluster: error: control directory ") and "closed to others" in err
    assert not (data_dir / "zookeeper").exists() and not (data_dir / "logs").exists()
