"""``RecordingAuditSink``: the audit sink of a dry run, which keeps every record in memory; the
dry run stores them under its operation's id as its plan's rows (``airflow/planner.py``).
Tests and benchmarks use it too; their other doubles live in ``kafka_controller.testing.doubles``.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from kafka_controller.domain.audit_records import AuditItem, AuditRecord, expand_records
from kafka_controller.ports import BulkAuditSink


class RecordingAuditSink(BulkAuditSink):
    """Keeps every audit record, in order; bulk records as their rows, one single record each (as
    the state machines build them for a sink that takes no bulk records).

    Bulk records are expanded when ``records`` is read, not when recorded: the controller's event
    thread then pays for auditing what the audit writer would cost it, not for a test's objects
    (``bench/controller_inmemory.py --audit`` times the event thread with this sink)."""

    def __init__(self) -> None:
        self._records: list[AuditRecord] = []
        self._unread: list[AuditItem] = []
        self._lock = threading.Lock()  # a test thread reads while the event thread records

    @property
    def records(self) -> list[AuditRecord]:
        with self._lock:
            if self._unread:
                self._records.extend(expand_records(self._unread))
                self._unread.clear()
            return self._records

    def record(self, records: Sequence[AuditItem]) -> None:
        with self._lock:
            self._unread.extend(records)
