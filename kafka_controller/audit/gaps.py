"""Rows missing from the audit store, found from the controllers' sequence numbers.

Every controller process numbers what it records (partition and replica transitions and its
controller events) 1, 2, 3, ... in one sequence (``controller.auditing.ControllerAuditSink``), so
the store can tell when rows are missing without trusting clocks:

* *within* a controller epoch the numbers are consecutive: a hole between the first and the last
  is that many rows lost (a poison row set aside in ``rejected.jsonl``, a store that lost writes);
* an epoch's first number continues its process's previous epoch (the process's numbering goes on
  across its elections), or is 1 (a restarted process starts again). Anything else means rows are
  missing *before* it, e.g. the database file was deleted or replaced and only the rows recorded
  since reached the new one. Which of the two it was cannot be told apart from the numbers alone,
  so the smaller count is reported (“at least”).

Rows recorded while a broker held no epoch (epoch 0, e.g. the ``moved`` event after a resignation)
take numbers of the same sequence: they are counted as filling the holes they fall in. Dry-run rows
and rows without a number are left out. Missing rows at the very end of a sequence cannot be seen.

The writer also leaves a ``controller_events`` row of kind ``STORE_REPLACED`` in a database it
recreated after its file was deleted or replaced (``writer``): with no transition since, that row
is what tells a reader the store is not simply new.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import asdict, dataclass
from typing import Any

from sqlalchemy import Connection, func, literal, select, union_all

from kafka_controller.audit.schema import controller_events, partition_transitions, replica_transitions

#: ``controller_events.kind`` of the row a writer leaves in a database file it had to recreate.
STORE_REPLACED = "audit_store_replaced"
#: The most epoch-0 numbers read to fill holes with (they are rare: one per resignation or so).
MAX_EPOCHLESS_ROWS = 100_000
#: The most runs of missing rows a report lists (the totals count them all).
MAX_LISTED = 1_000


@dataclass(frozen=True, slots=True)
class Gap:
    """``missing`` rows of controller ``controller_id``'s ``controller_epoch``. ``kind`` "within":
    holes among its numbers ``first``..``last``; "before": at least that many before its first
    number ``last`` (``first`` is the previous epoch's last number when the count assumes the same
    process went on, else None)."""

    cluster_id: str | None
    controller_id: int
    controller_epoch: int
    kind: str
    missing: int
    first: int | None
    last: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _numbered(table: Any, controller: Any) -> Any:
    cluster = table.c["cluster_id"] if "cluster_id" in table.c else literal(None)
    return select(
        func.coalesce(cluster, "").label("cluster"),
        controller.label("cid"),
        table.c.controller_epoch.label("epoch"),
        table.c.sequence.label("seq"),
    ).where(table.c.sequence.is_not(None), table.c.dry_run.is_(False))


_TABLES = (
    (partition_transitions, partition_transitions.c.controller_id),
    (replica_transitions, replica_transitions.c.controller_id),
    (controller_events, controller_events.c.broker_id),
)


def sequence_gaps(conn: Connection, cluster_id: str | None = None) -> list[Gap]:
    """Every run of missing rows the sequence numbers show, by cluster, controller and epoch (only
    ``cluster_id``'s when given)."""
    u = union_all(*(_numbered(table, controller) for table, controller in _TABLES)).subquery("u")
    # One GROUP BY a table (cheaper than one over their union), merged here: a number is
    # unique within a table, and two tables never share one (the controller's single counter).
    merged: dict[tuple[str, int, int], list[int]] = {}
    for table, controller in _TABLES:
        one = _numbered(table, controller).subquery("n")
        for cluster, cid, epoch, low, high, count in conn.execute(
            select(
                one.c.cluster, one.c.cid, one.c.epoch, func.min(one.c.seq), func.max(one.c.seq), func.count()
            )
            .where(one.c.epoch > 0)
            .group_by(one.c.cluster, one.c.cid, one.c.epoch)
        ):
            key = (str(cluster), int(cid), int(epoch))
            seen = merged.get(key)
            if seen is None:
                merged[key] = [int(low), int(high), int(count)]
            else:
                seen[0], seen[1], seen[2] = (
                    min(seen[0], int(low)),
                    max(seen[1], int(high)),
                    seen[2] + int(count),
                )
    fillers: dict[tuple[str, int], list[int]] = {}
    for cluster, cid, seq in conn.execute(
        select(u.c.cluster, u.c.cid, u.c.seq)
        .where(u.c.epoch <= 0)
        .order_by(u.c.seq)
        .limit(MAX_EPOCHLESS_ROWS)
    ):
        fillers.setdefault((str(cluster), int(cid)), []).append(int(seq))

    gaps: list[Gap] = []
    previous: dict[tuple[str, int], int] = {}  # the last number of a controller's previous epoch
    for (cluster, cid, epoch), (low, high, count) in sorted(merged.items()):
        who = (cluster, cid)
        spare = fillers.get(who, [])

        def filled(first: int, last: int, spare: list[int] = spare) -> int:
            return bisect_right(spare, last) - bisect_left(spare, first)

        # a restarted process numbers from 1; the same process goes on from its previous epoch
        candidates = [low - 1 - filled(1, low - 1)]
        last = previous.get(who)
        if last is not None and low > last:
            candidates.append(low - last - 1 - filled(last + 1, low - 1))
        head = min(candidates)
        named = cluster or None  # '' stands for rows without a cluster
        if head > 0:
            after = last if len(candidates) > 1 and head == candidates[1] else None
            gaps.append(Gap(named, cid, epoch, "before", head, after, low))
        inside = (high - low + 1) - count
        if inside > 0:
            gaps.append(Gap(named, cid, epoch, "within", inside, low, high))
        previous[who] = high
    return gaps if cluster_id is None else [g for g in gaps if g.cluster_id == cluster_id]


def store_replacements(conn: Connection, cluster_id: str | None = None) -> tuple[int, int | None]:
    """How many times a writer found its database file deleted or replaced, and the last time
    (only ``cluster_id``'s writers when given: the loader stamps the row as any other)."""
    t = controller_events
    where = [t.c.kind == STORE_REPLACED]
    if cluster_id is not None and "cluster_id" in t.c:
        where.append(t.c["cluster_id"] == cluster_id)
    n, last = conn.execute(select(func.count(), func.max(t.c.started_ms)).where(*where)).one()
    return int(n), None if last is None else int(last)


def summarize(gaps: list[Gap], limit: int = MAX_LISTED) -> dict[str, Any]:
    """The report's ``gaps`` entry: how many rows are missing in all, and the first runs."""
    return {
        "missing_rows": sum(g.missing for g in gaps),
        "runs": len(gaps),
        "shown": [g.as_dict() for g in gaps[:limit]],
    }


def describe(gap: dict[str, Any]) -> str:
    """One line for a run of missing rows (a ``Gap.as_dict``)."""
    where = f"controller {gap['controller_id']} epoch {gap['controller_epoch']}"
    if gap.get("cluster_id"):
        where = f"cluster {gap['cluster_id']} {where}"
    n, first, last = gap["missing"], gap["first"], gap["last"]
    if gap["kind"] == "within":
        return f"{n} rows missing among sequences {first}..{last} of {where}"
    since = f" (after {first}, its previous epoch's last)" if first is not None else ""
    return f"at least {n} rows missing before sequence {last} of {where}{since}"
