"""The operators' common shape: check the parameters, open an ``operations`` row, act (or plan),
finish the row with the outcome, return a JSON-ready summary (the XCom).

* ``prepare`` coerces and checks the templated parameters and returns what the row records; it runs
  before anything is written, so bad input fails the task with one line and leaves no trace.
* ``run`` does the work. Mutating operators default to ``dry_run=True``: they then plan with the
  in-memory controller (``plan``) and record the planned transitions, linked to the row.
* The task log says what happens in a few readable lines: the plan (dry run) or the progress (per
  broker, per batch; the runbooks' ``say``), then the result (``describe_result``).
* A dry run whose real run would be refused fails, with the plan recorded (``refuse_dry_run``), as
  ``kafka-reassign-partitions --verify`` fails on what it cannot do.
* The row carries requester, reason, parameters (never a secret: the cluster appears as
  ``describe_connection()``), the Airflow ids and the outcome; ``on_kill`` marks it cancelled.

A DAG file imports these operators, so what only a running task needs and costs a parse its
time (kazoo, the audit store's alembic migrations) is imported on use, inside the hooks.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException

from kafka_controller.airflow.connections import DEFAULT_AUDIT_CONN_ID, DEFAULT_CLUSTER_CONN_ID
from kafka_controller.airflow.hooks.audit import AuditStoreHook
from kafka_controller.airflow.hooks.cluster import BrokerLostError, KafkaClusterHook, OperationCancelledError
from kafka_controller.airflow.params import as_bool, as_text, refuse_unknown_conf
from kafka_controller.airflow.plan_model import ClusterSnapshot, PlannedChange
from kafka_controller.airflow.planner import DryRun
from kafka_controller.airflow.runbook_support import RefusedError

if TYPE_CHECKING:
    from airflow.sdk import Context


def one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}".rstrip(": ")


def compact(value: object, limit: int = 600) -> str:
    """A JSON line for the task log, cut at ``limit`` characters."""
    text = json.dumps(value, default=str, sort_keys=True, separators=(", ", ": "))
    return text if len(text) <= limit else text[: limit - 3] + "..."


def plan_lines(summary: dict[str, Any], limit: int = 5) -> list[str]:
    """A planned change (``PlannedChange.summary``) as the lines a reviewer reads first."""
    moved = summary.get("leaders_moved", {})
    shown = ", ".join(f"{tp} {a}->{b}" for tp, (a, b) in list(moved.items())[:limit])
    more = f" (+{len(moved) - limit} more)" if len(moved) > limit else ""
    lines = [
        f"plan {summary['action']}: {len(moved)} leadership(s) move{': ' + shown + more if moved else ''}; "
        f"{summary['partition_transitions']} partition and {summary['replica_transitions']} replica "
        "transitions planned"
    ]
    if summary.get("offline_after"):
        off = summary["offline_after"]
        lines.append(
            f"plan {summary['action']}: {len(off)} partition(s) would go OFFLINE: {', '.join(off[:limit])}"
        )
    if summary.get("unclean_needed"):
        lines.append(
            f"plan {summary['action']}: unclean election needed for {sorted(summary['unclean_needed'])}"
        )
    return lines


def _killed(e: BaseException) -> bool:
    return isinstance(e, OperationCancelledError)


def _no_retry_if_a_broker_was_lost(e: BaseException) -> None:
    """A broker lost mid-operation needs a person, not the same run again in a few minutes: the task
    fails without its retries (``AirflowFailException``), its message naming the broker."""
    if isinstance(e, BrokerLostError):
        raise AirflowFailException(str(e)) from e


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
        self._cluster: KafkaClusterHook | None = None
        self._audit: AuditStoreHook | None = None

    # -- hooks --------------------------------------------------------------------------------------
    @property
    def cluster(self) -> KafkaClusterHook:
        if self._cluster is None:
            self._cluster = KafkaClusterHook(self.kafka_controller_conn_id)
        return self._cluster

    @property
    def audit(self) -> AuditStoreHook:
        if self._audit is None:
            self._audit = AuditStoreHook(self.kafka_controller_audit_conn_id)
        return self._audit

    def _close_hooks(self) -> None:
        for hook in (self._cluster, self._audit):
            if hook is not None:
                hook.close()
        self._cluster = self._audit = None

    # -- to implement --------------------------------------------------------------------------------
    def prepare(self, context: Context) -> dict[str, Any]:
        """Coerce and check parameters (raise ``InvalidArgumentError``); return them for the row."""
        return {}

    def run(self, context: Context) -> dict[str, Any]:
        raise NotImplementedError

    def cancel(self) -> str:
        """Stop work in flight when the task is killed; returns what was cancelled and what is left,
        for the task log (default: nothing to stop)."""
        return "nothing was in flight to cancel"

    # -- the frame ------------------------------------------------------------------------------------
    def is_dry_run(self) -> bool:
        return as_bool("dry_run", self.dry_run_flag) if self.mutating else False

    def _who_and_why(self, context: Context) -> tuple[str, str]:
        dag_run = context.get("dag_run")
        requester = as_text("requester", self.requester, required=False)
        if requester is None:
            user = getattr(dag_run, "triggering_user_name", None)
            requester = user or f"airflow:{context['dag'].dag_id}"
        reason = as_text("reason", self.reason, required=False) or (
            f"{context['dag'].dag_id}: {getattr(dag_run, 'run_type', 'run')} run {context['run_id']}"
        )
        return requester, reason

    def execute(self, context: Context) -> dict[str, Any]:
        logging.getLogger("alembic").setLevel(logging.WARNING)  # schema checks are not news
        try:
            self._refuse_unknown_conf(context)
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
                cluster_id=self.cluster.cluster_id(),  # one audit store may serve several clusters
            )
            self.log.info(
                "%s %s: operation %s on %s",
                "DRY RUN (nothing changes)" if dry_run else "LIVE",
                self.operation_kind,
                self.operation_id,
                self.cluster.describe_connection().get("zookeeper"),
            )
            if parameters:
                self.log.info("parameters: %s", compact(parameters))
            try:
                result = self.run(context)
            except BaseException as e:
                if _killed(e):  # ``on_kill`` said what it cancelled and finished the row
                    self.log.debug("%s stopped: %s", self.operation_kind, one_line(e))
                    raise
                self.log.error("%s failed: %s", self.operation_kind, one_line(e))
                self._finish("failed", one_line(e))
                _no_retry_if_a_broker_was_lost(e)
                raise
            for line in self.describe_result(result):
                self.log.info("%s", line)
            self._finish("succeeded", None, result)
            return {"operation_id": self.operation_id, "dry_run": dry_run, **result}
        finally:
            self._close_hooks()

    @staticmethod
    def _refuse_unknown_conf(context: Context) -> None:
        dag = context.get("dag")
        params = getattr(dag, "params", None)
        if params is None:  # called outside a DAG run (tests call ``execute`` directly)
            return
        conf = getattr(context.get("dag_run"), "conf", None)
        refuse_unknown_conf(conf, list(params.keys()), str(getattr(dag, "dag_id", "this DAG")))

    def describe_result(self, result: dict[str, Any]) -> list[str]:
        """The result as a few log lines (subclasses say it better); the XCom holds all of it."""
        return [f"result: {compact(result)}"]

    def say(self, message: str) -> None:
        """Progress for the task log (handed to the runbooks)."""
        self.log.info("%s", message)

    def _finish(self, status: str, error: str | None, result: dict[str, Any] | None = None) -> None:
        if self.operation_id is None:
            return
        try:
            self.audit.finish_operation(self.operation_id, status, error, result=result)
        except Exception as e:  # the outcome of the work matters more than the row's
            self.log.error("could not finish operation %s as %s: %s", self.operation_id, status, one_line(e))

    def on_kill(self) -> None:
        said = "cancelling failed"
        try:
            said = self.cancel()
        except Exception as e:
            said = f"cancelling failed ({one_line(e)})"
            raise
        finally:
            self.log.warning(
                "task killed: %s; operation %s marked cancelled", said, self.operation_id or "(none yet)"
            )
            self._finish("cancelled", "the task was killed")
            if self._cluster is not None:
                self._cluster.cancel()  # ``execute`` may still run in another thread: stop it polling
            self._close_hooks()  # the task is going away: end its ZooKeeper session now

    # -- dry runs ---------------------------------------------------------------------------------------
    def record_plan(self, changes: Iterable[PlannedChange]) -> list[dict[str, Any]]:
        """Write each planned change's transitions (linked to the row) and return the summaries."""
        changes = list(changes)
        records = [r for c in changes for r in c.transitions]
        stored = self.audit.record_transitions(records)
        summaries = [c.summary() for c in changes]
        for summary in summaries:
            for line in plan_lines(summary):
                self.log.info("%s", line)
        self.log.info(
            "dry run: recorded %d planned transitions under operation %s", stored, self.operation_id
        )
        return summaries

    def refuse_dry_run(self, reason: str | None) -> None:
        """Fail the dry run (its plan is recorded) when the real run would be refused for ``reason``."""
        if reason:
            raise RefusedError(f"dry run: the real run would be refused: {reason}")

    def dry_run_of(self, snapshot: ClusterSnapshot | None = None) -> DryRun:
        return DryRun(
            snapshot if snapshot is not None else self.cluster.snapshot(),
            broker_defaults=self.cluster.connection.broker_defaults,
            operation_id=self.operation_id,
        )
