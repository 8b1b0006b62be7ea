"""Records to row tuples, and the row checks that keep one bad record from blocking the rest.

Conversion is the hot path (every transition passes through it on the writer thread), so it is plain
attribute access into tuples in ``schema.LOADED_TABLES`` order, with no per-value checks. The checks
run only when a database write fails: ``split_valid`` then separates rows the database can never
accept (wrong types, unknown outcome, over-long strings) from rows that failed because the database
is unavailable, so a poison record is set aside instead of being retried forever.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
from sqlalchemy import BigInteger, Boolean, Float, Integer, String, Table

from kafka_controller.audit import schema
from kafka_controller.domain.audit_records import (
    ControllerEventRecord,
    PartitionTransition,
    ReplicaTransition,
)

Row = Sequence[Any]
#: Rows to load, by table name; the unit the writer commits, spools and replays.
Batch = dict[str, list[Row]]

# Plain ``str``: SQLAlchemy's ``quoted_name`` is a subclass, which orjson refuses as a dict key.
PARTITION_TRANSITIONS = str(schema.partition_transitions.name)
REPLICA_TRANSITIONS = str(schema.replica_transitions.name)
CONTROLLER_EVENTS = str(schema.controller_events.name)


#: ISR text by ISR tuple. A failover audits 300,000 replicas at 100,000 partitions RF 3 with two
#: ISRs each but only a few dozen distinct ISRs: the rows share one string per ISR (about 35 MB
#: less held while the writer catches up, and no JSON encoding per row). Bounded; a race between
#: threads at worst encodes an ISR twice.
_ISR_TEXT: dict[tuple[int, ...], str] = {}
_ISR_TEXT_MAX = 4096


def _isr(isr: Sequence[int] | None) -> str | None:
    if isr is None:
        return None
    if type(isr) is not tuple:
        return orjson.dumps(list(isr)).decode()
    text = _ISR_TEXT.get(isr)
    if text is None:
        text = orjson.dumps(list(isr)).decode()
        if len(_ISR_TEXT) < _ISR_TEXT_MAX:
            _ISR_TEXT[isr] = text
    return text


isr_text = _isr  # for ``bulk``


def _seq(sequence: int) -> int | None:
    return sequence if sequence >= 0 else None


def partition_row(r: PartitionTransition) -> tuple[Any, ...]:
    return (
        r.controller_id,
        r.controller_epoch,
        _seq(r.sequence),
        r.event,
        r.operation_id,
        r.topic,
        r.partition,
        r.from_state,
        r.to_state,
        r.leader_before,
        r.leader_after,
        _isr(r.isr_before),
        _isr(r.isr_after),
        r.leader_epoch_before,
        r.leader_epoch_after,
        r.election_strategy,
        1 if r.unclean else 0,  # an exact int binds on sqlite3's fast path; a bool goes through adaptation
        r.outcome,
        r.error,
        r.timestamp_ms,
        1 if r.dry_run else 0,
    )


def replica_row(r: ReplicaTransition) -> tuple[Any, ...]:
    return (
        r.controller_id,
        r.controller_epoch,
        _seq(r.sequence),
        r.event,
        r.operation_id,
        r.topic,
        r.partition,
        r.replica,
        r.from_state,
        r.to_state,
        r.leader_before,
        r.leader_after,
        _isr(r.isr_before),
        _isr(r.isr_after),
        r.leader_epoch_before,
        r.leader_epoch_after,
        r.outcome,
        r.error,
        r.timestamp_ms,
        1 if r.dry_run else 0,
    )


def event_row(r: ControllerEventRecord) -> tuple[Any, ...]:
    return (
        r.kind,
        r.broker_id,
        r.controller_epoch,
        r.started_ms,
        r.duration_ms,
        r.detail,
        _seq(r.sequence),
        1 if r.dry_run else 0,
        r.previous_broker_id,
        r.lost_ms,
        r.first_offline_ms,
        r.offline_partitions,
        r.recovered_ms,
    )


@dataclass(slots=True)
class Converted:
    batch: Batch = field(default_factory=dict)
    rows: int = 0
    #: Records that are not audit records at all, with the reason.
    rejected: list[tuple[object, str]] = field(default_factory=list)


_OUTCOMES = VALID_OUTCOMES = frozenset(schema.OUTCOMES)


def to_batch(chunks: Iterable[Sequence[object]]) -> Converted:
    """Convert queued record chunks into one batch, keeping their order within each table.

    The outcome is checked here (a set lookup) rather than by a CHECK constraint in the database,
    which on SQLite costs more than the rest of the insert (see ``schema``).
    """
    pt: list[Row] = []
    rt: list[Row] = []
    ev: list[Row] = []
    out = Converted()
    for chunk in chunks:
        for r in chunk:
            try:
                if isinstance(r, PartitionTransition):
                    if r.outcome in _OUTCOMES:
                        pt.append(partition_row(r))
                        continue
                elif isinstance(r, ReplicaTransition):
                    if r.outcome in _OUTCOMES:
                        rt.append(replica_row(r))
                        continue
                elif isinstance(r, ControllerEventRecord):
                    ev.append(event_row(r))
                    continue
                else:
                    out.rejected.append((r, f"not an audit record: {type(r).__name__}"))
                    continue
                out.rejected.append(
                    (r, f"bad outcome {r.outcome!r}: use one of {', '.join(schema.OUTCOMES)}")
                )
            except (AttributeError, TypeError, ValueError) as e:
                out.rejected.append((r, f"cannot convert {type(r).__name__}: {e}"))
    for name, rows in ((PARTITION_TRANSITIONS, pt), (REPLICA_TRANSITIONS, rt), (CONTROLLER_EVENTS, ev)):
        if rows:
            out.batch[name] = rows
            out.rows += len(rows)
    return out


#: Values of the columns revision 0003 appended, for rows a spool kept from before it (a writer
#: that crashed under the previous version leaves them for the next one to replay).
_APPENDED_0003: dict[str, tuple[Any, ...]] = {
    PARTITION_TRANSITIONS: (0,),
    REPLICA_TRANSITIONS: (0,),
    CONTROLLER_EVENTS: (0, None, None, None, None, None),
}


def widen(table: str, row: Sequence[Any]) -> tuple[Any, ...]:
    """A spooled row as a tuple in today's column order (older, shorter rows get the defaults)."""
    appended = _APPENDED_0003.get(table, ())
    if len(row) == len(schema.LOADED_TABLES.get(table, ())) - len(appended):
        return (*row, *appended)
    return tuple(row)


