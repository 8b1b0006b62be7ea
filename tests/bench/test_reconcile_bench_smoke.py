"""``bench/reconcile.py`` at a small size, run as a user runs it: the pandas baseline (which lives in
``bench/pandas_reconcile``, not in the product) and the Spark job find exactly the planted findings,
and the same ones. Timings are not asserted; they live in the benchmark's own output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# pytest-timeout (300 s by default) above the subprocess's own 600 s, so a slow machine gets the
# subprocess's clear error rather than a kill mid-run.
pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(660)]

BENCH = Path(__file__).resolve().parents[2] / "bench"


def test_reconcile_benchmark_finds_the_planted_findings_on_both_engines(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "TMPDIR": str(tmp_path),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "KAFKA_CONTROLLER_BENCH_RESULTS": str(tmp_path / "results"),
    }
    # 2,000 partitions: the size of the benchmark's own warm-up, so one fleet serves both runs.
    args = ["--sizes", "2000", "--cache-dir", str(tmp_path / "cache"), "--driver-memory", "1g"]
    proc = subprocess.run(
        [sys.executable, str(BENCH / "reconcile.py"), *args, "--shuffle-partitions", "2"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    [doc] = [json.loads(line) for line in (tmp_path / "results" / "reconcile.jsonl").read_text().splitlines()]
    [size] = doc["sizes"]
    assert size["partitions"] == 2000 and size["findings_equal"]
    assert size["pandas"]["findings"] == size["spark"]["findings"] == size["planted_findings"]
