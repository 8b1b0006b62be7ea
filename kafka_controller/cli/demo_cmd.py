"""``kafka-controller demo``: the README's main job (placeholder until the scenario lands)."""

from __future__ import annotations

import argparse
from typing import Any


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("demo", help="run the scripted demo scenario")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    print("demo: not implemented yet")
    return 0
