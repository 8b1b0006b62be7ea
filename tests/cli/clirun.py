"""Run ``kafka-controller`` in-process and read back what it printed and wrote."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson
import pytest
from kazoo.client import KazooClient

from kafka_controller.cli.main import main

PREFIX = "kafka-controller"


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return orjson.loads(self.out)

    @property
    def error_line(self) -> str:
        """The single line of stderr (asserting there is exactly one)."""
        lines = [line for line in self.err.splitlines() if line.strip()]
        assert len(lines) == 1, f"expected one line on stderr, got {lines!r}"
        return lines[0]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> Result:
    capsys.readouterr()
    try:
        code = main(list(argv))
    except SystemExit as e:  # argparse usage errors and --help
        code = int(e.code or 0)
    captured = capsys.readouterr()
    return Result(code, captured.out, captured.err)


def snapshot(client: KazooClient, root: str) -> dict[str, tuple[bytes, int]]:
    """Every znode under ``root``: relative path -> (data, data version)."""
    out: dict[str, tuple[bytes, int]] = {}
    stack = [root]
    while stack:
        path = stack.pop()
        data, stat = client.get(path)
        out[path[len(root) :] or "/"] = (data, stat.version)
        stack += [f"{path}/{c}" for c in client.get_children(path)]
    return out
