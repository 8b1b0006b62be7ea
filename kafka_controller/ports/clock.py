"""Injected time (docs/rules.md, time is injected): the clock port and the real clock."""

from __future__ import annotations

from typing import Protocol

__all__ = ["Clock", "SystemClock"]


class Clock(Protocol):
    """Injected time (docs/rules.md, time is injected): the core and controller never call ``time``
    directly."""

    def time_ms(self) -> int:
        """Wall-clock milliseconds since the epoch (for znode timestamps and audit rows)."""
        ...

    def monotonic(self) -> float:
        """Seconds on a monotonic clock (for durations and deadlines)."""
        ...

    def sleep(self, seconds: float) -> None:
        """Block the calling thread (a fake clock advances instead)."""
        ...


class SystemClock:
    """The real clock."""

    def time_ms(self) -> int:
        import time

        return int(time.time() * 1000)

    def monotonic(self) -> float:
        import time

        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        import time

        time.sleep(seconds)
