"""The ``kafka-controller`` command: one subcommand per module in ``kafka_controller.cli``.

Each subcommand module exposes ``register(subparsers)`` (adds its parser and sets ``func``) so that
``main`` stays a thin dispatcher and heavy imports happen only in the subcommand that runs.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import re
import signal
import sys
import threading
from typing import Any, NoReturn

from kafka_controller.cli.common import (
    UsageError,
    check_timeout,
    interrupt_note,
    left_undone,
    resolve_zookeeper,
)
from kafka_controller.domain.errors import BRIEF_LIMIT, KafkaControllerError, cut

#: Subcommand modules under ``kafka_controller.cli``, in ``--help`` order.
COMMAND_MODULES: tuple[str, ...] = (
    "demo_cmd",
    "cluster_cmd",
    "zookeeper_cmd",
    "broker_cmd",
    "close_session_cmd",
    "topics_cmd",
    "configs_cmd",
    "describe_cmd",
    "reassign_cmd",
    "elect_cmd",
    "acls_cmd",
    "shutdown_cmd",
    "audit_cmd",
    "reconcile_cmd",
)

_LONG_QUOTED = re.compile(rf"'[^'\n]{{{BRIEF_LIMIT},}}'")


class OneLineErrorParser(argparse.ArgumentParser):
    """Usage errors are one line naming what is wrong (and exit 2), like every other CLI error;
    ``--help`` still prints the full usage."""

    def error(self, message: str) -> NoReturn:
        # argparse quotes the offending value whole: a 5,000-digit argument must not make a
        # 5,000-character line. Quoted values are cut to BRIEF_LIMIT, the whole message to four times it.
        message = _LONG_QUOTED.sub(lambda m: m.group(0)[: BRIEF_LIMIT - 4] + "...'", message)
        message = cut(message, 4 * BRIEF_LIMIT)
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(
        prog="kafka-controller",
        description="Kafka 2.8's ZooKeeper-mode controller, re-implemented in Python.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(f"kafka_controller.cli.{name}").register(subparsers)
    return parser


#: What Ctrl-C leaves undone in commands that do not say it themselves (``common.left_undone``).
#: ``cluster up``, ``zookeeper`` and ``broker`` treat SIGINT as their normal, clean stop.
DEFAULT_INTERRUPT_NOTES: dict[tuple[str, ...], str] = {
    ("audit", "upgrade"): "the schema upgrade may have stopped between two migrations; run it again",
    ("reconcile", "export"): "the snapshot directory may be incomplete; export again with --overwrite",
    ("reconcile", "export-audit"): "the audit copy may be incomplete; export it again",
    ("reconcile", "run"): "the reconciliation outputs may be incomplete; run the job again",
    ("reconcile", "synth"): "the synthetic fleet may be incomplete; generate it again",
    ("demo",): "the demo's cluster was stopped and its temporary directory removed",
}
NOTHING_CHANGED = "nothing was changed"


def command_path(args: argparse.Namespace) -> tuple[str, ...]:
    """``("topics", "delete")``, ``("describe",)``: the command and its action, if it has one."""
    action = getattr(args, f"{args.command}_command", None)
    return (args.command,) if action is None else (args.command, action)


def _interrupted(args: argparse.Namespace) -> int:
    path = command_path(args)
    note = interrupt_note() or DEFAULT_INTERRUPT_NOTES.get(path, NOTHING_CHANGED)
    print(f"kafka-controller {' '.join(path)}: interrupted: {note}", file=sys.stderr, flush=True)
    return 130


class _FirstInterrupt:
    """SIGINT raises ``KeyboardInterrupt`` once; later ones are ignored while the command cleans up
    (closing its ZooKeeper session), so that a second Ctrl-C cannot end it in a traceback."""

    def __init__(self) -> None:
        self.previous: Any = None
        self.installed = False
        self.seen = False

    def __enter__(self) -> _FirstInterrupt:
        if threading.current_thread() is threading.main_thread():
            self.previous = signal.signal(signal.SIGINT, self._handle)
            self.installed = True
        return self

    def _handle(self, signum: int, frame: object) -> None:
        if not self.seen:
            self.seen = True
            raise KeyboardInterrupt

    def __exit__(self, *exc: object) -> None:
        if self.installed:
            signal.signal(signal.SIGINT, self.previous if self.previous is not None else signal.SIG_DFL)


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(argv)
    except BrokenPipeError:
        return _stdout_closed()


def _main(argv: list[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help(sys.stderr)
        return 2
    left_undone(None)
    with _FirstInterrupt() as guard:
        try:
            return _run(func, args, guard)
        except KeyboardInterrupt:
            return _interrupted(args)


#: The exit status of a Unix tool that writes to a closed pipe (killed by SIGPIPE: 128 + 13).
CLOSED_STDOUT_EXIT = 128 + signal.SIGPIPE


def _stdout_closed() -> int:
    """The reader of stdout went away (``describe | head -1``): end quietly, as ``cat`` would.

    What is still buffered for stdout cannot be written; stdout is pointed at /dev/null so that
    the interpreter's flush at exit does not report the same broken pipe again."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    return CLOSED_STDOUT_EXIT


def _run(func: Any, args: argparse.Namespace, guard: _FirstInterrupt) -> int:
    try:
        if "zookeeper" in vars(args):
            resolve_zookeeper(args)
            if "timeout" in vars(args):
                check_timeout(args)
        return int(func(args) or 0)
    except KafkaControllerError as e:
        if guard.seen:  # a library that caught the interrupt made it an error (a session closing)
            raise KeyboardInterrupt from e
        print(f"kafka-controller {args.command}: error: {e}", file=sys.stderr)
        return 2 if isinstance(e, UsageError) else 1


if __name__ == "__main__":
    sys.exit(main())
