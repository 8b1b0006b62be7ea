"""Report queries over the audit store, returning plain rows (dicts) for the CLI, Airflow and web apps.

Each ``*_rows`` function runs one query from ``views`` with optional filters (``since_ms``, an
``operation_id``) and a row limit. ``build_report`` gathers them with totals and chart series into
one JSON-ready dict; ``render_text`` prints it as readable tables; ``html.render_html`` draws it.
A database without the audit schema, or with no rows yet, gives a report that says so; rows
missing by the controllers' sequence numbers, and a database file a writer had to recreate, are
named at the top (``gaps``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import Connection, Engine, Select, case, func, literal, select, union, union_all
from sqlalchemy.engine import URL
from sqlalchemy.exc import SQLAlchemyError

from kafka_controller.audit import gaps, views
from kafka_controller.audit.engine import create_audit_engine, redacted, translate
from kafka_controller.audit.migrate import has_schema
from kafka_controller.audit.schema import (
    controller_events,
    operations,
    partition_transitions,
    replica_transitions,
)

pt = partition_transitions
rt = replica_transitions

#: Bucket widths for "transitions over time", smallest first; the report picks the first that
#: yields at most ``MAX_BUCKETS`` bars.
BUCKETS_MS = (
    1_000,
    5_000,
    10_000,
    30_000,
    60_000,
    300_000,
    900_000,
    1_800_000,
    3_600_000,
    21_600_000,
    86_400_000,
)
MAX_BUCKETS = 60
#: Runs of missing rows the text report lists (``--json`` has up to ``gaps.MAX_LISTED``).
TEXT_GAP_RUNS = 20


@dataclass(frozen=True, slots=True)
class Section:
    key: str
    title: str
    query: views.QueryFactory
    order_by: tuple[str, ...]
    descending: bool = False


SECTIONS: tuple[Section, ...] = (
    Section(
        "unclean_elections", "Unclean leader elections", views.unclean_elections, ("timestamp_ms",), True
    ),
    Section(
        "failed_transitions",
        "Failed and invalid transitions",
        views.failed_transitions,
        ("timestamp_ms",),
        True,
    ),
    Section(
        "transitions_per_operation",
        "Transitions per operation",
        views.transitions_per_operation,
        ("started_ms",),
        True,
    ),
    Section(
        "leader_moves_per_broker", "Leader moves per broker", views.leader_moves_per_broker, ("broker_id",)
    ),
    Section(
        "failover_recovery",
        "Time to recover per controller failover",
        views.failover_recovery,
        ("controller_epoch",),
    ),
)


#: Where an operation came from, as ``summary``'s ``operations_by_source`` counts them.
OPERATION_SOURCES = ("airflow", "command_line", "listener")
SOURCE_WORDS = {
    "airflow": "from Airflow",
    "command_line": "from the command line or the API",
    "listener": "admin requests to a broker outside any operation",
}


def _plain(value: Any) -> Any:
    """JSON-ready values: PostgreSQL returns ``Decimal`` for some sums."""
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    return value


def _rows(conn: Connection, query: Select[Any], limit: int | None = None) -> list[dict[str, Any]]:
    if limit is not None:
        query = query.limit(limit)
    # str(): SQLAlchemy's quoted_name keys are a str subclass that orjson refuses
    return [{str(k): _plain(v) for k, v in r._mapping.items()} for r in conn.execute(query)]


def section_rows(
    conn: Connection,
    section: Section,
    *,
    since_ms: int | None = None,
    operation_id: str | None = None,
    limit: int | None = None,
    dry_runs: bool = False,
    cluster_id: str | None = None,
) -> tuple[list[dict[str, Any]], int]:
    """One section's rows (newest or lowest first, at most ``limit``) and how many there are in all."""
    sub = section.query(since_ms, operation_id, dry_runs, cluster_id).subquery("s")
    total = conn.execute(select(func.count()).select_from(sub)).scalar_one()
    cols = [sub.c[name].desc() if section.descending else sub.c[name] for name in section.order_by]
    return _rows(conn, select(*sub.c).order_by(*cols), limit), total


def _section_fn(key: str) -> Callable[..., list[dict[str, Any]]]:
    section = next(s for s in SECTIONS if s.key == key)

    def rows(
        conn: Connection,
        *,
        since_ms: int | None = None,
        operation_id: str | None = None,
        limit: int | None = None,
        dry_runs: bool = False,
        cluster_id: str | None = None,
    ) -> list[dict[str, Any]]:
        return section_rows(
            conn,
            section,
            since_ms=since_ms,
            operation_id=operation_id,
            limit=limit,
            dry_runs=dry_runs,
            cluster_id=cluster_id,
        )[0]

    rows.__name__ = f"{key}_rows"
    rows.__doc__ = f"{section.title}: rows as dicts (see ``views.{section.query.__name__}``)."
    return rows


