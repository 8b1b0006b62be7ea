"""The ``kafka-controller`` command: one subcommand per module in ``kafka_controller.cli``.

Each subcommand module exposes ``register(subparsers, summary)`` (adds its parser and sets ``func``)
so that ``main`` stays a thin dispatcher. A run imports the module of its own subcommand only: the
modules import what they use at their top, and importing all of them would cost
``kafka-controller --help`` several times its start-up.
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
from dataclasses import dataclass
from typing import Any, NoReturn

from kafka_controller.cli.common import (
    UsageError,
    check_timeout,
    interrupt_note,
    left_undone,
    resolve_zookeeper,
)
from kafka_controller.domain.errors import BRIEF_LIMIT, KafkaControllerError, cut


@dataclass(frozen=True)
class Command:
    """A subcommand: the word typed, its module under ``kafka_controller.cli``, and its line in
    ``kafka-controller --help`` (here, so that the help lists every command without importing one)."""

    name: str
    module: str
    summary: str


#: The subcommands, in ``--help`` order.
COMMANDS: tuple[Command, ...] = (
    Command("demo", "demo_cmd", "run the Airflow DAGs (or the scripted scenario) on an embedded cluster"),
    Command("cluster", "cluster_cmd", "run a whole local cluster (ZooKeeper + brokers)"),
    Command(
        "zookeeper", "zookeeper_cmd", "run a ZooKeeper server (or a --servers N ensemble) in the foreground"
    ),
    Command(
        "broker", "broker_cmd", "run one broker (controller candidate, request handling, simulated replicas)"
    ),
    Command(
        "close-session",
        "close_session_cmd",
        "close the ZooKeeper session of a broker whose process exited (ExecStopPost=)",
    ),
    Command("topics", "topics_cmd", "create, delete, list and describe topics"),
    Command("configs", "configs_cmd", "describe and alter topic and broker configs (over Kafka's protocol)"),
    Command("describe", "describe_cmd", "controller, epoch, brokers and every partition's state"),
    Command("reassign", "reassign_cmd", "generate, execute, verify, cancel or list partition reassignments"),
    Command("elect", "elect_cmd", "preferred or unclean leader election"),
    Command("acls", "acls_cmd", "add, remove or list ACLs (as kafka-acls.sh --bootstrap-server)"),
    Command("shutdown", "shutdown_cmd", "controlled shutdown of a running broker"),
    Command("audit", "audit_cmd", "audit store reports and schema upgrades"),
    Command("reconcile", "reconcile_cmd", "snapshots and the Spark reconciliation job"),
)
#: Subcommand modules under ``kafka_controller.cli``, in ``--help`` order.
COMMAND_MODULES: tuple[str, ...] = tuple(c.module for c in COMMANDS)
#: ``build_parser``'s default: every subcommand's full parser.
EVERY_COMMAND = "*"

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


def build_parser(only: str | None = EVERY_COMMAND) -> argparse.ArgumentParser:
    """The parser of every subcommand (``docs``, the tests), or of the subcommand ``only`` alone
    (None: of none). A subcommand left out gets a parser with its name and summary only, so that
    ``--help`` and a mistyped command read the same while only the module that runs is imported."""
    parser = OneLineErrorParser(
        prog="kafka-controller",
        description="Kafka 2.8's ZooKeeper-mode controller, re-implemented in Python.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in COMMANDS:
        if only in (EVERY_COMMAND, command.name):
            importlib.import_module(f"kafka_controller.cli.{command.module}").register(
                subparsers, command.summary
            )
        else:
            subparsers.add_parser(command.name, help=command.summary)
    return parser


def command_word(argv: list[str]) -> str | None:
    """The subcommand ``argv`` names: its first word that is not an option (the top-level parser
    takes no option but ``-h``), or None."""
    return next((word for word in argv if not word.startswith("-")), None)


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
    if argv is None:
        argv = sys.argv[1:]
    parser = build_parser(only=command_word(argv))
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
