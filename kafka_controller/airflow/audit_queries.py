"""Read-side queries the operators, the listener and the web app share (plain dict rows).

``audit.reports`` aggregates; these return the rows behind the aggregates: operations, the
transitions one operation caused, reconciliation runs and findings. Every query is bounded by a
``limit`` and uses the indexes the schema has (``started_ms``, ``operation_id``, ``run_id``).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, Executable, select, update
from sqlalchemy.exc import SQLAlchemyError

from kafka_controller.audit.engine import translate
from kafka_controller.audit.migrate import has_schema
from kafka_controller.audit.schema import (
    OPERATION_RUNNING,
    operations,
    partition_transitions,
    reconciliation_findings,
    reconciliation_runs,
    replica_transitions,
)

MAX_LIMIT = 10_000


def _limit(limit: int) -> int:
    return max(1, min(int(limit), MAX_LIMIT))


def _rows(engine: Engine, query: Executable) -> list[dict[str, Any]]:
    try:
        with engine.connect() as conn:
            if not has_schema(conn):
                return []
            return [{str(k): v for k, v in r._mapping.items()} for r in conn.execute(query)]
    except SQLAlchemyError as e:
        raise translate(e, "cannot read the audit store") from None


def list_operations(
    engine: Engine,
    *,
    limit: int = 100,
    since_ms: int | None = None,
    kind: str | None = None,
    dag_id: str | None = None,
    dry_runs: bool = False,
    cluster_id: str | None = None,
) -> list[dict[str, Any]]:
    """Newest first; dry runs only when asked for (they planned, they did not act); with
    ``cluster_id``, only that cluster's (a store may serve several)."""
    q = select(operations).order_by(operations.c.started_ms.desc()).limit(_limit(limit))
    if not dry_runs:
        q = q.where(operations.c.dry_run.is_(False))
    if since_ms is not None:
        q = q.where(operations.c.started_ms >= since_ms)
    if kind:
        q = q.where(operations.c.kind == kind)
    if dag_id:
        q = q.where(operations.c.airflow_dag_id == dag_id)
    if cluster_id:
        q = q.where(operations.c.cluster_id == cluster_id)
    return _rows(engine, q)


def get_operation(engine: Engine, operation_id: str) -> dict[str, Any] | None:
    rows = _rows(engine, select(operations).where(operations.c.operation_id == operation_id))
    return rows[0] if rows else None


def operation_transitions(engine: Engine, operation_id: str, *, limit: int = 1000) -> list[dict[str, Any]]:
    """Partition transitions then replica transitions (``kind`` says which), each in insertion order."""
    out: list[dict[str, Any]] = []
    for kind, table in (("partition", partition_transitions), ("replica", replica_transitions)):
        q = (
            select(table)
            .where(table.c.operation_id == operation_id)
            .order_by(table.c.id)
            .limit(_limit(limit))
        )
        out += [{"kind": kind, **r} for r in _rows(engine, q)]
    return out[: _limit(limit)]


def transitions_between(
    engine: Engine, start_ms: int, end_ms: int, *, to_state: str | None = None
) -> list[dict[str, Any]]:
    """Partition transitions in a time window (e.g. to check nothing went offline during a restart)."""
    t = partition_transitions
    q = (
        select(t)
        .where(t.c.timestamp_ms >= start_ms, t.c.timestamp_ms <= end_ms)
        .order_by(t.c.id)
        .limit(MAX_LIMIT)
    )
    if to_state:
        q = q.where(t.c.to_state == to_state)
    return _rows(engine, q)


def reconciliation_runs_rows(engine: Engine, *, limit: int = 50) -> list[dict[str, Any]]:
    return _rows(
        engine,
        select(reconciliation_runs).order_by(reconciliation_runs.c.started_ms.desc()).limit(_limit(limit)),
    )


def latest_completed_run(
    engine: Engine, cluster_id: str | None = None
) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """The latest run that completed, and the runs started after it that did not (failed,
    interrupted or still running): a failed last run must not hide the findings before it. With
    ``cluster_id``, that cluster's runs only (another cluster's latest run says nothing of it)."""
    r = reconciliation_runs
    mine = [r.c.cluster_id == cluster_id] if cluster_id else []
    done = _rows(
        engine,
        select(r).where(r.c.status == "succeeded", *mine).order_by(r.c.started_ms.desc()).limit(1),
    )
    latest = done[0] if done else None
    later = select(r).where(r.c.status != "succeeded", *mine).order_by(r.c.started_ms.desc()).limit(MAX_LIMIT)
    if latest is not None:
        later = later.where(r.c.started_ms > latest["started_ms"])
    return latest, _rows(engine, later)


def reconciliation_findings_rows(
    engine: Engine, *, run_id: str | None = None, limit: int = 1000
) -> list[dict[str, Any]]:
    """Findings of one run, or of the latest completed run when ``run_id`` is None."""
    if run_id is None:
        latest, _ = latest_completed_run(engine)
        if latest is None:
            return []
        run_id = latest["run_id"]
    f = reconciliation_findings
    q = select(f).where(f.c.run_id == run_id).order_by(f.c.id).limit(_limit(limit))
    return _rows(engine, q)


def fail_running_operations(
    engine: Engine, dag_id: str, run_id: str, task_id: str, error: str, now_ms: int
) -> int:
    """Finish as ``failed`` the operations a task left running (it crashed or was killed before it
    could finish them); returns how many."""
    o = operations
    try:
        with engine.begin() as conn:
            if not has_schema(conn):
                return 0
            result = conn.execute(
                update(o)
                .where(
                    o.c.airflow_dag_id == dag_id,
                    o.c.airflow_run_id == run_id,
                    o.c.airflow_task_id == task_id,
                    o.c.status == OPERATION_RUNNING,
                )
                .values(status="failed", error=error, finished_ms=now_ms)
            )
            return int(result.rowcount or 0)
    except SQLAlchemyError as e:
        raise translate(e, "cannot update the audit store") from None
