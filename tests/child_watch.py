"""Every child a command starts, seen on a thread of its own.

Sampling only when the command prints misses children on a loaded machine: the reader can fall a
step behind, and a broker the scenario kills meanwhile is gone before it is ever seen."""

from __future__ import annotations

import threading
from types import TracebackType

from kafka_controller.cluster.process import children_of

_INTERVAL_S = 0.05


class ChildWatch:
    """``with ChildWatch(pid) as watch:`` collects ``children_of(pid)`` every 50 ms until the block
    ends; ``watch.seen`` is the union, read after the block."""

    def __init__(self, pid: int) -> None:
        self._pid = pid
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._seen: set[int] = set()
        self._thread = threading.Thread(target=self._run, name=f"child-watch-{pid}", daemon=True)

    @property
    def seen(self) -> set[int]:
        with self._lock:
            return set(self._seen)

    def _sample(self) -> None:
        found = children_of(self._pid)
        with self._lock:
            self._seen |= found

    def _run(self) -> None:
        while not self._stop.wait(_INTERVAL_S):
            self._sample()

    def __enter__(self) -> ChildWatch:
        self._sample()
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
