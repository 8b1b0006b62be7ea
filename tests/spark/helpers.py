"""Helpers shared by the reconciliation tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from kafka_controller.reconcile import snapshot_schema as SS

Key = tuple[str, str | None, int | None, int | None]


def finding_keys(rows: Any) -> list[Key]:
    """(kind, topic, partition, broker) of each finding, sorted (Spark Rows, dicts or a DataFrame)."""
    if hasattr(rows, "itertuples"):
        rows = [r._asdict() for r in rows.itertuples(index=False)]
    out = []
    for r in rows:
        r = r.asDict() if hasattr(r, "asDict") else r
        partition = (
            None if r["partition"] is None or r["partition"] != r["partition"] else int(r["partition"])
        )
        broker = None if r["broker"] is None or r["broker"] != r["broker"] else int(r["broker"])
        out.append((r["kind"], r["topic"], partition, broker))
    return sorted(out, key=str)


def load_audit_parquet_into(url: str, audit_dir: Path) -> int:
    """Insert a Parquet audit copy into an audit store (schema already there); returns the row count."""
    from sqlalchemy import insert

    from kafka_controller.audit import schema
    from kafka_controller.audit.engine import create_audit_engine

    engine = create_audit_engine(url)
    count = 0
    try:
        with engine.begin() as conn:
            for name in SS.AUDIT_TABLES:
                rows = pq.read_table(audit_dir / name).to_pylist()
                for r in rows:
                    r.pop("id")  # the store numbers its own rows
                if rows:
                    conn.execute(insert(schema.metadata.tables[name]), rows)
                count += len(rows)
    finally:
        engine.dispose()
    return count


def query(url: str, sql: str) -> list[dict[str, Any]]:
    from sqlalchemy import text

    from kafka_controller.audit.engine import create_audit_engine

    engine = create_audit_engine(url)
    try:
        with engine.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(text(sql))]
    finally:
        engine.dispose()
