"""Once-per-interval logging for errors that repeat every cycle.

The writer thread wakes every ``flush_interval`` (200 ms by default) and retries what failed, so an
error that lasts (a full spool disk, a database that stays away) would otherwise be logged five
times a second: a full disk once filled a broker's log with 363 identical ENOSPC lines in 75 s,
burying everything else. ``RepeatedLog`` logs the first occurrence of each kind of error at once,
then at most one line per ``interval`` seconds carrying how many were suppressed meanwhile, and
one line when the condition clears (``resolved``), so the log still says when trouble started,
that it went on, and when it ended.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from kafka_controller.ports import Clock

#: Seconds between two lines about the same repeating error.
DEFAULT_INTERVAL_S = 30.0


@dataclass(slots=True)
class _Streak:
    last_logged: float
    suppressed: int = 0
    total: int = 1


class RepeatedLog:
    """Logs a repeating message at most once per ``interval`` per key, with a count of the repeats
    it held back. Times come from the injected ``clock``. Not thread-safe: one owner thread."""

    def __init__(self, logger: logging.Logger, clock: Clock, interval: float = DEFAULT_INTERVAL_S) -> None:
        if interval <= 0:
            raise ValueError(f"bad interval {interval}: must be positive")
        self._log = logger
        self._clock = clock
        self.interval = interval
        self._streaks: dict[str, _Streak] = {}

    def log(self, key: str, level: int, msg: str, *args: Any, exc_info: bool = False) -> bool:
        """Log ``msg % args`` unless a line about ``key`` went out less than ``interval`` ago;
        True if it was logged. A line after suppressed repeats says how many there were."""
        now = self._clock.monotonic()
        streak = self._streaks.get(key)
        if streak is None:
            self._streaks[key] = _Streak(now)
            self._log.log(level, msg, *args, exc_info=exc_info)
            return True
        streak.total += 1
        if now - streak.last_logged < self.interval:
            streak.suppressed += 1
            return False
        suppressed, since = streak.suppressed, now - streak.last_logged
        streak.last_logged, streak.suppressed = now, 0
        if suppressed:
            self._log.log(
                level,
                msg + " (%d more like this in the last %.0f s)",
                *args,
                suppressed,
                since,
                exc_info=exc_info,
            )
        else:
            self._log.log(level, msg, *args, exc_info=exc_info)
        return True

    def active(self, key: str) -> bool:
        """Whether ``key`` has failed since it was last resolved."""
        return key in self._streaks

    def resolved(self, key: str, msg: str, *args: Any, level: int = logging.INFO) -> int:
        """The condition behind ``key`` is over: log ``msg`` with how many times it occurred (if
        it occurred since the last ``resolved``) and forget it; the count, 0 if none."""
        streak = self._streaks.pop(key, None)
        if streak is None:
            return 0
        self._log.log(level, msg + " (after %d failures)", *args, streak.total)
        return streak.total
