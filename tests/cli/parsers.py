"""The ``kafka-controller`` parsers, walked: every (sub)command path and its argparse parser."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

from kafka_controller.cli.main import build_parser


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def walk(
    parser: argparse.ArgumentParser | None = None, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every runnable command: (path, parser) for parsers without further subcommands."""
    parser = parser or build_parser()
    children = _subparsers(parser)
    if not children and path:
        yield path, parser
    for name, child in children.items():
        yield from walk(child, (*path, name))


def options(parser: argparse.ArgumentParser) -> set[str]:
    return {s for a in parser._actions for s in a.option_strings}


def zookeeper_commands() -> dict[tuple[str, ...], argparse.ArgumentParser]:
    """Every command that takes ``--zookeeper``."""
    return {path: p for path, p in walk() if "--zookeeper" in options(p)}
