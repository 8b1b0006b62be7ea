"""The controller's event queue and its single consumer thread (docs/controller-behaviour.md §8.1,
Kafka ``ControllerEventManager``).

Everything that happens to the controller (ZooKeeper watches, admin and broker requests, response
callbacks, the scheduler) becomes an event on one unbounded FIFO queue; one thread,
``controller-event-thread``, takes them in order and hands each to the processor. Only that thread
touches controller state, so the state machines need no locks.

``clear_and_put`` is how urgent events (session expiry, shutdown) jump the queue: it drains the
queue under the put lock and *preempts* every drained event, so callers waiting for an answer (an
admin election, a controlled shutdown) get NOT_CONTROLLER instead of hanging. A ``QueuedEvent``
runs ``process`` or ``preempt`` at most once in total, whichever comes first; an event already
taken by the thread is never preempted.

Differences from Kafka, all deliberate: an exception from ``preempt`` is logged and the other
drained events are still preempted; an event ``put`` after ``close()`` is preempted at once
rather than left in a queue nobody reads; and an event with a ``supersede_key`` replaces a queued,
not yet taken event with the same key, which is preempted and dropped. That is for requests whose
sender keeps one in flight and sends again only after giving up on the last, carrying everything
the last one carried (a broker's AlterIsr): while a long event runs, each broker's resends would
otherwise pile up behind it, one per ``controller.socket.timeout.ms``, without bound; superseded,
the queue holds at most one per broker, and the newest is the one processed.

The cyclic garbage collector is paused while an event is processed. A big event (failover, a
broker failure) allocates hundreds of thousands of short- and long-lived objects, which triggers
collections that walk every object of the controller's context: measured, ~30% of a 100,000
partition failover. The controller's values are acyclic (reference counting frees them), so
nothing is lost by letting the collector run between events instead.
"""

from __future__ import annotations

import gc
import logging
import threading
from collections import deque
from collections.abc import Hashable, Mapping
from typing import ClassVar, Protocol

from kafka_controller.controller.controller_state import ControllerState
from kafka_controller.controller.metrics import (
    CONTROLLER_STATE,
    EVENT_QUEUE_SIZE,
    EVENT_QUEUE_TIME_MS,
    Histogram,
    MetricsRegistry,
    Timer,
    new_rate_and_time_metrics,
)
from kafka_controller.domain.errors import IllegalControllerStateError, InvalidArgumentError
from kafka_controller.ports import Clock

logger = logging.getLogger(__name__)

CONTROLLER_EVENT_THREAD_NAME = "controller-event-thread"


class ControllerEvent:
    """Base of every controller event. Subclasses set ``state`` and may override ``preempt``."""

    state: ClassVar[ControllerState] = ControllerState.IDLE

    def preempt(self) -> None:
        """Answer whoever waits on this event without processing it (default: nobody waits)."""
        return None

    def supersede_key(self) -> Hashable | None:
        """Events with the same key supersede each other while queued (see the module docstring);
        None, the default: never superseded."""
        return None


class ShutdownEventThread(ControllerEvent):
    """Put by ``close()`` to wake the thread; the thread ignores it (Kafka's ``ShutdownEventThread``)."""

    state = ControllerState.CONTROLLER_SHUTDOWN

    def __repr__(self) -> str:
        return "ShutdownEventThread"


SHUTDOWN_EVENT_THREAD = ShutdownEventThread()


class ControllerEventProcessor(Protocol):
    """What the event thread drives: ``KafkaController`` in production, recorders in tests."""

    def process(self, event: ControllerEvent) -> None:
        """Handle the event on the event thread; exceptions are logged by the manager."""
        ...

    def preempt(self, event: ControllerEvent) -> None:
        """Answer a drained event without processing it (usually ``event.preempt()``)."""
        ...


