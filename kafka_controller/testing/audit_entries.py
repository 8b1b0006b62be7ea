"""The audit store as the invariant checker reads it: one ``AuditEntry`` per row of any table, from
the database (``read_audit_entries``) or from in-memory records (``audit_entries_from_records``).
``testing.invariants`` re-exports every name."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from kafka_controller.domain.audit_records import (
    OUTCOME_OK,
    AuditRecord,
    ControllerEventRecord,
    PartitionTransition,
)
from kafka_controller.domain.values import TopicPartition

__all__ = ["AuditEntry", "audit_entries_from_records", "read_audit_entries", "unclean_partitions"]


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One audited row, whatever its table: ``kind`` is "partition", "replica" or "event"
    (``controller_id`` is the recording broker for events)."""

    kind: str
    controller_id: int
    controller_epoch: int
    sequence: int | None
    topic: str | None = None
    partition: int | None = None
    to_state: str | None = None
    outcome: str | None = None
    leader_after: int | None = None
    leader_epoch_after: int | None = None
    unclean: bool = False
    event: str | None = None
    leader_epoch_before: int | None = None

    @property
    def wrote_leader_epoch(self) -> bool:
        """Whether this transition wrote a leader epoch to ZooKeeper (a new partition's first
        state, an election, an ISR shrink), as opposed to restating the current one."""
        return self.leader_epoch_after is not None and self.leader_epoch_after != self.leader_epoch_before

    @property
    def topic_partition(self) -> TopicPartition | None:
        if self.topic is None or self.partition is None:
            return None
        return TopicPartition(self.topic, self.partition)


def audit_entries_from_records(records: Iterable[AuditRecord]) -> list[AuditEntry]:
    """Entries from in-memory records (a ``RecordingAuditSink``), as the store would hold them."""
    out: list[AuditEntry] = []
    for r in records:
        seq = r.sequence if r.sequence >= 0 else None
        if isinstance(r, ControllerEventRecord):
            out.append(AuditEntry("event", r.broker_id, r.controller_epoch, seq, event=r.kind))
            continue
        partition = isinstance(r, PartitionTransition)
        out.append(
            AuditEntry(
                "partition" if partition else "replica",
                r.controller_id,
                r.controller_epoch,
                seq,
                r.topic,
                r.partition,
                r.to_state,
                r.outcome,
                r.leader_after,
                r.leader_epoch_after,
                bool(getattr(r, "unclean", False)),
                leader_epoch_before=r.leader_epoch_before,
            )
        )
    return out


#: Transition columns in ``AuditEntry`` field order (after ``kind``).
# fmt: off
_COLUMNS = ("controller_id", "controller_epoch", "sequence", "topic", "partition", "to_state", "outcome",
            "leader_after", "leader_epoch_after", "leader_epoch_before")
# fmt: on


def read_audit_entries(url: str) -> list[AuditEntry]:
    """Every row of the audit store at ``url`` but what dry runs planned (three queries; SQLAlchemy
    imported here only)."""
    # Imported on use: SQLAlchemy is optional (the 'audit' extra).
    from sqlalchemy import create_engine, select

    from kafka_controller.audit import schema

    p, r, e = schema.partition_transitions.c, schema.replica_transitions.c, schema.controller_events.c
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            # what happened: rows dry runs planned are not history
            partitions = conn.execute(
                select(*[p[c] for c in _COLUMNS], p.unclean).where(p.dry_run.is_(False))
            ).all()
            replicas = conn.execute(select(*[r[c] for c in _COLUMNS]).where(r.dry_run.is_(False))).all()
            events = conn.execute(
                select(e.broker_id, e.controller_epoch, e.sequence, e.kind).where(e.dry_run.is_(False))
            ).all()
    finally:
        engine.dispose()
    out = [
        AuditEntry("partition", **dict(zip(_COLUMNS, row, strict=False)), unclean=bool(row[-1]))
        for row in partitions
    ]
    out += [AuditEntry("replica", **dict(zip(_COLUMNS, row, strict=True))) for row in replicas]
    out += [AuditEntry("event", b, epoch, seq, event=kind) for b, epoch, seq, kind in events]
    return out


def unclean_partitions(entries: Iterable[AuditEntry]) -> set[TopicPartition]:
    """Partitions with a successful unclean election on record (they may lose committed data)."""
    return {
        tp
        for e in entries
        if e.kind == "partition" and e.unclean and e.outcome == OUTCOME_OK
        for tp in [e.topic_partition]
        if tp is not None
    }
