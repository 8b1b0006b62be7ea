"""Report queries, written once: as filterable ``Select`` objects for ``reports`` and, unfiltered, as
the database views ``v_*`` that revision 0003 creates (for SQL users, Airflow and Spark).

Each query takes an optional ``cluster_id``: with it, only that cluster's rows (ZooKeeper's
``/cluster/id``, stamped by the writers); without it, every row, as before there were several
clusters in one store. The views are built without it.

Every query leaves out what dry runs planned (``dry_run`` rows, dry-run operations) unless asked
(``dry_runs=True``) or filtered to one operation, whose rows are then shown whatever it was: a
dry run's plan is not history, but its own page should show it.

The latest revision imports these definitions, so a revision that changes a view must first freeze
the old definitions for the revision that created them (as ``migrations/views_0002.py`` does):
otherwise an upgrade from an older revision would build the new view before its columns exist.
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
    table: object,
    since_ms: int | None,
    operation_id: str | None,
    dry_runs: bool = False,
    cluster_id: str | None = None,
) -> list[ColumnElement[bool]]:
    """The report filters as WHERE terms on a transition table (or on ``controller_events``, whose
    time column is ``started_ms``, or on ``operations``)."""
    cols = table.c  # type: ignore[attr-defined]
    out: list[ColumnElement[bool]] = []
    if cluster_id is not None:
        out.append(cols.cluster_id == cluster_id)
    if since_ms is not None:
        out.append((cols.timestamp_ms if "timestamp_ms" in cols else cols.started_ms) >= since_ms)
    if operation_id is not None:
        out.append(cols.operation_id == operation_id)
    elif not dry_runs:
        out.append(cols.dry_run.is_(False))
    return out


def unclean_elections(
    since_ms: int | None = None,
    operation_id: str | None = None,
    dry_runs: bool = False,
    cluster_id: str | None = None,
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
    ).where(pt.c.unclean.is_(True), *transition_filters(pt, since_ms, operation_id, dry_runs, cluster_id))


def failed_transitions(
    since_ms: int | None = None,
    operation_id: str | None = None,
    dry_runs: bool = False,
    cluster_id: str | None = None,
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
        ).where(c.outcome != "ok", *transition_filters(table, since_ms, operation_id, dry_runs, cluster_id))

    u = union_all(part(pt, "partition", null()), part(rt, "replica", rt.c.replica)).subquery("f")
    return select(*u.c)


def transitions_per_operation(
    since_ms: int | None = None,
    operation_id: str | None = None,
    dry_runs: bool = False,
    cluster_id: str | None = None,
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
        ).where(
            c.operation_id.is_not(None),
            *transition_filters(table, since_ms, operation_id, dry_runs, cluster_id),
        )

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
    elif not dry_runs:
        where.append(o.c.dry_run.is_(False))
    if cluster_id is not None:
        where.append(o.c.cluster_id == cluster_id)
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
    since_ms: int | None = None,
    operation_id: str | None = None,
    dry_runs: bool = False,
    cluster_id: str | None = None,
) -> Select[tuple[object, ...]]:
    """Leaderships each broker gained and lost through successful partition transitions."""
    moved = [
        pt.c.outcome == "ok",
        pt.c.leader_before.is_distinct_from(pt.c.leader_after),
        *transition_filters(pt, since_ms, operation_id, dry_runs, cluster_id),
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


def _least(a: ColumnElement[Any], b: ColumnElement[Any]) -> ColumnElement[Any]:
    """The smaller of two nullable values, NULL only if both are (SQLite's ``min(a, b)`` is NULL
    when either is, and it has no ``LEAST``)."""
    return case((a.is_(None), b), (b.is_(None), a), (a <= b, a), else_=b)


def failover_recovery(
    since_ms: int | None = None,
    operation_id: str | None = None,
    dry_runs: bool = False,
    cluster_id: str | None = None,
) -> Select[tuple[object, ...]]:
    """Per controller failover: the outage it ended, from the loss of the previous controller to
    every partition led again (what an SRE saw), beside the failover's own duration.

    ``lost_ms`` is the earliest sign of the loss the store holds: a drill's record of the kill it
    caused (a ``lost`` event of the previous epoch; ``drill``), the previous controller's resignation or move
    (the end of its ``resigned``/``moved`` event), or when this controller saw ``/controller`` go
    (the failover's own ``lost_ms``); ``lost_via`` says which. ``recovered_ms`` is when the last
    partition that could be led was led (for rows recorded before revision 0003, the failover's
    end; partitions left without a live replica are counted in the failover's detail).
    ``time_to_recover_ms`` runs from ``lost_ms`` to ``recovered_ms``, or from the election when no
    loss is known (a cluster's first controller).
    """
    prev = ev.alias("prev")
    same_kind = [prev.c.controller_epoch == ev.c.controller_epoch - 1, prev.c.dry_run.is_(False)]
    if cluster_id is not None:  # the previous epoch of this cluster's controller, not another's
        same_kind.append(prev.c.cluster_id == cluster_id)
    killed = select(func.min(prev.c.started_ms)).where(*same_kind, prev.c.kind == "lost").scalar_subquery()
    stepped_down = (
        select(func.max(prev.c.started_ms + prev.c.duration_ms))
        .where(*same_kind, prev.c.kind.in_(("resigned", "moved")))
        .scalar_subquery()
    )
    where = [ev.c.kind == "failover", *transition_filters(ev, since_ms, None, dry_runs, cluster_id)]
    del operation_id  # failovers are not caused by operations; the argument keeps one signature
    f = (
        select(
            ev.c.controller_epoch,
            ev.c.broker_id,
            ev.c.previous_broker_id,
            ev.c.started_ms,
            ev.c.duration_ms,
            ev.c.offline_partitions,
            ev.c.first_offline_ms,
            case(
                (ev.c.offline_partitions.is_(None), ev.c.started_ms + ev.c.duration_ms),
                else_=ev.c.recovered_ms,
            ).label("recovered_ms"),
            killed.label("killed_ms"),
            stepped_down.label("stepped_down_ms"),
            ev.c.lost_ms.label("seen_lost_ms"),
        )
        .where(*where)
        .subquery("f")
    )

    def before_start(col: ColumnElement[Any]) -> ColumnElement[Any]:
        return case((col <= f.c.started_ms, col), else_=null())

    killed_ms, stepped_ms = before_start(f.c.killed_ms), before_start(f.c.stepped_down_ms)
    lost = _least(_least(killed_ms, stepped_ms), f.c.seen_lost_ms)
    g = (
        select(
            *(c for c in f.c if c.name not in ("killed_ms", "stepped_down_ms", "seen_lost_ms")),
            lost.label("lost_ms"),
            case(
                (lost.is_(None), null()),
                (lost == killed_ms, literal("drill")),
                (lost == stepped_ms, literal("resignation")),
                else_=literal("/controller deleted"),
            ).label("lost_via"),
        )
    ).subquery("g")
    return select(
        g.c.controller_epoch,
        g.c.broker_id,
        g.c.previous_broker_id,
        g.c.lost_ms,
        g.c.lost_via,
        g.c.started_ms,
        g.c.duration_ms,
        g.c.offline_partitions,
        g.c.first_offline_ms,
        g.c.recovered_ms,
        (g.c.recovered_ms - func.coalesce(g.c.lost_ms, g.c.started_ms)).label("time_to_recover_ms"),
    )


QueryFactory = Callable[[int | None, str | None, bool, str | None], Select[tuple[object, ...]]]

#: View name -> query, in report order.
VIEWS: dict[str, QueryFactory] = {
    "v_unclean_elections": unclean_elections,
    "v_failed_transitions": failed_transitions,
    "v_transitions_per_operation": transitions_per_operation,
    "v_leader_moves_per_broker": leader_moves_per_broker,
    "v_failover_recovery": failover_recovery,
}


def create_view_sql(name: str, dialect: Dialect) -> str:
    query = VIEWS[name](None, None, False, None)
    body = query.compile(dialect=dialect, compile_kwargs={"literal_binds": True})
    return f"CREATE VIEW {name} AS\n{body}"


def drop_view_sql(name: str) -> str:
    return f"DROP VIEW IF EXISTS {name}"
