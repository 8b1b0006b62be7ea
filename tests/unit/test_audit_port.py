"""The audit port: a sink takes bulk records only if it is a ``BulkAuditSink``; ``record_items``
hands any other sink the same rows as single records."""

from __future__ import annotations

from collections.abc import Sequence

from kafka_controller.controller.auditing import ControllerAuditSink
from kafka_controller.domain.audit_records import (
    AuditItem,
    AuditRecord,
    PartitionTransition,
    PartitionTransitionColumns,
    ReplicaTransition,
    ReplicaTransitionColumns,
    expand_records,
)
from kafka_controller.dryrun.recording import RecordingAuditSink
from kafka_controller.ports import BulkAuditSink, NullAuditSink, record_items
from kafka_controller.testing.clock import ManualClock


class _PlainSink:
    """An ``AuditSink`` that is not a ``BulkAuditSink``, though it has the same ``record``."""

    def __init__(self) -> None:
        self.calls: list[list[AuditRecord]] = []

    def record(self, records: Sequence[AuditRecord]) -> None:
        self.calls.append(list(records))


class _BulkSink(BulkAuditSink):
    def __init__(self) -> None:
        self.calls: list[Sequence[AuditItem]] = []

    def record(self, records: Sequence[AuditItem]) -> None:
        self.calls.append(records)


def _items() -> list[AuditItem]:
    replicas = ReplicaTransitionColumns("OnlineReplica")
    for p in range(3):
        replicas.add("t", p, 1, "OfflineReplica", 1, 1, (1, 2), (1, 2), 4, 4)
    partitions = PartitionTransitionColumns(
        "OnlinePartition", election_strategy="OfflinePartitionLeaderElectionStrategy"
    )
    partitions.add("t", 0, "OfflinePartition", None, 2, None, (2,), None, 5, True)
    single = PartitionTransition("u", 0, "NewPartition", "OnlinePartition")
    return [single, replicas, partitions]


def test_a_plain_sink_gets_the_bulk_records_rows_as_single_records_in_one_call() -> None:
    sink, items = _PlainSink(), _items()
    record_items(sink, items)
    (call,) = sink.calls
    assert call == expand_records(items)
    assert len(call) == 1 + 3 + 1
    assert not any(isinstance(r, ReplicaTransitionColumns | PartitionTransitionColumns) for r in call)


def test_a_bulk_sink_gets_the_items_as_they_are() -> None:
    sink, items = _BulkSink(), _items()
    record_items(sink, items)
    assert sink.calls == [items] and sink.calls[0] is items


def test_which_sinks_take_bulk_records() -> None:
    clock = ManualClock()
    bulk = [NullAuditSink(), RecordingAuditSink(), ControllerAuditSink(_PlainSink(), 1, clock, lambda: 1)]
    assert all(isinstance(s, BulkAuditSink) for s in bulk)
    assert not isinstance(_PlainSink(), BulkAuditSink)  # having ``record`` is not saying so


def test_the_controllers_sink_expands_for_a_plain_sink_it_wraps() -> None:
    inner = _PlainSink()
    ControllerAuditSink(inner, 1, ManualClock(), lambda: 1).record(_items())
    (call,) = inner.calls
    assert len(call) == 5
    assert all(isinstance(r, PartitionTransition | ReplicaTransition) and r.controller_id == 1 for r in call)
    assert [r.sequence for r in call] == [1, 2, 3, 4, 5]
