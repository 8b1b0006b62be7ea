"""Run a benchmark as a user does (a subprocess printing one JSON object) with its results in a
temporary directory; shared by the smoke tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parents[2] / "bench"


def run_bench(tmp_path: Path, script: str, *args: str) -> dict[str, Any]:
    """Exit 0, one JSON object on stdout's last line, and exactly that line in its results file."""
    env = {**os.environ, "TMPDIR": str(tmp_path), "KAFKA_CONTROLLER_BENCH_RESULTS": str(tmp_path / "results")}
    proc = subprocess.run(
        [sys.executable, str(BENCH / script), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    stored = (tmp_path / "results" / f"{result['bench']}.jsonl").read_text().splitlines()
    assert [json.loads(line) for line in stored] == [result]
    return result
