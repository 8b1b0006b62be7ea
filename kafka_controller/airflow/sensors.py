"""``ReassignmentSensor``: verify a reassignment, deferrably, then remove its throttles.

Like ``kafka-reassign-partitions.sh --verify``: complete means no partition of the plan is still
adding or removing replicas and each has exactly its target replica set; once complete, the
replication throttles are removed (broker rates on every registered broker, throttled-replica lists
on the plan's topics). The wait runs in the triggerer (``triggers.ReassignmentTrigger``) unless
``deferrable=False``. The verification is recorded as an ``operations`` row of its own.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseSensorOperator
from airflow.sdk.exceptions import AirflowFailException

from kafka_controller.airflow.connections import DEFAULT_AUDIT_CONN_ID, DEFAULT_CLUSTER_CONN_ID
from kafka_controller.airflow.hooks.audit import AuditStoreHook
from kafka_controller.airflow.hooks.cluster import BrokerLostError, KafkaClusterHook
from kafka_controller.airflow.params import as_bool, as_json
from kafka_controller.airflow.reassignment_plan import Plan, plan_from_json, plan_to_json
from kafka_controller.airflow.runbook_support import OperationFailedError
from kafka_controller.airflow.runbooks import reassignment_progress
from kafka_controller.airflow.triggers import ReassignmentTrigger

if TYPE_CHECKING:
    from airflow.sdk import Context


class ReassignmentSensor(BaseSensorOperator):
    """Waits until every partition of ``plan`` (``plan_to_json`` or Kafka's JSON) is reassigned."""

    template_fields: Sequence[str] = ("plan", "dry_run_flag")

    def __init__(
        self,
        *,
        plan: Any,
        kafka_controller_conn_id: str = DEFAULT_CLUSTER_CONN_ID,
        kafka_controller_audit_conn_id: str = DEFAULT_AUDIT_CONN_ID,
        deferrable: bool = True,
        clear_throttles: bool = True,
        dry_run: bool | str = False,
        poke_interval: float = 2.0,
        timeout: float = 3600.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(poke_interval=poke_interval, timeout=timeout, **kwargs)
        self.plan = plan
        self.kafka_controller_conn_id = kafka_controller_conn_id
        self.kafka_controller_audit_conn_id = kafka_controller_audit_conn_id
        self.deferrable = deferrable
        self.clear_throttles = clear_throttles
        self.dry_run_flag = dry_run  # not ``dry_run``: BaseOperator has a method of that name

    def _plan(self) -> Plan:
        return plan_from_json(as_json("plan", self.plan), "parameter 'plan'")

    def _hook(self) -> KafkaClusterHook:
        return KafkaClusterHook(self.kafka_controller_conn_id)

    @staticmethod
    def _needed_brokers(plan: Plan) -> list[int]:
        """The plan's target brokers: while one of them is not registered, its new replicas cannot
        catch up and the wait could only time out."""
        return sorted({b for rs in plan.values() for b in rs})

    def poke(self, context: Context) -> bool:
        plan = self._plan()
        with self._hook() as hook:
            progress = reassignment_progress(hook.get_store(), plan)
        return len(progress["complete"]) == len(plan)

    def execute(self, context: Context) -> dict[str, Any]:
        logging.getLogger("alembic").setLevel(logging.WARNING)  # schema checks are not news
        if as_bool("dry_run", self.dry_run_flag):
            self.log.info("verify result: dry run, nothing was executed and nothing is verified")
            return {"verified": False, "note": "dry run: nothing was executed, nothing to verify"}
        plan = self._plan()
        if not plan or self.poke(context):
            return self._finish(context, {"status": "complete", "partitions": len(plan)})
        if not self.deferrable:
            super().execute(context)
            return self._finish(context, {"status": "complete", "partitions": len(plan)})
        self.defer(
            trigger=ReassignmentTrigger(
                self.kafka_controller_conn_id,
                plan_to_json(plan),
                self.poke_interval,
                float(self.timeout),
                brokers=self._needed_brokers(plan),
            ),
            method_name="execute_complete",
        )

    def execute_complete(self, context: Context, event: dict[str, Any] | None = None) -> dict[str, Any]:
        if event and event.get("status") == "broker_lost":
            left = event.get("progress") or {}
            lost = BrokerLostError(
                event.get("brokers") or [],
                f"the reassignment's verification; stopped there ({left.get('in_progress', 0)} "
                "partition(s) left in flight with the controller)",
            )
            self.log.error("verify result: %s", lost)
            raise AirflowFailException(str(lost))  # no retry: a lost broker needs a person
        if not event or event.get("status") != "complete":
            error = OperationFailedError(f"reassignment not verified: {event}")
            self.log.error("verify result: %s", error)
            raise error
        return self._finish(context, event)

    def _finish(self, context: Context, event: dict[str, Any]) -> dict[str, Any]:
        plan = self._plan()
        topics = sorted({tp.topic for tp in plan})
        with self._hook() as hook:
            if self.clear_throttles:
                hook.clear_throttles(hook.get_store().get_sorted_broker_list(), topics)
            described = hook.describe_connection()
        result = {
            "verified": True,
            "partitions": event.get("partitions", len(plan)),
            "throttles_cleared": self.clear_throttles,
        }
        audit = AuditStoreHook(self.kafka_controller_audit_conn_id)
        try:
            op = audit.start_operation(
                "reassignment_verify",
                getattr(context.get("dag_run"), "triggering_user_name", None)
                or f"airflow:{context['dag'].dag_id}",
                f"verify reassignment of {len(plan)} partition(s) of {', '.join(topics) or 'no topic'}",
                {"partitions": len(plan), "topics": topics, "cluster": described},
                False,
                airflow_dag_id=context["dag"].dag_id,
                airflow_run_id=context["run_id"],
                airflow_task_id=context["ti"].task_id,
            )
            audit.finish_operation(op, "succeeded")
        finally:
            audit.close()
        self.log.info(
            "verify result: the reassignment of %d partition(s) of %s is complete%s (operation %s)",
            result["partitions"],
            ", ".join(topics) or "no topic",
            "; replication throttles removed" if self.clear_throttles else "",
            op,
        )
        return {"operation_id": op, **result}
