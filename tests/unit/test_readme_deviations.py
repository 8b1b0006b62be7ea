"""README's "Deviations from Kafka 2.8" table names, in each row, the test that pins that deviation:
every ``path::name`` it cites must be a test function in that file, and every row must cite one."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CITED = re.compile(r"`(tests/[\w/]+\.py)::(\w+)`")


def _table_rows() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("\n## Deviations from Kafka 2.8\n", 1)[1].split("\n## ", 1)[0]
    return [line for line in section.splitlines() if re.match(r"\| \d+ \|", line)]


def test_every_deviation_row_cites_at_least_one_test() -> None:
    rows = _table_rows()
    assert len(rows) >= 10
    assert [r for r in rows if not CITED.search(r)] == []


def test_every_cited_test_exists() -> None:
    missing = []
    for row in _table_rows():
        for path, name in CITED.findall(row):
            file = ROOT / path
            tree = ast.parse(file.read_text()) if file.exists() else None
            names = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)} if tree else set()
            if name not in names:
                missing.append(f"{path}::{name}")
    assert missing == []
