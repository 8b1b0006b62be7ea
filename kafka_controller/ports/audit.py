"""Where every attempted transition goes: the audit sink, the sink that also takes bulk records,
and the one that drops everything."""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import Protocol

from kafka_controller.domain.audit_records import AuditItem, AuditRecord, expand_records

__all__ = ["AuditSink", "BulkAuditSink", "NullAuditSink", "record_items"]


class AuditSink(Protocol):
    """Where every attempted transition goes. Never blocks the controller on I/O and never raises.

    An ``AuditSink`` is handed single records; a ``BulkAuditSink`` also takes bulk ones. A sink
    may also have ``hold()`` and ``release()``: records recorded between them are kept (durably)
    but not yet written to the store, so that writing them takes nothing from the event that
    records them (the controller holds a sink that has both for each event:
    ``controller.auditing``)."""

    def record(self, records: Sequence[AuditRecord]) -> None:
        """Accept records for durable storage, in order. Returns without waiting for the database.

        The caller never changes a record after handing it over."""
        ...


class BulkAuditSink(abc.ABC):
    """An ``AuditSink`` whose ``record`` also takes bulk records (``ReplicaTransitionColumns``,
    ``PartitionTransitionColumns``: many rows in one object), among single ones, in order.

    A sink says it takes them by deriving from this class, and callers ask with ``isinstance``
    (``record_items`` does): the state machines then gather a failover's successes as columns
    instead of building a record object per row. Its rows are the rows of the single records the
    bulk ones expand to (``domain.audit_records.expand_records``)."""

    @abc.abstractmethod
    def record(self, records: Sequence[AuditItem]) -> None:
        """``AuditSink.record``, bulk records included."""


def record_items(sink: AuditSink, items: Sequence[AuditItem]) -> None:
    """Hand ``items`` to ``sink`` in one ``record`` call: as they are to a ``BulkAuditSink``, else
    with each bulk record expanded into its single records, in order."""
    if isinstance(sink, BulkAuditSink):
        sink.record(items)
    else:
        sink.record(expand_records(items))


class NullAuditSink(BulkAuditSink):
    """An audit sink that drops everything: the default when auditing is off."""

    def record(self, records: Sequence[AuditItem]) -> None:
        return None
