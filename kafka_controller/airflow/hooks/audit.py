"""``AuditStoreHook``: the audit store from an Airflow connection, for operators, listener and web app.

Task code may not use Airflow's metadata database, so the hook opens its own engine (lazily, once
per hook). The URL with its password never leaves the hook: ``redacted_url`` is for logs and rows.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseHook

from kafka_controller.airflow.connections import (
    AUDIT_CONN_TYPE,
    DEFAULT_AUDIT_CONN_ID,
    AuditConnection,
    airflow_fields,
    audit_connection,
)
from kafka_controller.audit.engine import AuditStoreError, create_audit_engine
from kafka_controller.domain.audit_records import AuditItem, record_rows

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from kafka_controller.audit.operations import OperationLog


class AuditStoreHook(BaseHook):
    """Operations rows, planned transitions and report queries on one audit store."""

    conn_name_attr = "kafka_controller_audit_conn_id"
    default_conn_name = DEFAULT_AUDIT_CONN_ID
    conn_type = AUDIT_CONN_TYPE
    hook_name = "Kafka controller audit store (SQLAlchemy)"

    def __init__(self, kafka_controller_audit_conn_id: str = DEFAULT_AUDIT_CONN_ID) -> None:
        super().__init__()
        self.kafka_controller_audit_conn_id = kafka_controller_audit_conn_id
        self._engine: Engine | None = None
        #: Not ``_log``: that is where Airflow's LoggingMixin keeps the hook's logger (``self.log``).
        self._operations: OperationLog | None = None

    @cached_property
    def connection(self) -> AuditConnection:
        c = self.get_connection(self.kafka_controller_audit_conn_id)
        return audit_connection(self.kafka_controller_audit_conn_id, **airflow_fields(c))

    @property
    def redacted_url(self) -> str:
        return self.connection.redacted_url

    def get_engine(self) -> Engine:
        if self._engine is None:
            self._engine = create_audit_engine(self.connection.url)
        return self._engine

    def operation_log(self) -> OperationLog:
        """An ``OperationLog`` on this hook's engine (the schema is created or upgraded once)."""
        if self._operations is None:
            # Imported on use: the audit store's SQLAlchemy schema checks load alembic (the 'audit'
            # extra), which a DAG file's parse (it imports the operators, so this hook) never needs.
            from kafka_controller.audit.operations import OperationLog

            self._operations = OperationLog(self.get_engine())
        return self._operations

    def start_operation(
        self,
        kind: str,
        requester: str,
        reason: str,
        parameters: Mapping[str, Any] | None,
        dry_run: bool,
        *,
        airflow_dag_id: str | None = None,
        airflow_run_id: str | None = None,
        airflow_task_id: str | None = None,
        cluster_id: str | None = None,
    ) -> str:
        return str(
            self.operation_log().start_operation(
                kind,
                requester,
                reason,
                parameters,
                dry_run,
                airflow_dag_id=airflow_dag_id,
                airflow_run_id=airflow_run_id,
                airflow_task_id=airflow_task_id,
                cluster_id=cluster_id,
            )
        )

    def finish_operation(
        self,
        operation_id: str,
        status: str,
        error: str | None = None,
        result: Mapping[str, Any] | None = None,
    ) -> None:
        self.operation_log().finish_operation(operation_id, status, error, result)

    def record_controller_lost(self, broker_id: int, controller_epoch: int, at_ms: int, detail: str) -> None:
        """The operation took controller ``broker_id`` down at ``at_ms`` (a drill's kill): the report
        then measures that failover's outage from this moment."""
        self.operation_log().record_controller_lost(broker_id, controller_epoch, at_ms, detail)

    def failover_recovery(self, controller_epoch: int, since_ms: int) -> dict[str, Any] | None:
        """The new controller's own record of the failover that began ``controller_epoch`` (a row of
        ``views.failover_recovery``: offline partitions, ``lost_ms``, ``time_to_recover_ms``), or
        None while it is not written (or never will be: a controller that is not this project's)."""
        # Imported on use: the audit store's SQLAlchemy schema checks load alembic (the 'audit'
        # extra), which a DAG file's parse (it imports the operators, so this hook) never needs.
        from kafka_controller.audit.reports import failover_recovery_rows

        with self.get_engine().connect() as conn:
            rows = failover_recovery_rows(conn, since_ms=since_ms)
        return next(
            (
                r
                for r in rows
                if r["controller_epoch"] == controller_epoch and r.get("time_to_recover_ms") is not None
            ),
            None,
        )

    def get_operation(self, operation_id: str) -> dict[str, Any] | None:
        # Imported on use: the audit store's SQLAlchemy schema checks load alembic (the 'audit'
        # extra), which a DAG file's parse (it imports the operators, so this hook) never needs.
        from kafka_controller.airflow.audit_queries import get_operation

        return get_operation(self.get_engine(), operation_id)

    def record_transitions(self, records: Sequence[AuditItem], timeout_s: float = 60.0) -> int:
        """Write planned records now; raises unless every one reached the database.

        Operators write only plans through this (what the controller does, it records itself), so
        every record is marked as planned: a plan can never pass for history whoever built it."""
        if not records:
            return 0
        for r in records:
            r.dry_run = True  # a bulk record's once for all its rows
        rows = record_rows(records)
        # Imported on use: the audit store's SQLAlchemy schema checks load alembic (the 'audit'
        # extra), which a DAG file's parse (it imports the operators, so this hook) never needs.
        from kafka_controller.audit.writer import AuditWriter

        with tempfile.TemporaryDirectory(prefix="kc-audit-spool-") as spool:
            writer = AuditWriter(self.connection.url, spool_dir=spool, flush_interval=0.05)
            writer.record(list(records))
            writer.flush(timeout_s)
            stats = writer.close(timeout_s)
        stored = stats.written + stats.replayed + stats.duplicates
        if stored < rows:
            raise AuditStoreError(
                f"only {stored} of {rows} transitions reached the audit store "
                f"{self.redacted_url} ({stats.last_error or 'no error reported'})"
            )
        return stored

    def report(self, *, since_ms: int | None = None) -> dict[str, Any]:
        """The audit report (``audit.reports.build_report``) of what happened since ``since_ms``."""
        # Imported on use: the audit store's SQLAlchemy schema checks load alembic (the 'audit'
        # extra), which a DAG file's parse (it imports the operators, so this hook) never needs.
        from kafka_controller.audit.reports import build_report

        return build_report(self.get_engine(), since_ms=since_ms)

    def close(self) -> None:
        if self._operations is not None:
            self._operations.close()
            self._operations = None
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None

    def test_connection(self) -> tuple[bool, str]:
        try:
            with self.get_engine().connect():
                pass
        except Exception as e:
            return False, f"{type(e).__name__}: {e}"
        finally:
            self.close()
        return True, f"connected to {self.redacted_url}"