unclean_elections_rows = _section_fn("unclean_elections")
failed_transitions_rows = _section_fn("failed_transitions")
transitions_per_operation_rows = _section_fn("transitions_per_operation")
leader_moves_per_broker_rows = _section_fn("leader_moves_per_broker")
failover_recovery_rows = _section_fn("failover_recovery")


def summary(
    conn: Connection,
    *,
    since_ms: int | None = None,
    operation_id: str | None = None,
    dry_runs: bool = False,
    cluster_id: str | None = None,
) -> dict[str, Any]:
    """Row counts by table and outcome, the time span covered, and how many dry-run rows the
    counts leave out (``dry_run_rows``; 0 when they are included)."""

    def part(table: Any) -> Select[Any]:
        return select(table.c.outcome, table.c.timestamp_ms).where(
            *views.transition_filters(table, since_ms, operation_id, dry_runs, cluster_id)
        )

    u = union_all(part(pt), part(rt)).subquery("u")
    by_outcome: dict[str, int] = dict(
        conn.execute(select(u.c.outcome, func.count()).group_by(u.c.outcome)).all()
    )
    span = conn.execute(select(func.min(u.c.timestamp_ms), func.max(u.c.timestamp_ms))).one()

    # one query a table: rows by their dry_run flag, under the period and operation filters only
    counts: dict[str, int] = {}
    left_out = 0
    for t, op in ((pt, operation_id), (rt, operation_id), (controller_events, None)):
        # events belong to no operation: counted over the period whatever operation is asked for
        keep_planned = dry_runs or op is not None  # one operation's rows are shown whatever it was
        by_flag = conn.execute(
            select(t.c.dry_run, func.count())
            .where(*views.transition_filters(t, since_ms, op, True, cluster_id))
            .group_by(t.c.dry_run)
        ).all()
        planned = sum(int(n) for flag, n in by_flag if flag)
        counts[str(t.name)] = sum(int(n) for flag, n in by_flag if keep_planned or not flag)
        left_out += 0 if keep_planned or operation_id is not None else planned
    op_where: list[Any] = []
    if operation_id is not None:
        op_where.append(operations.c.operation_id == operation_id)
    elif not dry_runs:
        op_where.append(operations.c.dry_run.is_(False))
    if cluster_id is not None:
        op_where.append(operations.c.cluster_id == cluster_id)
    o = operations.c
    source = case(
        (o.airflow_dag_id.is_not(None), literal("airflow")),
        (o.principal.is_not(None), literal("listener")),
        else_=literal("command_line"),
    )
    by_source = {
        str(k): int(n)
        for k, n in conn.execute(select(source, func.count()).where(*op_where).group_by(source)).all()
    }
    return {
        **counts,
        "operations": sum(by_source.values()),
        # who changed things: Airflow tasks, the CLI (or the Python API), or admin requests a broker
        # received outside any operation (Kafka clients, scripts)
        "operations_by_source": {k: by_source.get(k, 0) for k in OPERATION_SOURCES},
        **{outcome: int(by_outcome.get(outcome, 0)) for outcome in ("ok", "invalid", "failed")},
        "first_ms": _plain(span[0]),
        "last_ms": _plain(span[1]),
        "dry_run_rows": left_out,
    }


def pick_bucket_ms(first_ms: int, last_ms: int) -> int:
    span = max(last_ms - first_ms, 1)
    return next((b for b in BUCKETS_MS if span / b <= MAX_BUCKETS), BUCKETS_MS[-1])


def transitions_over_time(
    conn: Connection,
    *,
    bucket_ms: int,
    since_ms: int | None = None,
    operation_id: str | None = None,
    dry_runs: bool = False,
    cluster_id: str | None = None,
) -> list[dict[str, Any]]:
    """Transitions per time bucket (``start_ms``) and outcome, both state machines together."""

    def part(table: Any) -> Select[Any]:
        bucket = table.c.timestamp_ms // bucket_ms * bucket_ms
        return select(bucket.label("start_ms"), table.c.outcome).where(
            *views.transition_filters(table, since_ms, operation_id, dry_runs, cluster_id)
        )

    u = union_all(part(pt), part(rt)).subquery("u")
    points: dict[int, dict[str, Any]] = {}
    for start, outcome, n in conn.execute(
        select(u.c.start_ms, u.c.outcome, func.count())
        .group_by(u.c.start_ms, u.c.outcome)
        .order_by(u.c.start_ms)
    ):
        point = points.setdefault(int(start), {"start_ms": int(start), "ok": 0, "invalid": 0, "failed": 0})
        point[outcome] = int(n)
    return list(points.values())


