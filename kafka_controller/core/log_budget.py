"""A bound on per-partition state-change log lines within one state-machine call.

Kafka logs one state-change line per partition (each failed transition, each ISR shrink). One
call here can cover 100,000 partitions, and a Python log line costs ~20 µs, so a failover in which
a dead broker's 20,000 partitions fail (or shrink) spent over a second writing log lines: more
than the whole ZooKeeper I/O of the call. The first ``limit`` lines of each kind are logged as
Kafka writes them; the rest are counted and summarised in one line at the end of the call. Every
transition, logged or not, still gets its audit record and its per-partition result.
"""

from __future__ import annotations

import logging

__all__ = ["MAX_PARTITION_LOG_LINES", "LogBudget"]

#: Per-partition lines of one kind logged in full within one state-machine call.
MAX_PARTITION_LOG_LINES = 100


class LogBudget:
    """Counts lines of one kind within a call; ``take()`` says whether to log the next one."""

    __slots__ = ("left", "limit", "skipped")

    def __init__(self, limit: int = MAX_PARTITION_LOG_LINES) -> None:
        self.limit = limit
        self.left = limit
        self.skipped = 0

    def reset(self) -> None:
        self.left = self.limit
        self.skipped = 0

    def take(self) -> bool:
        if self.left > 0:
            self.left -= 1
            return True
        self.skipped += 1
        return False

    def summarize(self, logger: logging.Logger, level: int, what: str) -> None:
        """One line for the lines ``take`` refused since the last reset (none if it refused none)."""
        if self.skipped:
            logger.log(
                level,
                "... and %d more %s (per-partition lines after the first %d of this call are not "
                "logged; every transition is in the audit records)",
                self.skipped,
                what,
                self.limit,
            )
        self.reset()