class QueuedEvent:
    """An event with its enqueue time, a spent flag and a processing-started latch."""

    __slots__ = (
        "_spent",
        "_spent_lock",
        "enqueue_monotonic",
        "enqueue_time_ms",
        "event",
        "processing_started",
    )

    def __init__(self, event: ControllerEvent, enqueue_time_ms: int, enqueue_monotonic: float) -> None:
        self.event = event
        self.enqueue_time_ms = enqueue_time_ms
        self.enqueue_monotonic = enqueue_monotonic
        self.processing_started = threading.Event()
        self._spent = False
        self._spent_lock = threading.Lock()

    def _take(self) -> bool:
        """Kafka's ``spent.getAndSet(true)``: True exactly once, for the first caller."""
        with self._spent_lock:
            if self._spent:
                return False
            self._spent = True
            return True

    @property
    def spent(self) -> bool:
        return self._spent

    def process(self, processor: ControllerEventProcessor) -> None:
        if not self._take():
            return
        self.processing_started.set()
        processor.process(self.event)

    def preempt(self, processor: ControllerEventProcessor) -> None:
        if not self._take():
            return
        processor.preempt(self.event)

    def await_processing(self, timeout_s: float | None = None) -> bool:
        """Block until processing has started (True) or ``timeout_s`` passed (False)."""
        return self.processing_started.wait(timeout_s)

    def __repr__(self) -> str:
        return f"QueuedEvent(event={self.event!r}, enqueue_time_ms={self.enqueue_time_ms})"