def leaders_per_broker(conn: Connection, cluster_id: str | None = None) -> list[dict[str, Any]]:
    """How many partitions each broker leads, by each partition's latest successful transition.

    Partitions whose latest transition left them without a leader (offline) or deleted are left out,
    and so is what dry runs planned: this is the cluster as it is. A partition is a topic and
    partition of one cluster: two clusters' ``orders-0`` are two partitions.
    """
    where = [pt.c.outcome == "ok", pt.c.leader_after.is_not(None), pt.c.dry_run.is_(False)]
    if cluster_id is not None:
        where.append(pt.c.cluster_id == cluster_id)
    ranked = (
        select(
            pt.c.leader_after,
            pt.c.to_state,
            func.row_number()
            .over(
                partition_by=(pt.c.cluster_id, pt.c.topic, pt.c.partition),
                order_by=(pt.c.timestamp_ms.desc(), pt.c.id.desc()),
            )
            .label("rn"),
        )
        .where(*where)
        .subquery("r")
    )
    query = (
        select(ranked.c.leader_after.label("broker_id"), func.count().label("partitions"))
        .where(ranked.c.rn == 1, ranked.c.leader_after >= 0, ranked.c.to_state != "NonExistentPartition")
        .group_by(ranked.c.leader_after)
        .order_by(ranked.c.leader_after)
    )
    return _rows(conn, query)


def clusters(conn: Connection) -> list[str | None]:
    """The cluster ids the store holds controller events or operations of (None: rows from before
    the column, or from writers that did not know their cluster), so a reader of one knows there
    are others. Both tables are small; the transition tables are not scanned for this."""
    u = union(select(controller_events.c.cluster_id), select(operations.c.cluster_id)).subquery("c")
    found = conn.execute(select(u.c.cluster_id)).scalars().all()
    return sorted(found, key=lambda c: (c is not None, c or ""))


def build_report(
    target: str | URL | Engine,
    *,
    since_ms: int | None = None,
    operation_id: str | None = None,
    limit: int = 100,
    now_ms: int | None = None,
    dry_runs: bool = False,
    cluster_id: str | None = None,
) -> dict[str, Any]:
    """The whole report as a JSON-ready dict. Raises ``AuditStoreError`` / ``InvalidArgumentError``.

    What dry runs planned is left out unless ``dry_runs`` (or ``operation_id`` names one). With
    ``cluster_id``, only that cluster's rows (one store may serve several); the report lists the
    clusters the store holds either way (``clusters``)."""
    engine = target if isinstance(target, Engine) else create_audit_engine(target, must_exist=True)
    report: dict[str, Any] = {
        "database": redacted(engine.url),
        "generated_ms": now_ms if now_ms is not None else int(datetime.now(UTC).timestamp() * 1000),
        "filters": {
            "since_ms": since_ms,
            "operation_id": operation_id,
            "dry_runs": dry_runs,
            "cluster_id": cluster_id,
        },
        "limit": limit,
    }
    try:
        with engine.connect() as conn:
            if not has_schema(conn):
                return {**report, "empty": True, "summary": {}, "sections": {}, "charts": {}, "gaps": {}}
            replaced, replaced_ms = gaps.store_replacements(conn, cluster_id)
            report["gaps"] = {
                **gaps.summarize(gaps.sequence_gaps(conn, cluster_id)),
                "store_replaced": replaced,
                "store_replaced_ms": replaced_ms,
            }
            report["clusters"] = clusters(conn)
            report["summary"] = summary(
                conn, since_ms=since_ms, operation_id=operation_id, dry_runs=dry_runs, cluster_id=cluster_id
            )
            report["sections"] = {}
            for section in SECTIONS:
                rows, total = section_rows(
                    conn,
                    section,
                    since_ms=since_ms,
                    operation_id=operation_id,
                    limit=limit,
                    dry_runs=dry_runs,
                    cluster_id=cluster_id,
                )
                report["sections"][section.key] = {"title": section.title, "total": total, "rows": rows}
            s = report["summary"]
            report["empty"] = not any(
                s[k]
                for k in ("partition_transitions", "replica_transitions", "controller_events", "operations")
            )
            bucket = pick_bucket_ms(s["first_ms"] or 0, s["last_ms"] or 0)
            report["charts"] = {
                "bucket_ms": bucket,
                "transitions_over_time": transitions_over_time(
                    conn,
                    bucket_ms=bucket,
                    since_ms=since_ms,
                    operation_id=operation_id,
                    dry_runs=dry_runs,
                    cluster_id=cluster_id,
                ),
                "leaders_per_broker": leaders_per_broker(conn, cluster_id),
            }
    except SQLAlchemyError as e:
        raise translate(e, f"cannot read the audit database {redacted(engine.url)}") from None
    finally:
        if engine is not target:
            engine.dispose()
    return report


