"""Read-only operators: the reconciliation snapshot, the PySpark reconciliation job, the audit report.

The reconciliation job itself lives in ``kafka_controller.reconcile`` (no Airflow in it); this module
only launches it with ``spark-submit``, so the same command runs on a real cluster with another
``master``. The audit history goes to Spark as a Parquet copy next to the snapshot, so the job needs
no JDBC driver; its results land in the audit store, linked to this task's operation.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
from airflow.sdk import BaseHook

from kafka_controller.airflow.connections import airflow_fields
from kafka_controller.airflow.operators.base import KafkaOperationOperator
from kafka_controller.airflow.params import as_int, as_text
from kafka_controller.airflow.spark_connection import SparkConnection, spark_connection
from kafka_controller.domain.errors import InvalidArgumentError, KafkaControllerError
from kafka_controller.reconcile.export import export_audit_history, export_snapshot
from kafka_controller.reconcile.sources import admin_broker_source, admin_controller_source

if TYPE_CHECKING:
    from airflow.sdk import Context

#: The PySpark job ``spark-submit`` runs: found, not imported (it is the job's process that runs it).
RECONCILE_JOB = "kafka_controller.reconcile.job"


def _safe(run_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", run_id)


def data_dir(kind: str) -> Path:
    """Where outputs go when a DAG names no directory: ``$AIRFLOW_HOME/kafka-controller/<kind>``."""
    home = os.environ.get("AIRFLOW_HOME") or str(Path.home() / "airflow")
    return Path(home) / "kafka-controller" / kind


def _run_dir(base: str | None, context: Context, kind: str) -> Path:
    text = as_text("output_dir", base, required=False)
    return (Path(text) if text else data_dir(kind)) / _safe(context["run_id"])


class SnapshotExportOperator(KafkaOperationOperator):
    """ZooKeeper (batched reads), each broker's own view of its replicas (DescribeReplicas), the
    active controller's context (DescribeControllerContext) and a Parquet copy of the audit history,
    under ``<output_dir>/<run id>/``. A controller that does not answer within the connection's
    request timeout leaves the snapshot without its view: the task still succeeds, and its XCom
    (``controller_view``, ``controller_view_error``) and log say so."""

    operation_kind = "snapshot_export"
    mutating = False
    template_fields: Sequence[str] = (*KafkaOperationOperator.template_fields, "output_dir")

    def __init__(
        self,
        *,
        output_dir: str | None = None,
        broker_views: bool = True,
        controller_view: bool = True,
        audit_history: bool = True,
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        self.output_dir = output_dir
        self.broker_views = broker_views
        self.controller_view = controller_view
        self.audit_history = audit_history

    def prepare(self, context: Context) -> dict[str, Any]:
        self._dir = _run_dir(self.output_dir, context, "snapshots")
        if self._dir.exists() and any(self._dir.iterdir()):
            raise InvalidArgumentError(f"snapshot directory {self._dir} already exists and is not empty")
        return {
            "output_dir": str(self._dir),
            "broker_views": self.broker_views,
            "controller_view": self.controller_view,
            "audit_history": self.audit_history,
        }

    def run(self, context: Context) -> dict[str, Any]:
        self._dir.mkdir(parents=True, exist_ok=True)
        admin = self.cluster.get_admin_client() if self.broker_views or self.controller_view else None
        result = export_snapshot(
            self.cluster.get_store(),
            self._dir / "snapshot",
            broker_source=admin_broker_source(admin) if self.broker_views else None,
            controller_source=admin_controller_source(admin) if self.controller_view else None,
        )
        out: dict[str, Any] = {
            "snapshot": str(result.path),
            "snapshot_id": result.snapshot_id,
            "rows": dict(result.rows),
            "skipped_topics": dict(result.skipped_topics),
            "controller_view": result.controller_view,
            "controller_view_error": result.controller_view_error,
        }
        if self.controller_view and not result.controller_view:
            self.log.warning(
                "snapshot written without the controller's view: %s", result.controller_view_error
            )
        if self.audit_history:
            out["audit_parquet"] = str(self._dir / "audit")
            out["audit_rows"] = export_audit_history(self.audit.connection.url, self._dir / "audit")
        return out


def spark_submit_command(
    job_args: Sequence[str],
    *,
    master: str,
    conf: Mapping[str, str],
    spark_submit: str | None = None,
    submit_args: Sequence[str] = (),
) -> list[str]:
    """``spark-submit`` (the venv's, next to this interpreter) for ``reconcile/job.py``."""
    spec = importlib.util.find_spec(RECONCILE_JOB)
    if spec is None or spec.origin is None:
        raise KafkaControllerError(f"the reconciliation job {RECONCILE_JOB} is not installed")
    binary = spark_submit or str(Path(sys.executable).with_name("spark-submit"))
    argv = [binary, "--master", master, *submit_args]
    for key, value in sorted(conf.items()):
        argv += ["--conf", f"{key}={value}"]
    return [*argv, spec.origin, *job_args]


def reconcile_job_args(
    *,
    snapshot: str,
    out: str,
    results_url: str,
    operation_id: str,
    audit_parquet: str | None,
    fail_on: str | None,
) -> list[str]:
    """The reconciliation job's arguments. ``--fail-on`` always: the job fails on critical findings
    by default, the operator only when ``fail_on`` is given."""
    args = [
        "--snapshot",
        snapshot,
        "--out",
        out,
        "--results-url",
        results_url,
        "--operation-id",
        operation_id,
    ]
    if audit_parquet:
        args += ["--audit-parquet", audit_parquet]
    return [*args, "--fail-on", fail_on or "none"]


def reconcile_job_failed(returncode: int, fail_on: str | None) -> bool:
    """1 and 2 always fail the task; 3 (findings at ``--fail-on``) only when ``fail_on`` is set."""
    return returncode not in (0, 3) or (returncode == 3 and bool(fail_on))


def reconcile_job_summary(stdout: str) -> dict[str, Any]:
    """The job's JSON summary out of its stdout. Under ``spark-submit`` the driver's stderr (Spark's
    warnings, the job's findings table) is merged into stdout, before and after the summary, so
    the summary is the object that opens with a line of its own (``{``), decoded up to its end."""
    text = "\n" + stdout
    start = text.rfind("\n{\n")
    if start < 0:
        raise KafkaControllerError("the reconciliation job printed no JSON summary")
    try:
        value, _ = json.JSONDecoder().raw_decode(text[start + 1 :])
    except ValueError:
        raise KafkaControllerError("the reconciliation job printed no JSON summary") from None
    if not isinstance(value, dict):
        raise KafkaControllerError("the reconciliation job printed no JSON summary")
    return value


def redact_args(argv: Sequence[str], secrets: Sequence[str]) -> list[str]:
    return [next((a.replace(s, "***") for s in secrets if s and s in a), a) for a in argv]


class SparkReconciliationOperator(KafkaOperationOperator):
    """Launch the PySpark reconciliation job on a snapshot (``SnapshotExportOperator``'s XCom) and
    return its JSON summary. Exit code 2 (bad input) and 1 (failure) fail the task with the job's
    last stderr line; 3 (findings at ``fail_on``) fails it too when ``fail_on`` is set. Without
    ``fail_on`` findings never fail the task: the job is given ``--fail-on none`` (its own default is
    ``critical``), and the findings are in the returned summary and the audit store.

    Where it runs: ``master`` (``local[2]`` by default), or, when ``spark_conn_id`` is given, a
    ``spark`` connection in the Apache Spark provider's layout (``spark_default``: host
    ``spark://HOST`` + port, extra ``deploy-mode``, ``queue``, ...), read without the provider."""

    operation_kind = "reconciliation"
    mutating = False
    template_fields: Sequence[str] = (
        *KafkaOperationOperator.template_fields,
        "snapshot",
        "audit_parquet",
        "output_dir",
        "master",
        "spark_conn_id",
    )
    DEFAULT_CONF = {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "4"}

    def __init__(
        self,
        *,
        snapshot: str,
        output_dir: str | None = None,
        audit_parquet: str | None = None,
        master: str = "local[2]",
        spark_conn_id: str | None = None,
        spark_conf: Mapping[str, str] | None = None,
        fail_on: str | None = None,
        timeout_s: float | str = 1800,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.snapshot = snapshot
        self.audit_parquet = audit_parquet
        self.output_dir = output_dir
        self.master = master
        self.spark_conn_id = spark_conn_id
        self.spark_conf = dict(spark_conf or {})
        self.fail_on = fail_on
        self.timeout_s = timeout_s

    def prepare(self, context: Context) -> dict[str, Any]:
        self._snapshot = as_text("snapshot", self.snapshot)
        self._audit_parquet = as_text("audit_parquet", self.audit_parquet, required=False)
        self._out = as_text("output_dir", self.output_dir, required=False) or str(data_dir("reconciliation"))
        self._timeout = as_int("timeout_s", self.timeout_s, minimum=1)
        conn_id = as_text("spark_conn_id", self.spark_conn_id, required=False)
        self._spark: SparkConnection = (
            self._spark_connection(conn_id)
            if conn_id and conn_id != "None"
            else SparkConnection("", as_text("master", self.master) or "local[2]")
        )
        return {
            "snapshot": self._snapshot,
            "audit_parquet": self._audit_parquet,
            "output_dir": self._out,
            "master": self._spark.master,
            "spark_conn_id": self._spark.conn_id or None,
            "fail_on": self.fail_on,
        }

    @staticmethod
    def _spark_connection(conn_id: str) -> SparkConnection:
        return spark_connection(conn_id, **airflow_fields(BaseHook.get_connection(conn_id)))

    def run(self, context: Context) -> dict[str, Any]:
        url = self.audit.connection.url
        args = reconcile_job_args(
            snapshot=str(self._snapshot),
            out=str(self._out),
            results_url=url,
            operation_id=str(self.operation_id),
            audit_parquet=self._audit_parquet,
            fail_on=self.fail_on,
        )
        argv = spark_submit_command(
            args,
            master=self._spark.master,
            conf={**self.DEFAULT_CONF, **self.spark_conf},
            spark_submit=self._spark.spark_binary,
            submit_args=self._spark.submit_args(),
        )
        self.say(f"submitting the reconciliation job to {self._spark.master}")
        self.log.info("running %s", " ".join(redact_args(argv, [url])))
        env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW_")}
        env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        env["PYSPARK_PYTHON"] = env["PYSPARK_DRIVER_PYTHON"] = sys.executable
        try:
            done = subprocess.run(
                argv, capture_output=True, env=env, timeout=self._timeout, stdin=subprocess.DEVNULL
            )
        except subprocess.TimeoutExpired:
            raise KafkaControllerError(f"the reconciliation job did not finish in {self._timeout}s") from None
        stderr = done.stderr.decode(errors="replace").replace(url, "***")
        if reconcile_job_failed(done.returncode, self.fail_on):
            own = [ln for ln in stderr.splitlines() if " INFO " not in ln and " WARN " not in ln]
            self.log.error("the job's output, without Spark's INFO and WARN lines:\n%s", "\n".join(own[-40:]))
            lines = [ln for ln in own if ln.startswith("reconcile:")] or own[-1:] or stderr.splitlines()[-1:]
            raise KafkaControllerError(
                f"the reconciliation job exited {done.returncode}: {lines[-1] if lines else ''}"
            )
        return {
            "job": reconcile_job_summary(done.stdout.decode(errors="replace")),
            "exit_code": done.returncode,
        }


class AuditReportOperator(KafkaOperationOperator):
    """The audit report (``audit.reports``) as JSON and self-contained HTML under ``output_dir``."""

    operation_kind = "audit_report"
    mutating = False
    template_fields: Sequence[str] = (*KafkaOperationOperator.template_fields, "output_dir", "since_hours")

    def __init__(
        self, *, output_dir: str | None = None, since_hours: int | str | None = 24, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.output_dir = output_dir
        self.since_hours = since_hours

    def prepare(self, context: Context) -> dict[str, Any]:
        self._dir = _run_dir(self.output_dir, context, "reports")
        self._hours = (
            None
            if self.since_hours in (None, "", "None")
            else as_int("since_hours", self.since_hours, minimum=1)
        )
        return {"output_dir": str(self._dir), "since_hours": self._hours}

    def run(self, context: Context) -> dict[str, Any]:
        # Imported on use: the report's SQLAlchemy queries load alembic (the 'audit' extra), which a
        # DAG file's parse (it imports this module) never needs.
        from kafka_controller.audit.html import render_html

        since = None if self._hours is None else int(time.time() * 1000) - self._hours * 3_600_000
        report = self.audit.report(since_ms=since)
        self._dir.mkdir(parents=True, exist_ok=True)
        (self._dir / "report.json").write_bytes(
            orjson.dumps(report, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS)
        )
        (self._dir / "report.html").write_text(render_html(report), encoding="utf-8")
        return {
            "json": str(self._dir / "report.json"),
            "html": str(self._dir / "report.html"),
            "summary": report.get("summary", {}),
            "empty": report.get("empty", True),
        }