def batch_size(batch: Batch) -> int:
    return sum(len(rows) for rows in batch.values())


# -- validation (slow path only) ------------------------------------------------------------------

_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)


def _column_checks(table: Table) -> list[tuple[str, str, bool, int | None]]:
    """(name, kind, nullable, limit) per loaded column; kind is int32/int64/bool/float/str."""
    checks = []
    for name in schema.LOADED_TABLES[table.name]:
        col = table.c[name]
        t = col.type
        limit = None
        if isinstance(t, Boolean):
            kind = "bool"
        elif isinstance(t, BigInteger):
            kind = "int64"
        elif isinstance(t, Integer):
            kind = "int32"
        elif isinstance(t, Float):
            kind = "float"
        else:
            kind = "str"
            limit = t.length if isinstance(t, String) else None
        checks.append((name, kind, bool(col.nullable), limit))
    return checks


_CHECKS = {
    t.name: _column_checks(t)
    for t in (schema.partition_transitions, schema.replica_transitions, schema.controller_events)
}


def _clean_text(value: str) -> bool:
    """No NUL (PostgreSQL refuses it in text) and valid UTF-8 (lone surrogates cannot be stored)."""
    if "\x00" in value:
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def row_problem(table: str, row: Row) -> str | None:
    """Why the database could never accept ``row`` for ``table``, or ``None`` if it looks fine."""
    checks = _CHECKS.get(table)
    if checks is None:
        return f"unknown table {table!r}"
    if len(row) != len(checks):
        return f"{table}: expected {len(checks)} values, got {len(row)}"
    for value, (name, kind, nullable, limit) in zip(row, checks, strict=True):
        if value is None:
            if not nullable:
                return f"{table}.{name} is required"
            continue
        if kind in ("int32", "int64"):
            lo, hi = _INT32 if kind == "int32" else _INT64
            if type(value) is not int or not lo <= value <= hi:
                return f"{table}.{name} must be a {kind} integer, got {value!r}"
        elif kind == "bool":
            if value not in (0, 1) or type(value) not in (bool, int):
                return f"{table}.{name} must be a bool, got {value!r}"
        elif kind == "float":
            if type(value) not in (int, float):
                return f"{table}.{name} must be a number, got {value!r}"
        elif type(value) is not str or (limit is not None and len(value) > limit) or not _clean_text(value):
            return (
                f"{table}.{name} must be a string of at most {limit or 'any'} characters, got {value!r:.80}"
            )
        if name == "outcome" and value not in schema.OUTCOMES:
            return f"{table}.outcome must be one of {', '.join(schema.OUTCOMES)}, got {value!r}"
    return None


def split_valid(batch: Batch) -> tuple[Batch, list[tuple[str, Row, str]]]:
    """Split a batch into rows that may be loaded and ``(table, row, reason)`` for those that may not."""
    good: Batch = {}
    bad: list[tuple[str, Row, str]] = []
    for table, rows in batch.items():
        kept = []
        for row in rows:
            problem = row_problem(table, row)
            if problem is None:
                kept.append(row)
            else:
                bad.append((table, row, problem))
        if kept:
            good[table] = kept
    return good, bad
