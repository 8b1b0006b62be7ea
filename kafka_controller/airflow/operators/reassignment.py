"""Reassignment lifecycle: generate (with movement caps) -> execute in batches (resumable, throttled,
cancelled when killed) -> verify (``sensors.ReassignmentSensor``, deferrable)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import ResumableJobMixin

from kafka_controller.admin.reassignment import validate_reassignment
from kafka_controller.admin.throttle import throttle_configs
from kafka_controller.airflow.operators.base import KafkaOperationOperator
from kafka_controller.airflow.params import as_int, as_int_list, as_json, as_partitions, as_str_list
from kafka_controller.airflow.reassignment_plan import (
    DEFAULT_MAX_CLUSTER,
    DEFAULT_MAX_PER_BROKER,
    generate_plan,
    movements,
    plan_batches,
    plan_from_json,
    plan_to_json,
)
from kafka_controller.airflow.runbooks import (
    cancel_reassignment,
    execute_reassignment,
    reassignment_progress,
)
from kafka_controller.domain.errors import InvalidArgumentError
from kafka_controller.domain.values import TopicPartition

if TYPE_CHECKING:
    from airflow.sdk import Context
    from pydantic import JsonValue


def _current(op: KafkaOperationOperator, topics: set[str]) -> dict[TopicPartition, tuple[int, ...]]:
    return {tp: ra.replicas for tp, ra in op.cluster.assignments(topics).items()}


class GenerateReassignmentOperator(KafkaOperationOperator):
    """A reviewed plan and its batches. Either ``plan`` (Kafka's reassignment JSON, checked against
    the cluster) or ``topics`` + ``broker_list`` (a minimal-movement plan, ``reassignment_plan``).
    Batches respect ``max_movements_per_broker`` and ``max_cluster_movements``. Changes nothing."""

    operation_kind = "reassignment_generate"
    mutating = False
    template_fields: Sequence[str] = (
        *KafkaOperationOperator.template_fields,
        "plan",
        "topics",
        "broker_list",
        "max_movements_per_broker",
        "max_cluster_movements",
    )

    def __init__(
        self,
        *,
        plan: Any = None,
        topics: Any = None,
        broker_list: Any = None,
        max_movements_per_broker: int | str = DEFAULT_MAX_PER_BROKER,
        max_cluster_movements: int | str = DEFAULT_MAX_CLUSTER,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.plan = plan
        self.topics = topics
        self.broker_list = broker_list
        self.max_movements_per_broker = max_movements_per_broker
        self.max_cluster_movements = max_cluster_movements

    def prepare(self, context: Context) -> dict[str, Any]:
        self._per_broker = as_int("max_movements_per_broker", self.max_movements_per_broker, minimum=1)
        self._cluster_cap = as_int("max_cluster_movements", self.max_cluster_movements, minimum=1)
        given = self.plan not in (None, "", [], {})
        topics = as_str_list("topics", self.topics)
        brokers = as_int_list("broker_list", self.broker_list)
        if given == bool(topics or brokers):
            raise InvalidArgumentError("give either 'plan' or 'topics' with 'broker_list'")
        registered = self.cluster.get_store().get_sorted_broker_list()
        if given:
            plan = plan_from_json(as_json("plan", self.plan), "parameter 'plan'")
            self._current_map = _current(self, {tp.topic for tp in plan})
            by_topic: dict[str, set[int]] = {}
            for tp in self._current_map:
                by_topic.setdefault(tp.topic, set()).add(tp.partition)
            validate_reassignment(plan, by_topic, registered, "parameter 'plan'")
        else:
            if not topics or not brokers:
                raise InvalidArgumentError("'topics' and 'broker_list' must both be given")
            unknown = [b for b in brokers if b not in registered]
            if unknown:
                raise InvalidArgumentError(f"broker {unknown[0]} in 'broker_list' is not registered")
            self._current_map = _current(self, set(topics))
            plan = generate_plan(self._current_map, topics, brokers)
        self._plan = {tp: rs for tp, rs in plan.items() if tuple(self._current_map.get(tp, ())) != tuple(rs)}
        return {
            "source": "plan" if given else "generated",
            "topics": topics,
            "broker_list": brokers,
            "max_movements_per_broker": self._per_broker,
            "max_cluster_movements": self._cluster_cap,
            "partitions": len(self._plan),
        }

    def run(self, context: Context) -> dict[str, Any]:
        batches = plan_batches(
            self._plan, self._current_map, max_per_broker=self._per_broker, max_cluster=self._cluster_cap
        )
        moves = movements(self._current_map, self._plan)
        return {
            "plan": plan_to_json(self._plan),
            "current": plan_to_json({tp: self._current_map[tp] for tp in self._plan}),
            "batches": [[str(tp) for tp in b] for b in batches],
            "replica_movements": sum(len(m.adding) for m in moves.values()),
        }


class ExecuteReassignmentOperator(ResumableJobMixin, KafkaOperationOperator):
    """Execute a generated plan batch by batch (``runbooks.execute_reassignment``), with an optional
    replication throttle. A retried task reconnects to the same reassignment (``ResumableJobMixin``):
    done partitions are skipped and partitions in flight awaited, never resubmitted. Killing the
    task cancels what is in flight. With ``wait_for_last_batch=False`` the last batch is left to the
    deferrable ``ReassignmentSensor`` (no worker slot held while data moves)."""

    operation_kind = "reassignment_execute"
    external_id_key = "kafka_controller_reassignment"
    template_fields: Sequence[str] = (*KafkaOperationOperator.template_fields, "plan", "batches", "throttle")

    def __init__(
        self,
        *,
        plan: Any,
        batches: Any = None,
        throttle: int | str | None = None,
        batch_timeout_s: float = 3600.0,
        wait_for_last_batch: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.plan = plan
        self.batches = batches
        self.throttle = throttle
        self.batch_timeout_s = batch_timeout_s
        self.wait_for_last_batch = wait_for_last_batch

    def prepare(self, context: Context) -> dict[str, Any]:
        self._plan = plan_from_json(as_json("plan", self.plan), "parameter 'plan'")
        if not self._plan:
            raise InvalidArgumentError("the reassignment plan is empty: nothing to execute")
        raw = (
            as_json("batches", self.batches)
            if self.batches not in (None, "", [])
            else [[str(tp) for tp in self._plan]]
        )
        self._batches = [as_partitions("batches", b) for b in raw]
        planned = [tp for b in self._batches for tp in b]
        if sorted(planned) != sorted(self._plan) or len(set(planned)) != len(planned):
            raise InvalidArgumentError("'batches' must list every partition of the plan exactly once")
        self._throttle = (
            None if self.throttle in (None, "", 0, "0") else as_int("throttle", self.throttle, minimum=1)
        )
        return {
            "partitions": len(self._plan),
            "batches": len(self._batches),
            "throttle_bytes_per_s": self._throttle,
            "plan": plan_to_json(self._plan),
        }

    def run(self, context: Context) -> dict[str, Any]:
        if self.is_dry_run():
            with self.dry_run_of() as plan:
                return {"plan": self.record_plan([plan.reassign(self._plan)])}
        self.execute_resumable(context)  # on a reconnect the mixin returns poll's None, not the result
        return self.get_job_result(None, context)

    # -- ResumableJobMixin: the "job" is the plan's reassignment in ZooKeeper ----------------------------
    def submit_job(self, context: Context) -> JsonValue:
        if self._throttle is not None:
            current = {
                tp: ra.replicas
                for tp, ra in self.cluster.assignments({tp.topic for tp in self._plan}).items()
            }
            brokers, topics = throttle_configs(self._plan, current, self._throttle)
            self.cluster.set_throttles(brokers, topics)
        return {"operation_id": self.operation_id, "partitions": len(self._plan)}

    def get_job_status(self, external_id: JsonValue, context: Context) -> str:
        first = external_id.get("operation_id") if isinstance(external_id, dict) else None
        self._resumed_from = first if first != self.operation_id else None  # an earlier attempt's

        progress = reassignment_progress(self.cluster.get_store(), self._plan)
        if len(progress["complete"]) == len(self._plan):
            return "SUCCEEDED"
        return "RUNNING" if progress["in_progress"] or progress["complete"] else "NOT_STARTED"

    def is_job_active(self, status: str) -> bool:
        return status == "RUNNING"

    def is_job_succeeded(self, status: str) -> bool:
        return status == "SUCCEEDED"

    def poll_until_complete(self, external_id: JsonValue, context: Context) -> None:
        batches = self._batches if self.wait_for_last_batch else self._batches[:-1]
        self._reports = execute_reassignment(
            self.cluster,
            self._plan,
            batches,
            operation_id=self.operation_id,
            batch_timeout_s=self.batch_timeout_s,
            say=self.say,
        )
        if not self.wait_for_last_batch:
            last = {tp: self._plan[tp] for tp in self._batches[-1]}
            pending = reassignment_progress(self.cluster.get_store(), last)["pending"]
            if pending:
                self.cluster.alter_reassignments({tp: last[tp] for tp in pending}, self.operation_id)
            self._reports.append(
                {"batch": len(self._batches), "partitions": len(last), "submitted": len(pending)}
            )

    def get_job_result(self, external_id: JsonValue, context: Context) -> dict[str, Any]:
        return {
            "batches": getattr(self, "_reports", []),
            "resumed_from_operation": getattr(self, "_resumed_from", None),
            "throttle_bytes_per_s": self._throttle,
        }

    def cancel(self) -> str:
        """Cancel what is in flight (as ``kafka-reassign-partitions --cancel``: the replicas go back
        to their original set) and remove the throttle this task set, since the verify task, which
        would remove it, does not run after a kill."""
        plan = getattr(self, "_plan", None)
        if self.is_dry_run() or not plan:
            return "nothing was in flight to cancel (a dry run, or killed before the plan was read)"
        cancelled = cancel_reassignment(self.cluster, plan, self.operation_id)
        progress = reassignment_progress(self.cluster.get_store(), plan)
        throttled = ""
        if self._throttle is not None:
            topics = sorted({tp.topic for tp in plan})
            brokers = sorted({b for rs in plan.values() for b in rs} | self._sources(topics))
            self.cluster.clear_throttles(brokers, topics)
            throttled = f"; removed the replication throttle from brokers {brokers}"
        shown = ", ".join(cancelled[:5]) + (f" (+{len(cancelled) - 5} more)" if len(cancelled) > 5 else "")
        return (
            f"cancelled {len(cancelled)} reassignment(s) in flight{': ' + shown if cancelled else ''}"
            f"{throttled}; left: {len(progress['complete'])} of {len(plan)} partition(s) already moved "
            "(they stay there), the others on their old replicas"
        )

    def _sources(self, topics: list[str]) -> set[int]:
        return {b for ra in self.cluster.assignments(topics).values() for b in ra.replicas}
