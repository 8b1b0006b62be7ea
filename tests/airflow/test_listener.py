"""The plugin's listener: outcomes of the kafka-controller DAGs become audit rows; nothing raises."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace

import pytest

from kafka_controller.airflow.audit_queries import get_operation, list_operations
from kafka_controller.airflow.listener import AuditListener
from kafka_controller.audit.engine import create_audit_engine
from kafka_controller.audit.operations import OperationLog

pytestmark = pytest.mark.airflow

T0 = datetime(2024, 6, 1, 12, 0, tzinfo=UTC)


def dag_run(dag_id: str = "rolling_controlled_shutdown", tags: tuple[str, ...] = ("kafka-controller",), **kw):
    values = {
        "dag_id": dag_id,
        "run_id": "manual__1",
        "state": "success",
        "run_type": "manual",
        "start_date": T0,
        "end_date": T0,
        "conf": {"dry_run": False, "brokers": [1]},
        "triggering_user_name": "alice",
        "dag": SimpleNamespace(tags=set(tags)),
        **kw,
    }
    return SimpleNamespace(**values)


def task_instance(dag_id: str = "rolling_controlled_shutdown", task_id: str = "rolling_restart"):
    task = SimpleNamespace(dag=SimpleNamespace(tags={"kafka-controller"}))
    return SimpleNamespace(
        dag_id=dag_id,
        run_id="manual__1",
        task_id=task_id,
        try_number=2,
        map_index=-1,
        task=task,
        start_date=T0,
    )


def rows(url: str) -> list[dict]:
    engine = create_audit_engine(url)
    try:
        return list_operations(engine, dry_runs=True)
    finally:
        engine.dispose()


def test_dag_run_outcomes_of_our_dags_are_recorded(audit_env: str) -> None:
    listener = AuditListener()
    listener.on_dag_run_success(dag_run(), "success")
    listener.on_dag_run_failed(dag_run(run_id="manual__2", conf={"dry_run": True}), "task_failure")
    listener.on_dag_run_success(dag_run(dag_id="someone_elses", tags=()), "success")
    assert listener.flush()
    recorded = {r["airflow_run_id"]: r for r in rows(audit_env)}
    assert set(recorded) == {"manual__1", "manual__2"}
    ok, failed = recorded["manual__1"], recorded["manual__2"]
    assert (ok["kind"], ok["status"], ok["requester"], ok["dry_run"]) == (
        "airflow_dag_run",
        "succeeded",
        "alice",
        False,
    )
    assert ok["parameters"]["conf_keys"] == ["brokers", "dry_run"] and ok["parameters"]["start_ms"] == int(
        T0.timestamp() * 1000
    )
    assert (failed["status"], failed["error"], failed["dry_run"]) == ("failed", "task_failure", True)


def test_a_failed_task_also_finishes_the_operations_it_left_running(audit_env: str) -> None:
    with OperationLog(audit_env) as log:
        left = log.start_operation(
            "rolling_restart",
            "alice",
            "r",
            None,
            False,
            airflow_dag_id="rolling_controlled_shutdown",
            airflow_run_id="manual__1",
            airflow_task_id="rolling_restart",
        )
        unrelated = log.start_operation("rolling_restart", "bob", "r", None, False, airflow_task_id="other")
    listener = AuditListener()
    listener.on_task_instance_failed(None, task_instance(), RuntimeError("broker 2 did not exit\nstack..."))
    assert listener.flush()
    engine = create_audit_engine(audit_env)
    try:
        assert get_operation(engine, left)["status"] == "failed"
        assert get_operation(engine, left)["error"] == "RuntimeError: broker 2 did not exit"
        assert get_operation(engine, unrelated)["status"] == "running"
    finally:
        engine.dispose()
    task_rows = [r for r in rows(audit_env) if r["kind"] == "airflow_task"]
    assert [(r["status"], r["parameters"]["try_number"]) for r in task_rows] == [("failed", 2)]


def test_task_success_and_skip(audit_env: str) -> None:
    listener = AuditListener()
    listener.on_task_instance_success(None, task_instance(task_id="a"))
    listener.on_task_instance_skipped(None, task_instance(task_id="b"))
    assert listener.flush()
    got = {r["airflow_task_id"]: (r["status"], r["error"]) for r in rows(audit_env)}
    assert got == {"a": ("succeeded", None), "b": ("cancelled", "skipped")}


def test_a_broken_audit_store_never_breaks_airflow(monkeypatch: pytest.MonkeyPatch, caplog) -> None:
    monkeypatch.setenv(
        "AIRFLOW_CONN_KAFKA_CONTROLLER_AUDIT_DEFAULT",
        '{"conn_type": "kafka_controller_audit", "extra": {"url": "mysql://x/y"}}',
    )
    listener = AuditListener()
    listener.on_dag_run_success(dag_run(), "success")
    listener.on_task_instance_failed(None, task_instance(), "boom")
    assert listener.flush()
    assert "could not record" in caplog.text


def test_each_process_opens_its_own_store(audit_env: str) -> None:
    listener = AuditListener()
    first = listener._audit()
    assert listener._audit() is first
    listener._pid = -1  # as in a forked child: the parent's engine must not be reused
    assert listener._audit() is not first


def test_a_dry_run_tasks_row_is_kept_apart_with_its_plan(audit_env: str) -> None:
    """The task row of an operator that ran as a dry run is a dry-run row (not in real totals)."""
    from kafka_controller.airflow.operators.cluster import ControllerFailoverDrillOperator

    listener = AuditListener()
    for task_id, flag in (("planned", True), ("real", False), ("unrenderable", "{{ params.x }}")):
        ti = task_instance(task_id=task_id)
        ti.task = ControllerFailoverDrillOperator(task_id=task_id, dry_run=flag)
        listener.on_task_instance_success(None, ti)
    assert listener.flush()
    got = {r["airflow_task_id"]: bool(r["dry_run"]) for r in rows(audit_env)}
    assert got == {"planned": True, "real": False, "unrenderable": False}
