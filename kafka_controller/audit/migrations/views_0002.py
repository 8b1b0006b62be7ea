"""The report views as revision 0002 created them, frozen: 0002 must keep building these whatever
``kafka_controller.audit.views`` (the current definitions, created by later revisions) becomes.

A copy on purpose: migrations replay history, so they cannot import code that moves on.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import Select, case, func, literal, null, or_, select, union_all
from sqlalchemy.engine import Dialect
from sqlalchemy.sql.elements import ColumnElement

from kafka_controller.audit.schema import (
    controller_events,
    operations,
    partition_transitions,
    replica_transitions,
)

pt = partition_transitions
rt = replica_transitions
ev = controller_events
NO_LEADER = -1


def transition_filters(
    table: object, since_ms: int | None, operation_id: str | None
) -> list[ColumnElement[bool]]:
    """The report filters as WHERE terms on a transition table."""
    cols = table.c  # type: ignore[attr-defined]
    out: list[ColumnElement[bool]] = []
    if since_ms is not None:
        out.append(cols.timestamp_ms >= since_ms)
    if operation_id is not None:
        out.append(cols.operation_id == operation_id)
    return out


def unclean_elections(
    since_ms: int | None = None, operation_id: str | None = None
) -> Select[tuple[object, ...]]:
    """Every attempted unclean leader election, whatever its outcome."""
    return select(
        pt.c.timestamp_ms,
        pt.c.controller_id,
        pt.c.controller_epoch,
        pt.c.event,
        pt.c.operation_id,
        pt.c.topic,
        pt.c.partition,
        pt.c.leader_before,
        pt.c.leader_after,
        pt.c.isr_before,
        pt.c.isr_after,
        pt.c.leader_epoch_after,
        pt.c.election_strategy,
        pt.c.outcome,
        pt.c.error,
    ).where(pt.c.unclean.is_(True), *transition_filters(pt, since_ms, operation_id))


def failed_transitions(
    since_ms: int | None = None, operation_id: str | None = None
) -> Select[tuple[object, ...]]:
    """Invalid and failed transitions of both state machines, as one list."""

    def part(table: object, kind: str, replica: ColumnElement[Any]) -> Select[tuple[object, ...]]:
        c = table.c  # type: ignore[attr-defined]
        return select(
            literal(kind).label("machine"),
            c.timestamp_ms,
            c.controller_id,
            c.controller_epoch,
            c.event,
            c.operation_id,
            c.topic,
            c.partition,
            replica.label("replica"),
            c.from_state,
            c.to_state,
            c.outcome,
            c.error,
        ).where(c.outcome != "ok", *transition_filters(table, since_ms, operation_id))

    u = union_all(part(pt, "partition", null()), part(rt, "replica", rt.c.replica)).subquery("f")
    return select(*u.c)


def transitions_per_operation(
    since_ms: int | None = None, operation_id: str | None = None
) -> Select[tuple[object, ...]]:
    """Each operation with how many transitions it caused, by outcome (operations without any show 0).

    With ``since_ms``, counts only transitions since then, and lists operations that started since
    then or caused transitions since then.
    """

    def counts(table: object, kind: str) -> Select[tuple[object, ...]]:
        c = table.c  # type: ignore[attr-defined]
        return select(
            c.operation_id,
            literal(kind).label("machine"),
            c.outcome,
            c.timestamp_ms,
        ).where(c.operation_id.is_not(None), *transition_filters(table, since_ms, operation_id))

    t = union_all(counts(pt, "partition"), counts(rt, "replica")).subquery("t")
    agg = (
        select(
            t.c.operation_id,
            func.sum(case((t.c.machine == "partition", 1), else_=0)).label("partition_transitions"),
            func.sum(case((t.c.machine == "replica", 1), else_=0)).label("replica_transitions"),
            func.sum(case((t.c.outcome == "ok", 1), else_=0)).label("ok"),
            func.sum(case((t.c.outcome == "invalid", 1), else_=0)).label("invalid"),
            func.sum(case((t.c.outcome == "failed", 1), else_=0)).label("failed"),
            func.min(t.c.timestamp_ms).label("first_ms"),
            func.max(t.c.timestamp_ms).label("last_ms"),
        )
        .group_by(t.c.operation_id)
        .subquery("agg")
    )
    o = operations
    where: list[ColumnElement[bool]] = []
    if since_ms is not None:
        where.append(or_(o.c.started_ms >= since_ms, agg.c.operation_id.is_not(None)))
    if operation_id is not None:
        where.append(o.c.operation_id == operation_id)
    return (
        select(
            o.c.operation_id,
            o.c.kind,
            o.c.requester,
            o.c.status,
            o.c.dry_run,
            o.c.started_ms,
            o.c.finished_ms,
            *(
                func.coalesce(agg.c[name], 0).label(name)
                for name in ("partition_transitions", "replica_transitions", "ok", "invalid", "failed")
            ),
            agg.c.first_ms,
            agg.c.last_ms,
        )
        .select_from(o.outerjoin(agg, agg.c.operation_id == o.c.operation_id))
        .where(*where)
    )


def leader_moves_per_broker(
    since_ms: int | None = None, operation_id: str | None = None
) -> Select[tuple[object, ...]]:
    """Leaderships each broker gained and lost through successful partition transitions."""
    moved = [
        pt.c.outcome == "ok",
        pt.c.leader_before.is_distinct_from(pt.c.leader_after),
        *transition_filters(pt, since_ms, operation_id),
    ]
    gained = select(pt.c.leader_after.label("broker_id"), literal(1).label("g"), literal(0).label("l")).where(
        *moved, pt.c.leader_after.is_not(None), pt.c.leader_after != NO_LEADER
    )
    lost = select(pt.c.leader_before.label("broker_id"), literal(0).label("g"), literal(1).label("l")).where(
        *moved, pt.c.leader_before.is_not(None), pt.c.leader_before != NO_LEADER
    )
    u = union_all(gained, lost).subquery("m")
    return select(
        u.c.broker_id,
        func.sum(u.c.g).label("leaderships_gained"),
        func.sum(u.c.l).label("leaderships_lost"),
    ).group_by(u.c.broker_id)


def failover_recovery(
    since_ms: int | None = None, operation_id: str | None = None
) -> Select[tuple[object, ...]]:
    """Per controller failover: how long it took, and the leaderless gap since the previous controller.

    ``previous_end_ms`` is when the previous epoch's controller was last heard of resigning or moving;
    ``time_to_recover_ms`` runs from then to the end of this failover, or is the failover's own
    duration when the previous controller died without a word (a hard kill).
    """
    prev = ev.alias("prev")
    previous_end = (
        select(func.max(prev.c.started_ms + prev.c.duration_ms))
        .where(prev.c.controller_epoch == ev.c.controller_epoch - 1, prev.c.kind.in_(("resigned", "moved")))
        .scalar_subquery()
    )
    where = [ev.c.kind == "failover"]
    if since_ms is not None:
        where.append(ev.c.started_ms >= since_ms)
    del operation_id  # failovers are not caused by operations; the argument keeps one signature
    f = (
        select(
            ev.c.controller_epoch,
            ev.c.broker_id,
            ev.c.started_ms,
            ev.c.duration_ms,
            previous_end.label("previous_end_ms"),
        )
        .where(*where)
        .subquery("f")
    )
    return select(
        *f.c,
        case(
            (f.c.previous_end_ms <= f.c.started_ms, f.c.started_ms + f.c.duration_ms - f.c.previous_end_ms),
            else_=f.c.duration_ms,
        ).label("time_to_recover_ms"),
    )


QueryFactory = Callable[[int | None, str | None], Select[tuple[object, ...]]]

#: View name -> query, in report order.
VIEWS: dict[str, QueryFactory] = {
    "v_unclean_elections": unclean_elections,
    "v_failed_transitions": failed_transitions,
    "v_transitions_per_operation": transitions_per_operation,
    "v_leader_moves_per_broker": leader_moves_per_broker,
    "v_failover_recovery": failover_recovery,
}


def create_view_sql(name: str, dialect: Dialect) -> str:
    query = VIEWS[name](None, None)
    body = query.compile(dialect=dialect, compile_kwargs={"literal_binds": True})
    return f"CREATE VIEW {name} AS\n{body}"


def drop_view_sql(name: str) -> str:
    return f"DROP VIEW IF EXISTS {name}"
