"""A manual clock for tests (docs/rules.md, time is injected): time moves only when a test says so."""

from __future__ import annotations

import threading


class ManualClock:
    """Implements the ``Clock`` port; ``sleep`` advances the clock (and records the call)."""

    def __init__(self, start_s: float = 1_000.0) -> None:
        self._now = start_s
        self._lock = threading.Lock()
        self.sleeps: list[float] = []

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._now += seconds

    def time_ms(self) -> int:
        return int(self.monotonic() * 1000)

    def monotonic(self) -> float:
        with self._lock:
            return self._now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.advance(seconds)
