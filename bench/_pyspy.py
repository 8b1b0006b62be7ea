"""Optional py-spy recordings of broker processes during a timed benchmark step.

Set ``KAFKA_CONTROLLER_BENCH_PYSPY=PREFIX`` (and ``KAFKA_CONTROLLER_BENCH_PYSPY_ARGS``, e.g.
``--threads --gil``) to record raw stacks at 200 Hz to ``PREFIX-<name>-<pid>.txt``; without it
nothing runs. Recorders attach a second before the step, so that its start is not missed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

Spies = dict[str, tuple[subprocess.Popen[bytes], str]]


def start_py_spy(pids: dict[str, int]) -> Spies:
    """One recorder per ``name -> pid`` whose name starts with ``broker_``."""
    prefix = os.environ.get("KAFKA_CONTROLLER_BENCH_PYSPY")
    if not prefix:
        return {}
    py_spy = str(Path(sys.executable).with_name("py-spy"))
    extra = os.environ.get("KAFKA_CONTROLLER_BENCH_PYSPY_ARGS", "").split()
    spies: Spies = {}
    for name, pid in pids.items():
        if name.startswith("broker_"):
            out = f"{prefix}-{name}-{pid}.txt"
            cmd = [py_spy, "record", "--pid", str(pid), "--rate", "200", "-f", "raw", "-o", out, *extra]
            spies[name] = (subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL), out)
    if spies:
        time.sleep(1.0)  # attached before the step
    return spies


def stop_py_spy(spies: Spies, keep: str) -> None:
    """Stop the recordings; keep only ``keep``'s."""
    for name, (proc, out) in spies.items():
        proc.send_signal(signal.SIGINT)
        proc.wait(30)
        if name != keep:
            Path(out).unlink(missing_ok=True)
