"""``--timeout`` is the connection wait, and a failure to connect names it (it used to wait at most
15 s and say so, whatever --timeout said). No ZooKeeper needed: an unused port never answers."""

from __future__ import annotations

import argparse
import socket
import time

import pytest

from kafka_controller.cli.connections import client_config
from kafka_controller.cli.main import build_parser
from tests.cli.clirun import run


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _args(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["describe", "--zookeeper", "127.0.0.1:2181", *argv])


@pytest.mark.parametrize(
    ("argv", "connect_ms"), [((), 30_000), (("--timeout", "45"), 45_000), (("--timeout", "0.5"), 500)]
)
def test_the_connection_wait_is_the_timeout(argv: tuple[str, ...], connect_ms: int) -> None:
    config = client_config(_args(*argv))
    assert config.connection_timeout_ms == connect_ms
    assert 6_000 <= config.session_timeout_ms <= 30_000
    assert config.create_paths is False


def test_a_connection_failure_names_the_timeout_it_waited(capsys: pytest.CaptureFixture[str]) -> None:
    port = _free_port()
    started = time.monotonic()
    r = run(capsys, "describe", "--zookeeper", f"127.0.0.1:{port}", "--timeout", "1.5")
    waited = time.monotonic() - started
    assert r.code == 1
    assert r.error_line == (
        f"kafka-controller describe: error: cannot connect to ZooKeeper at 127.0.0.1:{port} within 1.5 s "
        "(KazooTimeoutError)"
    )
    assert 1.4 <= waited < 10
