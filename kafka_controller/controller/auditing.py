"""The controller's audit decorator: stamps what the state machines record, then forwards it.

The state machines know the transition (partition, states, leader/ISR/epochs, strategy, outcome);
only the runtime knows *who* made it and *why*: the controller id and epoch, the event being
processed, the admin operation that caused the event, and when. ``ControllerAuditSink`` adds
those in place, in bulk (one clock read per ``record`` call), with a per-controller sequence
number that increases strictly across everything this controller records — transitions and
``ControllerEventRecord``s alike — so the audit store can order rows without trusting clocks.

Bulk records (``ReplicaTransitionColumns``, ``PartitionTransitionColumns``) are stamped once each, their
first row taking the next sequence number and the rest following, exactly as if their rows came
one by one; a wrapped sink that does not accept bulk records gets them expanded into single ones.

Runs on the event thread (the state machines call it); a lock keeps sequence numbers unique if a
record ever arrives from elsewhere. Never raises: a failing sink is logged, the controller goes on.

Records go to the sink as they are recorded: the ``AuditWriter`` journals them at once, so a
controller killed in the middle of an event keeps the rows of the state-machine calls it finished
(held in memory, they died with it: the fault trials kill a controller while a broker's controlled
shutdown is moving leaders; a call records its rows when it ends, after its writes). What waits
for the event's end is the *writing* of the rows: a failover records ~120,000 transitions, and a
sink that writes them while the event still runs (the ``AuditWriter``'s thread, inserting into
SQLite) takes CPU and the GIL from the failover itself (measured: +35% CPU in the failover
window). So a sink that can hold (``hold`` and ``release``, as the ``AuditWriter`` has) is held
from an event's first record to its end. Holding is bounded, though: once the oldest held record
is ``max_hold_ms`` old (2 s by default), the next ``record`` releases what is held. Unbounded, a
6 s failover under load kept every one of its rows from the audit store for 6 s plus their
writing (``bench/failover.py`` saw no row 7 s after the election): a reader saw a failover with no
transitions.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager

from kafka_controller.domain.audit_records import (
    AuditItem,
    ControllerEventRecord,
    PartitionTransitionColumns,
    ReplicaTransitionColumns,
    record_rows,
)
from kafka_controller.ports import AuditSink, BulkAuditSink, Clock, NullAuditSink, record_items

log = logging.getLogger(__name__)

#: The longest an event holds its records back from the sink (see the module docstring).
MAX_HOLD_MS = 2000
#: Gauges of what is held back: with the writer's ``LagMs`` they say how far the store trails.
AUDIT_HELD_RECORDS = "kafka.controller:type=ControllerAudit,name=HeldRecords"
AUDIT_HOLD_MS = "kafka.controller:type=ControllerAudit,name=HoldMs"

_OUTAGE_FIELDS = frozenset(
    ("previous_broker_id", "lost_ms", "first_offline_ms", "offline_partitions", "recovered_ms")
)


class ControllerAuditSink(BulkAuditSink):
    """An audit sink that stamps records with the controller's context and forwards them (bulk
    records as they are to a ``BulkAuditSink``, expanded to any other)."""

    def __init__(
        self,
        sink: AuditSink,
        controller_id: int,
        clock: Clock,
        controller_epoch: Callable[[], int],
        *,
        max_hold_ms: int = MAX_HOLD_MS,
    ) -> None:
        self._sink = sink
        self.controller_id = controller_id
        self._clock = clock
        self._epoch = controller_epoch
        self._lock = threading.Lock()
        self._sequence = 0
        self.current_event: str | None = None
        self.current_operation_id: str | None = None
        self._in_event = False
        self._held_rows = 0  # rows of the event in progress the sink holds (a bulk record has many)
        self._held_since = 0  # when the oldest held record was recorded
        hold, release = getattr(sink, "hold", None), getattr(sink, "release", None)
        self._hold = (hold, release) if callable(hold) and callable(release) else None
        self.max_hold_ms = max_hold_ms

    @property
    def enabled(self) -> bool:
        """False when the wrapped sink drops everything: callers then skip building records."""
        return not isinstance(self._sink, NullAuditSink)

    def held_records(self) -> int:
        """Rows of the event in progress the sink holds back from the store (a gauge: no lock)."""
        return self._held_rows

    def hold_ms(self) -> int:
        """Age of the oldest record held back, 0 when none is."""
        return max(0, self._clock.time_ms() - self._held_since) if self.held_records() else 0

    @property
    def last_sequence(self) -> int:
        return self._sequence

    # -- event scope -------------------------------------------------------------------------------
    def begin_event(self, event: str | None, operation_id: str | None = None) -> None:
        self.current_event = event
        self.current_operation_id = operation_id
        self._in_event = self._hold is not None and self.enabled

    def end_event(self) -> None:
        """Let the sink write what the event recorded."""
        self.current_event = None
        self.current_operation_id = None
        self._in_event = False
        self._release()

    def _release(self) -> None:
        if self._held_rows and self._hold is not None:
            self._held_rows = 0
            try:
                self._hold[1]()
            except Exception:  # never raises (see ``_forward``)
                log.exception("audit sink %r failed to release its held records", self._sink)

    # -- AuditSink ----------------------------------------------------------------------------------
    def record(self, records: Sequence[AuditItem]) -> None:
        if not records:
            return
        now = self._clock.time_ms()
        epoch = self._epoch()
        cid = self.controller_id
        event = self.current_event
        operation_id = self.current_operation_id
        with self._lock:
            seq = self._sequence
            first = seq + 1
            for r in records:
                seq += 1
                r.sequence = seq
                if isinstance(r, ControllerEventRecord):
                    continue
                if isinstance(r, ReplicaTransitionColumns | PartitionTransitionColumns):
                    seq += len(r) - 1  # its rows take the numbers after its first
                r.controller_id = cid
                r.controller_epoch = epoch
                r.event = event
                r.operation_id = operation_id
                r.timestamp_ms = now
            self._sequence = seq
        if self._in_event and self._hold is not None:
            if not self._held_rows:  # before the event's first record reaches the sink
                self._held_since = now
                try:
                    self._hold[0]()
                except Exception:
                    log.exception("audit sink %r failed to hold records", self._sink)
            self._held_rows += seq - first + 1
            self._forward(records)
            if now - self._held_since >= self.max_hold_ms:
                self._release()
        else:
            self._forward(records)

    def _forward(self, records: Sequence[AuditItem]) -> None:
        try:
            record_items(self._sink, records)
        except Exception:  # the port says sinks never raise; a broken one must not stop the controller
            log.exception("audit sink %r failed; %d records dropped", self._sink, record_rows(records))

    # -- controller events ------------------------------------------------------------------------------
    def record_controller_event(
        self,
        kind: str,
        started_ms: int,
        duration_ms: float,
        detail: str | None = None,
        controller_epoch: int | None = None,
        **fields: int | None,
    ) -> None:
        """One ``ControllerEventRecord`` (elected, resigned, failover, moved, ...); ``fields`` fill
        its optional ones (a failover's ``previous_broker_id``, ``lost_ms``, ...)."""
        if not self.enabled:
            return
        epoch = self._epoch() if controller_epoch is None else controller_epoch
        record = ControllerEventRecord(kind, self.controller_id, epoch, started_ms, duration_ms, detail)
        for name, value in fields.items():
            if name not in _OUTAGE_FIELDS:
                raise TypeError(f"ControllerEventRecord has no outage field {name!r}")
            setattr(record, name, value)
        self.record([record])

    @contextmanager
    def timed(
        self,
        kind: str,
        detail: Callable[[], str | None] = lambda: None,
        controller_epoch: int | None = None,
        fields: Callable[[], Mapping[str, int | None]] = dict,
    ) -> Iterator[None]:
        """Record ``kind`` with its duration once the block ends (even if it raised: the detail
        then says so). Unless ``controller_epoch`` is given, the epoch is read at the end, so a
        failover records its new epoch; a resignation passes the epoch it is giving up, because
        resigning resets the context's epoch to 0."""
        started_ms = self._clock.time_ms()
        start = self._clock.monotonic()
        failed: BaseException | None = None
        try:
            yield
        except BaseException as e:
            failed = e
            raise
        finally:
            duration_ms = (self._clock.monotonic() - start) * 1000.0
            text = detail()
            if failed is not None:
                text = (
                    f"{text}; failed: {type(failed).__name__}: {failed}"
                    if text
                    else (f"failed: {type(failed).__name__}: {failed}")
                )
            self.record_controller_event(kind, started_ms, duration_ms, text, controller_epoch, **fields())
