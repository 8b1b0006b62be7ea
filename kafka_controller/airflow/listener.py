"""The plugin's listener: DAG-run and task outcomes of the kafka-controller DAGs, as audit rows.

Each outcome becomes a finished ``operations`` row (kind ``airflow_dag_run`` or ``airflow_task``)
with the Airflow ids, so a report lists what ran next to what it changed. A failed task also
finishes, as ``failed``, any operation row it left ``running`` (a crash or a kill cut it short).

Airflow calls listeners in task processes (task outcomes) and in the scheduler (DAG-run outcomes,
and tasks the scheduler fails itself). In the scheduler the listener runs inside
``DagRun.update_state`` with the scheduler's ORM session open, so it:

* reads only column values of the objects it is handed (no relationship that would lazy-load);
* never resolves a connection through Airflow: the audit URL comes from ``audit_target`` (the
  plugin's ``[kafka_controller] audit_url``, an ``AIRFLOW_CONN_*`` variable, or, only in a task
  process, the task SDK);
* only enqueues: a daemon thread writes the row, so a slow or broken audit store never holds up
  scheduling. A task process writes before it exits (it has nothing else to do).

The store is opened lazily, once per process id (a forked child never reuses its parent's
connections), and nothing here ever raises into Airflow: a failure is logged, the DAG goes on.
"""

from __future__ import annotations

import atexit
import functools
import logging
import os
import queue
import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, ParamSpec

from airflow.listeners import hookimpl

from kafka_controller.airflow.audit_target import in_task_process, listener_audit_url
from kafka_controller.airflow.connections import DEFAULT_AUDIT_CONN_ID
from kafka_controller.airflow.dag_ids import DAG_IDS

if TYPE_CHECKING:
    from airflow.models.dagrun import DagRun
    from airflow.models.taskinstance import TaskInstance
    from airflow.sdk.execution_time.task_runner import RuntimeTaskInstance
    from airflow.utils.state import TaskInstanceState

log = logging.getLogger(__name__)
P = ParamSpec("P")

DAG_TAG = "kafka-controller"
AUDIT_CONN_ENV = "KAFKA_CONTROLLER_AUDIT_CONN_ID"
FLUSH_AT_EXIT_S = 5.0


def _ms(value: object) -> int | None:
    """Milliseconds of a datetime column's value (None, or not a datetime: None)."""
    return int(value.timestamp() * 1000) if isinstance(value, datetime) else None


def _task_dry_run(ti: RuntimeTaskInstance | TaskInstance) -> bool:
    """Whether the task was one of our operators running as a dry run: its row is then kept apart
    with the plan. Reads the operator only if it is already on the task instance (the task process,
    where its fields are rendered); anything else counts as a real run."""
    task = _loaded(ti, "task")
    is_dry_run = getattr(task, "is_dry_run", None) if hasattr(task, "dry_run_flag") else None
    if not callable(is_dry_run):
        return False
    try:
        return bool(is_dry_run())
    except Exception:  # an unrenderable flag: the operator itself failed on it already
        return False


def _loaded(obj: object, name: str) -> object:
    """An attribute only if it is already on the object: never a lazy load through an ORM session."""
    try:
        return vars(obj).get(name)
    except TypeError:  # no __dict__ (slots): a plain value object, safe to read
        return getattr(obj, name, None)


def _never_raises(fn: Callable[P, None]) -> Callable[P, None]:
    """A listener hook that logs instead of raising: Airflow's own state changes come first."""

    @functools.wraps(fn)  # pluggy reads the argument names through __wrapped__
    def hook(*args: P.args, **kwargs: P.kwargs) -> None:
        try:
            fn(*args, **kwargs)
        except Exception as e:
            log.warning("kafka-controller listener: %s failed: %s", fn.__name__, e)

    return hook


def _tags(obj: object) -> set[str]:
    """Tags of the DAG behind a DagRun or a task instance, from what is already loaded."""
    for path in (("dag",), ("task", "dag")):
        target: object = obj
        for attr in path:
            target = _loaded(target, attr) if target is not None else None
        tags = getattr(target, "tags", None)
        if tags:
            return {getattr(t, "name", t) for t in tags}
    return set()


class _Store:
    """One process's audit store: an engine and an ``OperationLog`` on it."""

    def __init__(self, url: str) -> None:
        # Imported on use: the audit store's SQLAlchemy schema checks load alembic (the 'audit'
        # extra); every Airflow process loads this plugin, and only one with an audit URL writes.
        from kafka_controller.audit.engine import create_audit_engine
        from kafka_controller.audit.operations import OperationLog

        self.engine = create_audit_engine(url)
        self.operations = OperationLog(self.engine)


