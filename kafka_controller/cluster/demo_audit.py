"""What the demo shows from the audit store once the scenario is over: transitions per kind and
outcome, unclean elections, leader moves per broker and failover recovery times.

The brokers' audit writers flush in the background, so ``wait_settled`` first waits (bounded)
until the row counts stop growing; the report is then read with the audit package's own queries.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any


def _counts(url: str) -> tuple[int, int, int]:
    # Imported on use: SQLAlchemy is optional (the 'audit' extra).
    from sqlalchemy import func, select

    from kafka_controller.audit.engine import create_audit_engine
    from kafka_controller.audit.schema import controller_events, partition_transitions, replica_transitions

    engine = create_audit_engine(url)
    try:
        with engine.connect() as conn:
            return tuple(  # type: ignore[return-value]
                conn.execute(select(func.count()).select_from(t)).scalar_one()
                for t in (partition_transitions, replica_transitions, controller_events)
            )
    finally:
        engine.dispose()


def wait_settled(url: str, quiet_s: float = 1.0, timeout_s: float = 15.0) -> tuple[int, int, int]:
    """Poll the row counts until they have not changed for ``quiet_s`` (or ``timeout_s`` passed)."""
    deadline = time.monotonic() + timeout_s
    last = _counts(url)
    stable_since = time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.2)
        now = _counts(url)
        if now != last:
            last, stable_since = now, time.monotonic()
        elif time.monotonic() - stable_since >= quiet_s:
            break
    return last


def audit_summary(url: str) -> dict[str, Any]:
    """The demo's audit digest, JSON-ready."""
    # Imported on use: SQLAlchemy is optional (the 'audit' extra).
    from sqlalchemy import func, literal, select, union_all

    from kafka_controller.audit.engine import create_audit_engine
    from kafka_controller.audit.reports import build_report
    from kafka_controller.audit.schema import controller_events, partition_transitions, replica_transitions

    report = build_report(url, limit=50)
    engine = create_audit_engine(url)
    try:
        with engine.connect() as conn:
            parts = [  # what happened: the rows dry runs planned are left out, as in the report
                select(literal(kind).label("kind"), t.c.to_state, t.c.outcome).where(t.c.dry_run.is_(False))
                for kind, t in (("partition", partition_transitions), ("replica", replica_transitions))
            ]
            u = union_all(*parts).subquery("u")
            rows = conn.execute(
                select(u.c.kind, u.c.to_state, u.c.outcome, func.count())
                .group_by(u.c.kind, u.c.to_state, u.c.outcome)
                .order_by(u.c.kind, u.c.to_state, u.c.outcome)
            ).all()
            events = conn.execute(
                select(controller_events.c.kind, func.count())
                .where(controller_events.c.dry_run.is_(False))
                .group_by(controller_events.c.kind)
            ).all()
    finally:
        engine.dispose()
    sections = report.get("sections", {})
    return {
        "database": report["database"],
        "summary": report.get("summary", {}),
        "transitions": [{"machine": k, "to_state": s, "outcome": o, "count": int(n)} for k, s, o, n in rows],
        "controller_events": {str(k): int(n) for k, n in events},
        "unclean_elections": sections.get("unclean_elections", {}).get("total", 0),
        "leader_moves_per_broker": sections.get("leader_moves_per_broker", {}).get("rows", []),
        "failover_recovery": sections.get("failover_recovery", {}).get("rows", []),
    }


def render_audit_summary(digest: dict[str, Any]) -> list[str]:
    lines = [f"   audit store {digest['database']}"]
    for row in digest["transitions"]:
        lines.append(f"   {row['machine']:9} -> {row['to_state']:26} {row['outcome']:7} {row['count']:5}")
    events = ", ".join(f"{k} {n}" for k, n in sorted(digest["controller_events"].items())) or "none"
    lines.append(f"   controller events: {events}")
    lines.append(f"   unclean leader elections: {digest['unclean_elections']}")
    moves = ", ".join(
        f"broker {r['broker_id']} +{r['leaderships_gained']}/-{r['leaderships_lost']}"
        for r in digest["leader_moves_per_broker"]
    )
    lines.append(f"   leader moves (gained/lost): {moves or 'none'}")
    for r in digest["failover_recovery"]:
        lines.append(
            f"   failover to epoch {r['controller_epoch']} on broker {r['broker_id']}: "
            + (
                f"every partition led {float(r['time_to_recover_ms']):.0f} ms after the loss "
                f"({r['lost_via']}), "
                if r.get("lost_ms") is not None and r.get("time_to_recover_ms") is not None
                else ""
            )
            + f"{float(r['duration_ms']):.0f} ms of failover work"
        )
    return lines


def dag_operations(url: str, dag_ids: Iterable[str]) -> list[dict[str, Any]]:
    """The operations rows these DAGs recorded (the operators' own and the listener's task and
    run rows), oldest first, each with how many transitions are linked to it."""
    # Imported on use: SQLAlchemy is optional (the 'audit' extra).
    from sqlalchemy import select

    from kafka_controller.audit.engine import create_audit_engine
    from kafka_controller.audit.reports import transitions_per_operation_rows
    from kafka_controller.audit.schema import operations as ops

    engine = create_audit_engine(url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                select(ops)
                .where(ops.c.airflow_dag_id.in_(list(dag_ids)))
                .order_by(ops.c.started_ms, ops.c.kind)
            ).all()
            linked = {r["operation_id"]: r for r in transitions_per_operation_rows(conn)}
    finally:
        engine.dispose()
    out = []
    for r in rows:
        counts = linked.get(r.operation_id, {})
        out.append(
            {
                "operation_id": r.operation_id,
                "kind": r.kind,
                "status": r.status,
                "dry_run": bool(r.dry_run),
                "airflow_dag_id": r.airflow_dag_id,
                "airflow_run_id": r.airflow_run_id,
                "airflow_task_id": r.airflow_task_id,
                "partition_transitions": int(counts.get("partition_transitions") or 0),
                "replica_transitions": int(counts.get("replica_transitions") or 0),
            }
        )
    return out
