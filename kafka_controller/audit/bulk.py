"""Bulk audit records (``ReplicaTransitionColumns``, ``PartitionTransitionColumns``) on their way to
the database.

A bulk record becomes a *segment*: ``(table, rows, columns)``, one entry per loaded column in
``schema.LOADED_TABLES`` order, each either a list (one value per row), ``{"c": value}`` (every
row's) or ``{"s": first}`` (the sequence: ``first + i``, or none when ``first`` is negative).
Segments are what the writer queues, in slices of at most its batch size (they share the record's
lists: no copy), and, as orjson, what it journals (``spool.Spool.append_parts``); ``segment_rows``
makes the row tuples of a slice, identical to ``rows.partition_row``/``rows.replica_row`` of the
single records, by ``zip`` over the columns. So neither the caller's thread nor the queue
ever holds a failover's 300,000 row tuples: the writer thread makes them one slice at a time.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from itertools import repeat
from typing import Any

from kafka_controller.audit import schema
from kafka_controller.audit.rows import (
    PARTITION_TRANSITIONS,
    REPLICA_TRANSITIONS,
    VALID_OUTCOMES,
    Converted,
    Row,
    isr_text,
    to_batch,
)
from kafka_controller.domain.audit_records import (
    AuditItem,
    AuditRecord,
    PartitionTransitionColumns,
    ReplicaTransitionColumns,
)
from kafka_controller.hotpath import values_at

__all__ = [
    "Part",
    "Segment",
    "Unit",
    "bulk_segment",
    "convert_units",
    "queue_units",
    "segment_batches",
    "segment_rows",
]

Segment = tuple[str, int, list[Any]]
#: One part of a compact journal frame: rows of single records, or a column segment.
Part = tuple[str, dict[str, list[Row]]] | tuple[str, str, int, list[Any]]

_ISR_COLUMNS = {PARTITION_TRANSITIONS: (11, 12), REPLICA_TRANSITIONS: (12, 13)}
_BOOL_COLUMNS = {PARTITION_TRANSITIONS: (16,), REPLICA_TRANSITIONS: ()}


class _IsrTexts(dict[Any, str | None]):
    """``rows.isr_text`` by ISR tuple, computed on a miss; bounded (few distinct ISRs exist)."""

    def __missing__(self, isr: Any) -> str | None:
        text = isr_text(isr)
        if len(self) < 4096:
            self[isr] = text
        return text


_ISR_TEXTS = _IsrTexts()


def bulk_segment(r: ReplicaTransitionColumns | PartitionTransitionColumns) -> Segment | str:
    """``r`` as a segment, or why it cannot be one (columns of unequal length, a bad outcome)."""
    n = len(r.topic)
    head: list[Any] = [
        {"c": r.controller_id},
        {"c": r.controller_epoch},
        {"s": r.sequence},
        {"c": r.event},
        {"c": r.operation_id},
        r.topic,
        r.partition,
    ]
    error = r.error if isinstance(r, PartitionTransitionColumns) and r.error is not None else {"c": None}
    tail: list[Any] = [{"c": r.outcome}, error, {"c": r.timestamp_ms}, {"c": 1 if r.dry_run else 0}]
    common = [r.leader_before, r.leader_after, r.isr_before, r.isr_after]
    common += [r.leader_epoch_before, r.leader_epoch_after]
    if isinstance(r, ReplicaTransitionColumns):
        table = REPLICA_TRANSITIONS
        columns = [*head, r.replica, r.from_state, {"c": r.to_state}, *common, *tail]
    else:
        table = PARTITION_TRANSITIONS
        middle = [{"c": r.election_strategy}, r.unclean]
        columns = [*head, r.from_state, {"c": r.to_state}, *common, *middle, *tail]
    if r.outcome not in VALID_OUTCOMES:
        return f"bad outcome {r.outcome!r}: use one of {', '.join(schema.OUTCOMES)}"
    if any(type(c) is list and len(c) != n for c in columns):
        return f"columns of unequal length in a {type(r).__name__} of {n} rows"
    return table, n, columns


def segment_rows(segment: Segment | list[Any], start: int = 0, stop: int | None = None) -> list[Row]:
    """Row tuples of rows ``start:stop`` of ``segment`` (also one decoded from a journal frame)."""
    table, n, columns = segment
    stop = n if stop is None else min(stop, n)
    k = stop - start
    if k <= 0:
        return []
    isr = _ISR_COLUMNS[table]
    bools = _BOOL_COLUMNS[table]
    parts: list[Iterable[Any]] = []
    for i, column in enumerate(columns):
        if type(column) is list:
            part = column if k == len(column) else column[start:stop]
            if i in isr:
                try:  # a decoded journal's ISRs are lists (unhashable)
                    part = list(values_at(_ISR_TEXTS, part))
                except TypeError:
                    part = [isr_text(x) for x in part]
            elif i in bools:
                part = [1 if x else 0 for x in part]
            parts.append(part)
        elif "s" in column:
            first = column["s"]
            parts.append(range(first + start, first + stop) if first >= 0 else repeat(None, k))
        else:
            parts.append(repeat(column["c"], k))
    return list(zip(*parts, strict=True))


def segment_batches(segment: Segment | list[Any], chunk_rows: int) -> Iterator[tuple[str, list[Row]]]:
    """``(table, rows)`` for ``segment`` in slices of at most ``chunk_rows`` rows."""
    table, n = segment[0], segment[1]
    for start in range(0, n, chunk_rows):
        yield table, segment_rows(segment, start, start + chunk_rows)


#: Rows ``start:stop`` of a bulk record's column segment, converted by the writer thread.
Slice = tuple[Segment, int, int]
#: What the writer queues: converted single records, or a slice it converts itself.
Unit = Converted | Slice


def convert_units(units: list[Unit]) -> Converted:
    """One batch of queued units, keeping their order within each table (the writer thread
    converts the slices of segments now)."""
    converted = [_converted(u) for u in units]
    if len(converted) == 1:
        return converted[0]
    out = Converted()
    for chunk in converted:
        for table, rows in chunk.batch.items():
            out.batch.setdefault(table, []).extend(rows)
        out.rows += chunk.rows
        out.rejected.extend(chunk.rejected)
    return out


def _converted(unit: Unit) -> Converted:
    if isinstance(unit, Converted):
        return unit
    segment, start, stop = unit
    rows = segment_rows(segment, start, stop)
    return Converted({segment[0]: rows}, len(rows))


def _describe(r: ReplicaTransitionColumns | PartitionTransitionColumns) -> str:
    """A rejected bulk record, briefly (its rows may be many)."""
    return (
        f"{type(r).__name__}(to_state={r.to_state!r}, outcome={r.outcome!r}, rows={len(r.topic)}, "
        f"sequence={r.sequence}, event={r.event!r})"
    )


def queue_units(
    records: Sequence[AuditItem], slice_rows: int
) -> tuple[list[tuple[Unit, int]], list[Part], int]:
    """What ``AuditWriter.record`` queues (with each unit's row count), the parts of a compact
    journal frame (none when ``records`` has no bulk record: the frame is then the converted batch,
    as ever) and the number of rows. Single records are converted here; bulk ones only sliced."""
    if not any(isinstance(r, ReplicaTransitionColumns | PartitionTransitionColumns) for r in records):
        return [(to_batch([records]), len(records))], [], len(records)
    units: list[tuple[Unit, int]] = []
    parts: list[Part] = []
    singles: list[AuditRecord] = []
    total = 0

    def convert_singles() -> None:
        if singles:
            converted = to_batch([singles])
            units.append((converted, len(singles)))
            if converted.batch:
                parts.append(("rows", converted.batch))
            singles.clear()

    for r in records:
        if not isinstance(r, ReplicaTransitionColumns | PartitionTransitionColumns):
            singles.append(r)
            total += 1
            continue
        segment = bulk_segment(r)
        if isinstance(segment, str):  # set aside whole, as a malformed single record would be
            convert_singles()
            units.append((Converted(rejected=[(_describe(r), segment)]), len(r.topic)))
            total += len(r.topic)
            continue
        convert_singles()
        table, rows, columns = segment
        parts.append(("cols", table, rows, columns))
        for start in range(0, rows, slice_rows):
            stop = min(rows, start + slice_rows)
            units.append(((segment, start, stop), stop - start))
        total += rows
    convert_singles()
    return units, parts, total
