"""The ``kafka-controller`` command: one subcommand per module in ``kafka_controller.cli``.

Each subcommand module exposes ``register(subparsers)`` (adds its parser and sets ``func``) so that
``main`` stays a thin dispatcher and heavy imports happen only in the subcommand that runs.
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys
from typing import NoReturn

from kafka_controller.cli.common import UsageError, check_timeout, resolve_zookeeper
from kafka_controller.domain.errors import BRIEF_LIMIT, KafkaControllerError, cut

#: Subcommand modules under ``kafka_controller.cli``, in ``--help`` order.
COMMAND_MODULES: tuple[str, ...] = (
    "demo_cmd",
    "cluster_cmd",
    "zookeeper_cmd",
    "broker_cmd",
    "topics_cmd",
    "describe_cmd",
    "reassign_cmd",
    "elect_cmd",
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


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        if "zookeeper" in vars(args):
            resolve_zookeeper(args)
            if "timeout" in vars(args):
                check_timeout(args)
        return int(func(args) or 0)
    except UsageError as e:
        print(f"kafka-controller {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KafkaControllerError as e:
        print(f"kafka-controller {args.command}: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
