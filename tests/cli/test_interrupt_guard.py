"""``cli.main``'s Ctrl-C guard: once SIGINT was seen, a failure is the interruption, even when a
library caught the ``KeyboardInterrupt`` and failed otherwise (kazoo used to make it a closed
connection)."""

from __future__ import annotations

import argparse
import contextlib
import signal

import pytest

from kafka_controller.cli import main as cli_main
from kafka_controller.domain.errors import StoreUnavailableError


def _run_failing_command(monkeypatch: pytest.MonkeyPatch, *, ctrl_c: bool) -> int:
    def command(args: argparse.Namespace) -> int:
        if ctrl_c:
            # the guard's handler raises KeyboardInterrupt, which a library swallows
            with contextlib.suppress(KeyboardInterrupt):
                signal.raise_signal(signal.SIGINT)
        raise StoreUnavailableError("ZooKeeper unavailable (ConnectionClosedError)")

    parser = cli_main.OneLineErrorParser(prog="kafka-controller")
    parser.add_subparsers(dest="command").add_parser("describe").set_defaults(func=command)
    monkeypatch.setattr(cli_main, "build_parser", lambda only: parser)
    return cli_main.main(["describe"])


def test_a_failure_after_a_swallowed_ctrl_c_ends_as_interrupted(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    before = signal.getsignal(signal.SIGINT)
    assert _run_failing_command(monkeypatch, ctrl_c=True) == 130
    assert capsys.readouterr().err == "kafka-controller describe: interrupted: nothing was changed\n"
    assert signal.getsignal(signal.SIGINT) is before  # the guard put back what it found


def test_the_same_failure_without_ctrl_c_is_an_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run_failing_command(monkeypatch, ctrl_c=False) == 1
    assert capsys.readouterr().err == (
        "kafka-controller describe: error: ZooKeeper unavailable (ConnectionClosedError)\n"
    )
