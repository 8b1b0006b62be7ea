"""Ctrl-C in ``reconcile run`` as Spark starts: one line saying what is left undone, exit 130, none of
the py4j tracebacks an interrupted Spark call logs, and no JVM left behind (a terminal's SIGINT
reaches the whole process group, as here)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kafka_controller.cluster.process import children_of, process_alive

pytestmark = [pytest.mark.spark, pytest.mark.slow]

CLI = [sys.executable, "-m", "kafka_controller.cli.main"]


def _java_children(pid: int) -> list[int]:
    found = []
    for child in children_of(pid):
        try:
            if Path(os.readlink(f"/proc/{child}/exe")).name == "java":
                found.append(child)
        except OSError:
            continue
    return found


def test_ctrl_c_as_spark_starts_is_one_line_and_leaves_no_jvm(tmp_path: Path) -> None:
    synth = subprocess.run(
        [*CLI, "reconcile", "synth", "--partitions", "3000", "--out", str(tmp_path / "s")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert synth.returncode == 0, synth.stderr
    proc = subprocess.Popen(
        [*CLI, "reconcile", "run", "--snapshot", str(tmp_path / "s" / "snapshot"),
         "--audit-parquet", str(tmp_path / "s" / "audit"), "--out", str(tmp_path / "r"), "--no-results"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    jvms: list[int] = []
    try:
        deadline = time.monotonic() + 180
        while not (jvms := _java_children(proc.pid)):  # Spark's JVM is starting
            assert proc.poll() is None, f"reconcile run ended before Spark started: {proc.returncode}"
            assert time.monotonic() < deadline, "Spark's JVM did not start within 180 s"
            time.sleep(0.2)
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        for pid in [proc.pid, *jvms]:
            if process_alive(pid):
                os.kill(pid, signal.SIGKILL)
    assert proc.returncode == 130, err[-3000:]
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines[-1] == (
        "kafka-controller reconcile run: interrupted: the reconciliation outputs may be incomplete; "
        "run the job again"
    )
    assert "Traceback" not in err and "py4j" not in err, err[-3000:]
    assert not [pid for pid in jvms if process_alive(pid)], "Spark's JVM outlived the command"