class ControllerEventManager:
    """One FIFO queue, one consumer thread; see the module docstring for the guarantees."""

    def __init__(
        self,
        controller_id: int,
        processor: ControllerEventProcessor,
        clock: Clock,
        *,
        rate_and_time_metrics: Mapping[ControllerState, Timer] | None = None,
        event_queue_time_histogram: Histogram | None = None,
        idle_poll_s: float = 300.0,
    ) -> None:
        if idle_poll_s <= 0:
            raise InvalidArgumentError(f"idle_poll_s must be > 0, got {idle_poll_s}")
        self.controller_id = controller_id
        self._processor = processor
        self._clock = clock
        self._rate_and_time = dict(rate_and_time_metrics or {})
        self.event_queue_time = event_queue_time_histogram or Histogram()
        self._idle_poll_s = idle_poll_s
        self._log_prefix = f"[ControllerEventThread controllerId={controller_id}] "
        self._put_lock = threading.RLock()  # reentrant: a preempt callback may put
        self._not_empty = threading.Condition(threading.Lock())
        self._queue: deque[QueuedEvent] = deque()
        #: The newest queued event of each ``supersede_key`` (possibly taken or spent since).
        self._newest: dict[Hashable, QueuedEvent] = {}
        self._state = ControllerState.IDLE
        self._shutdown = threading.Event()
        self._thread = threading.Thread(target=self._run, name=CONTROLLER_EVENT_THREAD_NAME, daemon=True)

    @property
    def state(self) -> ControllerState:
        """The state of the event being processed, ``IDLE`` between events."""
        return self._state

    @property
    def is_empty(self) -> bool:
        return not self._queue

    @property
    def queue_size(self) -> int:
        """For the ``EventQueueSize`` gauge."""
        return len(self._queue)

    @property
    def thread(self) -> threading.Thread:
        return self._thread

    def start(self) -> None:
        if self._thread.ident is not None or self._shutdown.is_set():
            raise IllegalControllerStateError("the controller event thread was already started or closed")
        self._thread.start()

    def put(self, event: ControllerEvent) -> QueuedEvent:
        """Append ``event``; after ``close()`` it is preempted at once instead."""
        with self._put_lock:
            queued = self._new_queued(event)
            if self._shutdown.is_set():
                self._preempt_all([queued])
                return queued
            key = event.supersede_key()
            if key is not None:
                self._supersede(key, queued)
            self._append(queued)
            return queued

    def clear_and_put(self, event: ControllerEvent) -> QueuedEvent:
        """Preempt everything queued, then append ``event``."""
        with self._put_lock:
            self._preempt_all(self._drain())
            return self.put(event)

    def close(self) -> None:
        """Preempt what is queued, stop the thread after its current event, and wait for it."""
        with self._put_lock:
            if not self._shutdown.is_set():
                self._shutdown.set()
                self._preempt_all(self._drain())
                self._append(self._new_queued(SHUTDOWN_EVENT_THREAD))
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join()

    # -- internals ---------------------------------------------------------------------------

    def _new_queued(self, event: ControllerEvent) -> QueuedEvent:
        return QueuedEvent(event, self._clock.time_ms(), self._clock.monotonic())

    def _append(self, queued: QueuedEvent) -> None:
        with self._not_empty:
            self._queue.append(queued)
            self._not_empty.notify()

    def _supersede(self, key: Hashable, newer: QueuedEvent) -> None:
        """Drop and preempt the queued event ``newer`` replaces, unless the thread took it."""
        older = self._newest.get(key)
        self._newest[key] = newer
        if older is None or older.spent:
            return
        with self._not_empty:
            try:
                self._queue.remove(older)
            except ValueError:  # taken by the thread meanwhile: it runs
                return
        self._preempt_all([older])

    def _drain(self) -> list[QueuedEvent]:
        with self._not_empty:
            drained = list(self._queue)
            self._queue.clear()
        self._newest.clear()
        return drained

    def _preempt_all(self, drained: list[QueuedEvent]) -> None:
        for queued in drained:
            try:
                queued.preempt(self._processor)
            except Exception:
                logger.exception("%sError preempting %r", self._log_prefix, queued.event)

    def _poll(self) -> QueuedEvent | None:
        """Kafka's ``pollFromEventQueue``: after an idle poll, reset the queue-time histogram."""
        with self._not_empty:
            if self.event_queue_time.count > 0:
                if not self._not_empty.wait_for(lambda: self._queue, self._idle_poll_s):
                    self.event_queue_time.clear()
                    return None
            else:
                self._not_empty.wait_for(lambda: self._queue)
            return self._queue.popleft()

    def _run(self) -> None:
        logger.info("%sStarting", self._log_prefix)
        while not self._shutdown.is_set():
            queued = self._poll()
            if queued is None or isinstance(queued.event, ShutdownEventThread):
                continue
            self._process(queued)
        logger.info("%sStopped", self._log_prefix)

    def _process(self, queued: QueuedEvent) -> None:
        event = queued.event
        self._state = event.state
        clock = self._clock
        start = clock.monotonic()
        self.event_queue_time.update((start - queued.enqueue_monotonic) * 1000.0)
        timer = self._rate_and_time.get(event.state)
        paused_gc = gc.isenabled()  # re-enabled only by whoever disabled it
        if paused_gc:
            gc.disable()
        try:
            queued.process(self._processor)
        except Exception:
            logger.exception("%sUncaught error processing event %r", self._log_prefix, event)
        finally:
            if paused_gc:
                gc.enable()
            if timer is not None:
                timer.update((clock.monotonic() - start) * 1000.0)
            self._state = ControllerState.IDLE


def create_event_manager(
    controller_id: int,
    processor: ControllerEventProcessor,
    clock: Clock,
    registry: MetricsRegistry,
    *,
    idle_poll_s: float = 300.0,
) -> ControllerEventManager:
    """A manager wired to Kafka's metrics in ``registry``: one ``<State>RateAndTimeMs`` timer per
    timed state, ``EventQueueTimeMs``, ``EventQueueSize`` and the ``ControllerState`` gauge."""
    manager = ControllerEventManager(
        controller_id,
        processor,
        clock,
        rate_and_time_metrics=new_rate_and_time_metrics(registry),
        event_queue_time_histogram=registry.histogram(
            EVENT_QUEUE_TIME_MS, "Time events waited in the controller queue (ms)"
        ),
        idle_poll_s=idle_poll_s,
    )
    registry.gauge(EVENT_QUEUE_SIZE, lambda: manager.queue_size, "Events waiting in the controller queue")
    registry.gauge(CONTROLLER_STATE, lambda: manager.state.value, "State of the event being processed")
    return manager
