"""The run's summary row and findings in the audit store, written from the Spark driver.

Written through SQLAlchemy on the driver, not by Spark's JDBC writer: SQLite takes one writer at a
time, and the findings of a run must land all or nothing. So: one small transaction records the
run as ``running`` when it starts; at the end, one transaction inserts every finding (streamed
from Spark in batches) and marks the run ``succeeded``. A failed run is marked ``failed`` with the
error, and keeps no findings.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kafka_controller.domain.errors import InvalidArgumentError

BATCH = 5_000
_FINDING_KEYS = ("kind", "severity", "topic", "partition", "broker", "expected", "actual", "detail")


class ResultsStore:
    """The audit store's ``reconciliation_runs`` and ``reconciliation_findings`` tables."""

    def __init__(self, url: str) -> None:
        # Imported on use: SQLAlchemy is optional (the 'audit' extra).
        from sqlalchemy import inspect
        from sqlalchemy.exc import SQLAlchemyError

        from kafka_controller.audit import schema
        from kafka_controller.audit.engine import create_audit_engine, redacted, translate

        self._schema = schema
        self._translate = translate
        self.engine = create_audit_engine(url, must_exist=True)
        try:
            with self.engine.connect() as conn:
                names = set(inspect(conn).get_table_names())
                # a store not yet at the revision with run cluster ids still takes runs, without one
                self._run_cluster = "reconciliation_runs" in names and "cluster_id" in {
                    c["name"] for c in inspect(conn).get_columns("reconciliation_runs")
                }
        except SQLAlchemyError as e:
            self.engine.dispose()
            raise translate(e, f"cannot open the audit store {redacted(url)}") from None
        needed = {"reconciliation_runs", "reconciliation_findings"}
        if not needed <= names:
            self.engine.dispose()
            raise InvalidArgumentError(
                f"the audit store {redacted(url)} has no reconciliation tables: "
                f"run 'kafka-controller audit upgrade --url URL' first"
            )

    def _run(self, what: str, fn: Any) -> Any:
        from sqlalchemy.exc import SQLAlchemyError

        try:
            with self.engine.begin() as conn:
                return fn(conn)
        except SQLAlchemyError as e:
            raise self._translate(e, f"cannot {what}") from None

    def start_run(
        self,
        run_id: str,
        started_ms: int,
        snapshot: str,
        operation_id: str | None,
        cluster_id: str | None = None,
    ) -> None:
        """Record the run as running; ``cluster_id``: the snapshot's cluster (a store may hold several)."""
        runs = self._schema.reconciliation_runs
        extra = {"cluster_id": cluster_id} if self._run_cluster and cluster_id is not None else {}
        self._run(
            "record the reconciliation run",
            lambda conn: conn.execute(
                runs.insert().values(
                    run_id=run_id,
                    operation_id=operation_id,
                    status="running",
                    started_ms=started_ms,
                    snapshot_path=snapshot,
                    **extra,
                )
            ),
        )

    def finish_run(
        self,
        run_id: str,
        *,
        finished_ms: int,
        partitions_checked: int,
        findings: Iterable[Mapping[str, Any]],
        detail: str,
    ) -> int:
        """Insert every finding and mark the run succeeded, in one transaction; returns the count."""
        runs, table = self._schema.reconciliation_runs, self._schema.reconciliation_findings

        def write(conn: Any) -> int:
            count = 0
            batch: list[dict[str, Any]] = []
            for f in findings:
                row = {k: f[k] for k in _FINDING_KEYS}
                row["replica"] = row.pop("broker")
                row["run_id"] = run_id
                batch.append(row)
                if len(batch) >= BATCH:
                    conn.execute(table.insert(), batch)
                    count += len(batch)
                    batch = []
            if batch:
                conn.execute(table.insert(), batch)
                count += len(batch)
            conn.execute(
                runs.update()
                .where(runs.c.run_id == run_id)
                .values(
                    status="succeeded",
                    finished_ms=finished_ms,
                    partitions_checked=partitions_checked,
                    findings_count=count,
                    detail=detail,
                )
            )
            return count

        result: int = self._run("write the reconciliation findings", write)
        return result

    def fail_run(self, run_id: str, finished_ms: int, error: str) -> None:
        runs = self._schema.reconciliation_runs
        self._run(
            "mark the reconciliation run failed",
            lambda conn: conn.execute(
                runs.update()
                .where(runs.c.run_id == run_id)
                .values(status="failed", finished_ms=finished_ms, detail=error[:4000])
            ),
        )

    def close(self) -> None:
        self.engine.dispose()
