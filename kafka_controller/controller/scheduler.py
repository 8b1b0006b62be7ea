"""A small delayed-task scheduler on the injected clock (Kafka's ``KafkaScheduler``, as the
controller uses it: one-shot tasks that the auto-rebalance handler re-schedules).

Tasks must only enqueue controller events (docs/rules.md, callbacks only enqueue): the scheduler's
thread never touches
controller state. Due times are read from ``clock.monotonic()``; the thread waits on a condition
variable for at most the time left, so with the real clock a task runs on time, and with a fake
clock a test advances the clock and calls ``wake()`` (or ``run_due()``) to fire what is now due —
no sleeping, no polling.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
from collections.abc import Callable

from kafka_controller.domain.errors import IllegalControllerStateError, InvalidArgumentError
from kafka_controller.ports import Clock

log = logging.getLogger(__name__)

#: Longest real wait between due-time checks, so that a clock that jumps is noticed.
_MAX_WAIT_S = 1.0


class KafkaScheduler:
    """One daemon thread running one-shot tasks at ``clock.monotonic()`` due times."""

    def __init__(self, clock: Clock, *, name: str = "kafka-scheduler") -> None:
        self._clock = clock
        self._name = name
        self._cond = threading.Condition()
        self._tasks: list[tuple[float, int, str, Callable[[], None]]] = []
        self._seq = itertools.count()
        self._thread: threading.Thread | None = None
        self._running = False

    @property
    def is_started(self) -> bool:
        return self._running

    def startup(self) -> None:
        with self._cond:
            if self._running:
                raise IllegalControllerStateError(f"scheduler {self._name} is already started")
            self._running = True
            self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
            self._thread.start()

    def shutdown(self) -> None:
        """Drop every pending task and stop the thread (idempotent)."""
        with self._cond:
            thread = self._thread
            self._running = False
            self._tasks.clear()
            self._thread = None
            self._cond.notify_all()
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def schedule(self, name: str, task: Callable[[], None], delay_s: float) -> None:
        """Run ``task`` once, ``delay_s`` seconds from now on the clock."""
        if delay_s < 0:
            raise InvalidArgumentError(f"task {name!r}: delay must be >= 0 seconds, got {delay_s}")
        with self._cond:
            if not self._running:
                raise IllegalControllerStateError(
                    f"scheduler {self._name} is not running; cannot schedule {name}"
                )
            due = self._clock.monotonic() + delay_s
            heapq.heappush(self._tasks, (due, next(self._seq), name, task))
            self._cond.notify_all()

    def pending(self) -> list[tuple[str, float]]:
        """``(name, due monotonic time)`` of every pending task, soonest first."""
        with self._cond:
            return [(name, due) for due, _, name, _ in sorted(self._tasks)]

    def wake(self) -> None:
        """Re-check due times now (after a fake clock was advanced)."""
        with self._cond:
            self._cond.notify_all()

    def run_due(self) -> int:
        """Run every task that is due on the calling thread; returns how many ran."""
        ran = 0
        while True:
            with self._cond:
                if not self._tasks or self._tasks[0][0] > self._clock.monotonic():
                    return ran
                _, _, name, task = heapq.heappop(self._tasks)
            self._call(name, task)
            ran += 1

    def _run(self) -> None:
        while True:
            with self._cond:
                if not self._running:
                    return
                if self._tasks:
                    wait = min(max(self._tasks[0][0] - self._clock.monotonic(), 0.0), _MAX_WAIT_S)
                else:
                    wait = None
                if wait is None or wait > 0:
                    self._cond.wait(wait)
                    continue
            self.run_due()

    @staticmethod
    def _call(name: str, task: Callable[[], None]) -> None:
        try:
            task()
        except Exception:
            log.exception("scheduled task %s failed", name)
