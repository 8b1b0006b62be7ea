"""The operators' common shape: check the parameters, open an ``operations`` row, act (or plan),
finish the row with the outcome, return a JSON-ready summary (the XCom).

* ``prepare`` coerces and checks the templated parameters and returns what the row records; it runs
  before anything is written, so bad input fails the task with one line and leaves no trace.
* ``run`` does the work. Mutating operators default to ``dry_run=True``: they then plan with the
  in-memory controller (``plan``) and record the planned transitions, linked to the row.
* The row carries requester, reason, parameters (never a secret: the cluster appears as
  ``describe_connection()``), the Airflow ids and the outcome; ``on_kill`` marks it cancelled.

Heavy imports (kazoo, SQLAlchemy, the controller) happen inside ``execute`` via the hooks.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, ClassVar

from airflow.sdk import BaseOperator

from kafka_controller.airflow.connections import DEFAULT_AUDIT_CONN_ID, DEFAULT_CLUSTER_CONN_ID
from kafka_controller.airflow.params import as_bool, as_text


def one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}".rstrip(": ")


class KafkaOperationOperator(BaseOperator):
    """Base class; subclasses set ``operation_kind`` and implement ``prepare`` and ``run``."""

    operation_kind: ClassVar[str] = "operation"
    mutating: ClassVar[bool] = True
    template_fields: Sequence[str] = ("dry_run_flag", "requester", "reason")
    ui_color = "#e8f1f8"

    def __init__(
        self,
        *,
        kafka_controller_conn_id: str = DEFAULT_CLUSTER_CONN_ID,
        kafka_controller_audit_conn_id: str = DEFAULT_AUDIT_CONN_ID,
        dry_run: bool | str = True,
        requester: str | None = None,
        reason: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.kafka_controller_conn_id = kafka_controller_conn_id
        self.kafka_controller_audit_conn_id = kafka_controller_audit_conn_id
        self.dry_run_flag = dry_run  # not ``dry_run``: BaseOperator has a method of that name
        self.requester = requester
        self.reason = reason
        self.operation_id: str | None = None
        self._cluster: Any = None
        self._audit: Any = None

    # -- hooks --------------------------------------------------------------------------------------
    @property
    def cluster(self) -> Any:
        if self._cluster is None:
            from kafka_controller.airflow.hooks.cluster import KafkaClusterHook

            self._cluster = KafkaClusterHook(self.kafka_controller_conn_id)
        return self._cluster

    @property
    def audit(self) -> Any:
        if self._audit is None:
            from kafka_controller.airflow.hooks.audit import AuditStoreHook

            self._audit = AuditStoreHook(self.kafka_controller_audit_conn_id)
        return self._audit

    def _close_hooks(self) -> None:
        for hook in (self._cluster, self._audit):
            if hook is not None:
                hook.close()
        self._cluster = self._audit = None

    # -- to implement --------------------------------------------------------------------------------
    def prepare(self, context: Any) -> dict[str, Any]:
        """Coerce and check parameters (raise ``InvalidArgumentError``); return them for the row."""
        return {}

    def run(self, context: Any) -> dict[str, Any]:
        raise NotImplementedError

    def cancel(self) -> None:
        """Stop work in flight when the task is killed (default: nothing to stop)."""

    # -- the frame ------------------------------------------------------------------------------------
    def is_dry_run(self) -> bool:
        return as_bool("dry_run", self.dry_run_flag) if self.mutating else False

    def _who_and_why(self, context: Any) -> tuple[str, str]:
        dag_run = context.get("dag_run")
        requester = as_text("requester", self.requester, required=False)
        if requester is None:
            user = getattr(dag_run, "triggering_user_name", None)
            requester = user or f"airflow:{context['dag'].dag_id}"
        reason = as_text("reason", self.reason, required=False) or (
            f"{context['dag'].dag_id}: {getattr(dag_run, 'run_type', 'run')} run {context['run_id']}"
        )
        return requester, reason

    def execute(self, context: Any) -> dict[str, Any]:
        try:
            dry_run = self.is_dry_run()
            parameters = self.prepare(context)
            requester, reason = self._who_and_why(context)
            self.operation_id = self.audit.start_operation(
                self.operation_kind,
                requester,
                reason,
                {**parameters, "cluster": self.cluster.describe_connection()},
                dry_run,
                airflow_dag_id=context["dag"].dag_id,
                airflow_run_id=context["run_id"],
                airflow_task_id=context["ti"].task_id,
            )
            self.log.info("operation %s (%s, dry_run=%s)", self.operation_id, self.operation_kind, dry_run)
            try:
                result = self.run(context)
            except BaseException as e:
                self._finish("failed", one_line(e))
                raise
            self._finish("succeeded", None)
            return {"operation_id": self.operation_id, "dry_run": dry_run, **result}
        finally:
            self._close_hooks()

    def _finish(self, status: str, error: str | None) -> None:
        if self.operation_id is None:
            return
        try:
            self.audit.finish_operation(self.operation_id, status, error)
        except Exception as e:  # the outcome of the work matters more than the row's
            self.log.error("could not finish operation %s as %s: %s", self.operation_id, status, one_line(e))

    def on_kill(self) -> None:
        try:
            self.cancel()
        finally:
            self._finish("cancelled", "the task was killed")
            if self._cluster is not None:
                self._cluster.cancel()  # ``execute`` may still run in another thread: stop it polling
            self._close_hooks()  # the task is going away: end its ZooKeeper session now

    # -- dry runs ---------------------------------------------------------------------------------------
    def record_plan(self, changes: Iterable[Any]) -> list[dict[str, Any]]:
        """Write each planned change's transitions (linked to the row) and return the summaries."""
        changes = list(changes)
        records = [r for c in changes for r in c.transitions]
        stored = self.audit.record_transitions(records)
        self.log.info("dry run: recorded %d planned transitions", stored)
        return [c.summary() for c in changes]

    def dry_run_of(self, snapshot: Any | None = None) -> Any:
        from kafka_controller.airflow.planner import DryRun

        return DryRun(
            snapshot if snapshot is not None else self.cluster.snapshot(),
            broker_defaults=self.cluster.connection.broker_defaults,
            operation_id=self.operation_id,
        )
