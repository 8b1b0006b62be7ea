"""The plugin's listener: DAG-run and task outcomes of the kafka-controller DAGs, as audit rows.

Each outcome becomes a finished ``operations`` row (kind ``airflow_dag_run`` or ``airflow_task``)
with the Airflow ids, so a report lists what ran next to what it changed. A failed task also
finishes, as ``failed``, any operation row it left ``running`` (a crash or a kill cut it short).

Listeners run in task processes and in the scheduler: the engine is opened lazily, once per process
id (a forked child never reuses its parent's connections), and nothing here ever raises into
Airflow: a broken audit store is logged, the DAG goes on.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any

from airflow.listeners import hookimpl

from kafka_controller.airflow.connections import DEFAULT_AUDIT_CONN_ID

log = logging.getLogger(__name__)

DAG_TAG = "kafka-controller"
AUDIT_CONN_ENV = "KAFKA_CONTROLLER_AUDIT_CONN_ID"


def _ms(value: Any) -> int | None:
    return int(value.timestamp() * 1000) if value is not None and hasattr(value, "timestamp") else None


def _tags(obj: Any) -> set[str]:
    """Tags of the DAG behind a DagRun or a task instance, whichever shape Airflow hands over."""
    for path in (("dag",), ("task", "dag"), ("dag_model",)):
        target = obj
        for attr in path:
            target = getattr(target, attr, None)
        tags = getattr(target, "tags", None)
        if tags:
            return {getattr(t, "name", t) for t in tags}
    return set()


class AuditListener:
    """Register an instance with the plugin; ``conn_id`` names the audit connection."""

    def __init__(self, conn_id: str | None = None, *, only_tag: str | None = DAG_TAG) -> None:
        self._conn_id = conn_id
        self.only_tag = only_tag
        self._pid: int | None = None
        self._hook: Any = None

    @property
    def conn_id(self) -> str:
        return self._conn_id or os.environ.get(AUDIT_CONN_ENV) or DEFAULT_AUDIT_CONN_ID

    def _audit(self) -> Any:
        if self._pid != os.getpid():  # first use in this process, or a forked child
            from kafka_controller.airflow.hooks.audit import AuditStoreHook

            self._hook, self._pid = AuditStoreHook(self.conn_id), os.getpid()
        return self._hook

    def _wanted(self, obj: Any, dag_id: str | None) -> bool:
        if self.only_tag is None:
            return True
        from kafka_controller.airflow.dag_ids import DAG_IDS

        return self.only_tag in _tags(obj) or dag_id in DAG_IDS

    def _record(
        self,
        kind: str,
        status: str,
        error: str | None,
        params: dict[str, Any],
        ids: dict[str, Any],
        who: str | None,
        why: str,
        dry_run: bool = False,
    ) -> None:
        try:
            audit = self._audit()
            op = audit.start_operation(kind, who or "airflow", why, params, dry_run, **ids)
            audit.finish_operation(op, status, error)
        except Exception as e:  # never break Airflow for the sake of an audit row
            log.warning("kafka-controller listener: could not record %s: %s", kind, e)

    # -- DAG runs (scheduler, or dag.test's process) ------------------------------------------------
    def _dag_run(self, dag_run: Any, status: str, msg: str) -> None:
        if not self._wanted(dag_run, getattr(dag_run, "dag_id", None)):
            return
        conf = getattr(dag_run, "conf", None) or {}
        params = {
            "state": str(getattr(dag_run, "state", status)),
            "run_type": str(getattr(dag_run, "run_type", "")),
            "start_ms": _ms(getattr(dag_run, "start_date", None)),
            "end_ms": _ms(getattr(dag_run, "end_date", None)),
            "conf_keys": sorted(conf) if isinstance(conf, dict) else [],
        }
        dry = conf.get("dry_run") if isinstance(conf, dict) else None
        self._record(
            "airflow_dag_run",
            status,
            None if status == "succeeded" else (msg or "the DAG run failed"),
            params,
            {"airflow_dag_id": dag_run.dag_id, "airflow_run_id": dag_run.run_id},
            getattr(dag_run, "triggering_user_name", None),
            f"DAG run {dag_run.run_id} of {dag_run.dag_id}",
            dry_run=dry is True,
        )

    @hookimpl
    def on_dag_run_success(self, dag_run: Any, msg: str) -> None:
        self._dag_run(dag_run, "succeeded", msg)

    @hookimpl
    def on_dag_run_failed(self, dag_run: Any, msg: str) -> None:
        self._dag_run(dag_run, "failed", msg)

    # -- task instances (task processes) -------------------------------------------------------------
    def _task(self, ti: Any, status: str, error: Any) -> None:
        if not self._wanted(ti, getattr(ti, "dag_id", None)):
            return
        ids = {"airflow_dag_id": ti.dag_id, "airflow_run_id": ti.run_id, "airflow_task_id": ti.task_id}
        message = None
        if error is not None:
            text = str(error).strip().splitlines()
            message = (
                f"{type(error).__name__}: {text[0] if text else ''}"
                if isinstance(error, BaseException)
                else (text[0] if text else "failed")
            )
        if status == "failed":
            try:
                from kafka_controller.airflow.audit_queries import fail_running_operations

                audit = self._audit()
                n = fail_running_operations(
                    audit.get_engine(),
                    ti.dag_id,
                    ti.run_id,
                    ti.task_id,
                    message or "the task failed",
                    int(time.time() * 1000),
                )
                if n:
                    log.info("kafka-controller listener: finished %d operation(s) the task left running", n)
            except Exception as e:
                log.warning("kafka-controller listener: could not close running operations: %s", e)
        params = {
            "try_number": getattr(ti, "try_number", None),
            "map_index": getattr(ti, "map_index", -1),
            "operator": type(getattr(ti, "task", None)).__name__,
            "start_ms": _ms(getattr(ti, "start_date", None)),
        }
        self._record("airflow_task", status, message, params, ids, None, f"task {ti.task_id} of {ti.dag_id}")

    @hookimpl
    def on_task_instance_success(self, previous_state: Any, task_instance: Any) -> None:
        self._task(task_instance, "succeeded", None)

    @hookimpl
    def on_task_instance_failed(self, previous_state: Any, task_instance: Any, error: Any) -> None:
        self._task(task_instance, "failed", error if error is not None else "the task failed")

    @hookimpl
    def on_task_instance_skipped(self, previous_state: Any, task_instance: Any) -> None:
        self._task(task_instance, "cancelled", "skipped")


audit_listener = AuditListener()
