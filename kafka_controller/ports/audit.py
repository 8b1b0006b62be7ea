"""Where every attempted transition goes: the audit sink, and the one that drops everything."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from kafka_controller.domain.audit_records import AuditRecord

__all__ = ["AuditSink", "NullAuditSink"]


class AuditSink(Protocol):
    """Where every attempted transition goes. Never blocks the controller on I/O and never raises."""

    def record(self, records: Sequence[AuditRecord]) -> None:
        """Accept records for durable storage, in order. Returns without waiting for the database."""
        ...


class NullAuditSink:
    """An audit sink that drops everything: the default when auditing is off."""

    def record(self, records: Sequence[AuditRecord]) -> None:
        return None
