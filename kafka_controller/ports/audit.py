"""Where every attempted transition goes: the audit sink, and the one that drops everything."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from kafka_controller.domain.audit_records import AuditItem

__all__ = ["AuditSink", "NullAuditSink", "accepts_bulk"]


class AuditSink(Protocol):
    """Where every attempted transition goes. Never blocks the controller on I/O and never raises.

    A sink whose ``accepts_bulk_records`` attribute is True also takes bulk records
    (``ReplicaTransitions``, ``PartitionTransitions``: many rows in one object); the others are
    handed single records only (see ``accepts_bulk``). A sink may also have ``hold()`` and
    ``release()``: records recorded between them are kept (durably) but not yet written to the
    store, so that writing them takes nothing from the event that records them (the controller
    holds a sink that has both for each event: ``controller.auditing``)."""

    def record(self, records: Sequence[AuditItem]) -> None:
        """Accept records for durable storage, in order. Returns without waiting for the database.

        The caller never changes a record after handing it over."""
        ...


def accepts_bulk(sink: object) -> bool:
    """Whether ``sink`` takes bulk records (it says so with ``accepts_bulk_records = True``)."""
    return getattr(sink, "accepts_bulk_records", False) is True


class NullAuditSink:
    """An audit sink that drops everything: the default when auditing is off."""

    accepts_bulk_records = True

    def record(self, records: Sequence[AuditItem]) -> None:
        return None