# -- text ---------------------------------------------------------------------------------------


def format_ms(ms: int | float | None) -> str:
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def format_value(column: str, value: Any) -> str:
    if value is None:
        return "-"
    if column.endswith("_ms") and column not in ("duration_ms", "time_to_recover_ms"):
        return format_ms(value)
    if isinstance(value, float):
        return f"{value:.1f}"
    return str(value)


def format_table(rows: list[dict[str, Any]], columns: list[str] | None = None) -> str:
    if not rows:
        return "  (none)"
    columns = columns or list(rows[0])
    cells = [[format_value(c, r.get(c)) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    lines = ["  " + "  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip()]
    lines.append("  " + "  ".join("-" * w for w in widths))
    lines.extend(
        "  " + "  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip() for row in cells
    )
    return "\n".join(lines)


def _missing_lines(found: dict[str, Any]) -> list[str]:
    """What the store is missing, for the top of the text report (nothing when nothing is)."""
    out = []
    if found.get("store_replaced"):
        out.append(
            f"Missing rows: {found['store_replaced']} time(s) a writer found the audit database file "
            f"deleted or replaced while it had it open (last {format_ms(found['store_replaced_ms'])}; "
            "each writer says so once); what was written to it before then went with the old file"
        )
    if found.get("runs"):
        out.append(
            f"Missing rows: at least {found['missing_rows']} in {found['runs']} run(s), "
            "by the controllers' sequence numbers (all time: --since and --operation do not narrow it):"
        )
        out += [f"  {gaps.describe(g)}" for g in found["shown"][:TEXT_GAP_RUNS]]
        if found["runs"] > TEXT_GAP_RUNS:
            out.append(f"  ... and {found['runs'] - TEXT_GAP_RUNS} more runs (--json lists them)")
    return [*out, ""] if out else []


def _sources(summary: dict[str, Any]) -> str:
    by = summary.get("operations_by_source") or {}
    parts = [f"{by[k]} {SOURCE_WORDS[k]}" for k in OPERATION_SOURCES if by.get(k)]
    return f" ({', '.join(parts)})" if parts else ""


def render_text(report: dict[str, Any]) -> str:
    head = f"Audit report for {report['database']}"
    filters = report["filters"]
    if filters["since_ms"] is not None:
        head += f" since {format_ms(filters['since_ms'])}"
    if filters["operation_id"]:
        head += f" for operation {filters['operation_id']}"
    if filters.get("cluster_id"):
        head += f" for cluster {filters['cluster_id']}"
    if report["empty"]:
        return f"{head}\n\nNothing recorded yet: the audit store has no transitions, events or operations.\n"
    s = report["summary"]
    out = [head, "", *_missing_lines(report.get("gaps") or {})]
    known = [c for c in report.get("clusters") or [] if c is not None]
    if len(known) > 1 and not filters.get("cluster_id"):
        out.append(
            f"This store holds {len(known)} clusters ({', '.join(known)}): "
            "the counts below are all of them together; --cluster-id ID for one"
        )
    out += [
        f"Transitions: {s['partition_transitions']} partition, {s['replica_transitions']} replica "
        f"({s['ok']} ok, {s['invalid']} invalid, {s['failed']} failed); "
        f"{s['controller_events']} controller events; {s['operations']} operations{_sources(s)}",
        f"Covering {format_ms(s['first_ms'])} .. {format_ms(s['last_ms'])}",
    ]
    if filters.get("dry_runs"):
        out.append("Dry runs included: what they planned is counted with what happened")
    elif s.get("dry_run_rows"):
        out.append(f"Left out: {s['dry_run_rows']} rows planned by dry runs (--dry-runs to include them)")
    for section in SECTIONS:
        data = report["sections"][section.key]
        shown = len(data["rows"])
        more = f" (showing {shown} of {data['total']})" if shown < data["total"] else ""
        out += ["", f"{data['title']}: {data['total']}{more}", format_table(data["rows"])]
    leaders = report["charts"]["leaders_per_broker"]
    out += ["", "Leaders per broker (latest known leader of each partition)", format_table(leaders)]
    return "\n".join(out) + "\n"
