"""CPU time by thread: the controller's own account of where a failover's or a controlled
shutdown's CPU went.

A broker process runs the controller's event thread beside its request send threads (the one to
its own broker handles that broker's requests), ZooKeeper's connection thread and the broker's own
threads. They share one GIL, so a failover goes as fast as their CPU together allows, and the
process's CPU alone does not say which of them to make cheaper. ``top -H`` cannot tell them apart
either: Python 3.11 names no native thread. So the controller reads each live thread's CPU from
``/proc/self/task/<tid>/stat`` when a step starts and when it ends, and logs the difference by
thread name. A thread that ended meanwhile (an early write's) is counted only in the process's
total, as ``ended threads``. Linux only: elsewhere the account holds the process's total alone.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time

__all__ = ["CpuAccount", "stat_cpu_seconds", "thread_cpu_seconds"]

_TICKS_PER_S = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
#: Threads below this share (seconds) are summed into ``other threads``: a log line, not a dump.
_SHOWN_MIN_S = 0.01


def stat_cpu_seconds(path: str) -> float:
    """User + system CPU seconds in a ``/proc/<pid>/stat`` or ``/proc/<pid>/task/<tid>/stat``."""
    with open(path, "rb") as f:
        stat = f.read()
    fields = stat.rsplit(b")", 1)[1].split()  # the name in parentheses may hold spaces
    return (int(fields[11]) + int(fields[12])) / _TICKS_PER_S


def thread_cpu_seconds() -> dict[int, tuple[str, float]]:
    """Each live Python thread's native id -> (name, user + system CPU seconds); {} off Linux."""
    if not sys.platform.startswith("linux"):
        return {}
    out: dict[int, tuple[str, float]] = {}
    for thread in threading.enumerate():
        tid = thread.native_id
        if tid is None:
            continue
        try:
            out[tid] = (thread.name, stat_cpu_seconds(f"/proc/self/task/{tid}/stat"))
        except OSError:  # it ended since enumerate()
            continue
    return out


class CpuAccount:
    """The CPU the process, and each live thread, used from construction to ``by_thread()``."""

    def __init__(self) -> None:
        self._threads = thread_cpu_seconds()
        self._process = time.process_time()

    def by_thread(self) -> dict[str, float]:
        """``process`` (the total), then each thread's share by name, largest first, with those
        under 10 ms summed into ``other threads``, and ``ended threads`` (the total's rest)."""
        process = time.process_time() - self._process
        shares: dict[str, float] = {}
        for tid, (name, cpu) in thread_cpu_seconds().items():
            before = self._threads.get(tid)
            # a thread id reused by a new thread counts from zero
            used = cpu - before[1] if before is not None and before[0] == name else cpu
            shares[name] = shares.get(name, 0.0) + used
        out = {"process": round(process, 2)}
        other = 0.0
        for name, used in sorted(shares.items(), key=lambda item: -item[1]):
            if used >= _SHOWN_MIN_S:
                out[name] = round(used, 2)
            else:
                other += used
        if shares:
            out["other threads"] = round(other, 2)
            # clock ticks are 10 ms: never below zero for rounding's sake
            out["ended threads"] = round(max(0.0, process - sum(shares.values())), 2)
        return out

    def summary(self) -> str:
        """``by_thread()`` as one JSON object, for a log line that scripts can read."""
        return json.dumps(self.by_thread(), separators=(", ", ": "))