class _Background:
    """A daemon thread that runs queued writes in order; ``flush`` waits for what was queued."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[Callable[[], None] | threading.Event] = queue.SimpleQueue()
        threading.Thread(target=self._loop, name="kafka-controller-audit-listener", daemon=True).start()

    def _loop(self) -> None:
        while True:
            item = self._queue.get()
            if isinstance(item, threading.Event):
                item.set()
                continue
            try:
                item()
            except Exception as e:  # pragma: no cover - each write guards itself
                log.warning("kafka-controller listener: %s", e)

    def submit(self, write: Callable[[], None]) -> None:
        self._queue.put(write)

    def flush(self, timeout_s: float) -> bool:
        done = threading.Event()
        self._queue.put(done)
        return done.wait(timeout_s)


class AuditListener:
    """Register an instance with the plugin; ``conn_id`` names the audit connection."""

    def __init__(self, conn_id: str | None = None, *, only_tag: str | None = DAG_TAG) -> None:
        self._conn_id = conn_id
        self.only_tag = only_tag
        self._pid: int | None = None
        self._store: _Store | None = None
        self._resolved = False
        self._background: _Background | None = None
        self._lock = threading.Lock()

    @property
    def conn_id(self) -> str:
        return self._conn_id or os.environ.get(AUDIT_CONN_ENV) or DEFAULT_AUDIT_CONN_ID

    def _audit(self) -> _Store | None:
        """This process's store, or None when no audit URL is known to this process."""
        with self._lock:
            if self._pid != os.getpid():  # first use in this process, or a forked child
                self._pid, self._store, self._resolved, self._background = os.getpid(), None, False, None
            if not self._resolved:
                self._resolved = True
                url = listener_audit_url(self.conn_id)
                if url is None:
                    log.info(
                        "kafka-controller listener: no audit store known to this process (set "
                        "[kafka_controller] audit_url); outcomes seen here are not recorded"
                    )
                else:
                    self._store = _Store(url)
            return self._store

    def _submit(self, what: str, write: Callable[[_Store], None]) -> None:
        """Run ``write`` now in a task process, else on the background thread; never raise."""

        def guarded() -> None:
            try:
                store = self._audit()
                if store is not None:
                    write(store)
            except Exception as e:  # never break Airflow for the sake of an audit row
                log.warning("kafka-controller listener: could not record %s: %s", what, e)

        if in_task_process():
            guarded()
            return
        with self._lock:
            if self._background is None or self._pid != os.getpid():
                self._pid = os.getpid()
                self._background = _Background()
            background = self._background
        background.submit(guarded)

    def forget_store(self) -> None:
        """Resolve the audit URL again at the next record: the store is resolved once per process,
        so a process that switches audit stores (tests that run one cluster after another) would
        otherwise keep writing to the first. Writes already queued go to the store they were for."""
        self.flush()
        with self._lock:
            self._store, self._resolved = None, False

    def flush(self, timeout_s: float = FLUSH_AT_EXIT_S) -> bool:
        """Wait until every queued write is done (tests, and the process's exit)."""
        background = self._background
        return True if background is None or self._pid != os.getpid() else background.flush(timeout_s)

    def _wanted(self, obj: object, dag_id: str | None) -> bool:
        if self.only_tag is None:
            return True
        return dag_id in DAG_IDS or self.only_tag in _tags(obj)

    def _record(
        self,
        kind: str,
        status: str,
        error: str | None,
        params: dict[str, Any],
        ids: dict[str, str],
        who: str | None,
        why: str,
        dry_run: bool = False,
    ) -> None:
        def write(store: _Store) -> None:
            op = store.operations.start_operation(
                kind,
                who or "airflow",
                why,
                params,
                dry_run,
                airflow_dag_id=ids["airflow_dag_id"],
                airflow_run_id=ids["airflow_run_id"],
                airflow_task_id=ids.get("airflow_task_id"),
            )
            store.operations.finish_operation(op, status, error)

        self._submit(kind, write)

    # -- DAG runs (scheduler, or dag.test's process) ------------------------------------------------
    def _dag_run(self, dag_run: DagRun, status: str, msg: str) -> None:
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
    @_never_raises
    def on_dag_run_success(self, dag_run: DagRun, msg: str) -> None:
        self._dag_run(dag_run, "succeeded", msg)

    @hookimpl
    @_never_raises
    def on_dag_run_failed(self, dag_run: DagRun, msg: str) -> None:
        self._dag_run(dag_run, "failed", msg)

    # -- task instances (task processes) -------------------------------------------------------------
    def _task(
        self, ti: RuntimeTaskInstance | TaskInstance, status: str, error: str | BaseException | None
    ) -> None:
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
            ti_ids, failed_at, why = dict(ids), int(time.time() * 1000), message or "the task failed"

            def close_running(store: _Store) -> None:
                # Imported on use: the audit store's SQLAlchemy queries load alembic (the 'audit'
                # extra), which a process that never records a failed task does not need.
                from kafka_controller.airflow.audit_queries import fail_running_operations

                n = fail_running_operations(
                    store.engine,
                    ti_ids["airflow_dag_id"],
                    ti_ids["airflow_run_id"],
                    ti_ids["airflow_task_id"],
                    why,
                    failed_at,
                )
                if n:
                    log.info("kafka-controller listener: finished %d operation(s) the task left running", n)

            self._submit("the operations the task left running", close_running)
        params = {
            "try_number": getattr(ti, "try_number", None),
            "map_index": getattr(ti, "map_index", -1),
            "operator": type(getattr(ti, "task", None)).__name__,
            "start_ms": _ms(getattr(ti, "start_date", None)),
        }
        self._record(
            "airflow_task",
            status,
            message,
            params,
            ids,
            None,
            f"task {ti.task_id} of {ti.dag_id}",
            dry_run=_task_dry_run(ti),
        )

    @hookimpl
    @_never_raises
    def on_task_instance_success(
        self, previous_state: TaskInstanceState | None, task_instance: RuntimeTaskInstance | TaskInstance
    ) -> None:
        self._task(task_instance, "succeeded", None)

    @hookimpl
    @_never_raises
    def on_task_instance_failed(
        self,
        previous_state: TaskInstanceState | None,
        task_instance: RuntimeTaskInstance | TaskInstance,
        error: str | BaseException | None,
    ) -> None:
        self._task(task_instance, "failed", error if error is not None else "the task failed")

    @hookimpl
    @_never_raises
    def on_task_instance_skipped(
        self, previous_state: TaskInstanceState | None, task_instance: RuntimeTaskInstance | TaskInstance
    ) -> None:
        self._task(task_instance, "cancelled", "skipped")


audit_listener = AuditListener()


atexit.register(audit_listener.flush)
