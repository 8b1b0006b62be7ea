"""Leader elections: preferred (partitions, a topic, or all) and the guarded recovery of offline
partitions by unclean election."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from kafka_controller.admin.election import group_election_results
from kafka_controller.airflow.maintenance import recoverable_offline
from kafka_controller.airflow.operators.base import KafkaOperationOperator
from kafka_controller.airflow.params import as_bool, as_partitions, as_str_list
from kafka_controller.airflow.runbook_support import OperationFailedError
from kafka_controller.airflow.runbooks import preferred_election
from kafka_controller.domain.errors import InvalidArgumentError
from kafka_controller.domain.values import TopicPartition

if TYPE_CHECKING:
    from airflow.sdk import Context


class PreferredLeaderElectionOperator(KafkaOperationOperator):
    """Preferred-replica election for ``partitions``, the partitions of ``topics``, or (neither
    given) every partition, as ``kafka-leader-election --election-type preferred``."""

    operation_kind = "preferred_leader_election"
    template_fields: Sequence[str] = (*KafkaOperationOperator.template_fields, "partitions", "topics")

    def __init__(self, *, partitions: Any = None, topics: Any = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.partitions = partitions
        self.topics = topics

    def prepare(self, context: Context) -> dict[str, Any]:
        parts = as_partitions("partitions", self.partitions)
        topics = as_str_list("topics", self.topics)
        if parts and topics:
            raise InvalidArgumentError("give 'partitions' or 'topics', not both")
        self._targets: list[TopicPartition] | None = parts or None
        if topics:
            known = self.cluster.get_store().get_all_topics()
            unknown = [t for t in topics if t not in known]
            if unknown:
                raise InvalidArgumentError(f"unknown topic {unknown[0]!r}")
            self._targets = sorted(self.cluster.assignments(topics))
        scope = "partitions" if parts else "topics" if topics else "all"
        return {"scope": scope, "partitions": [str(tp) for tp in parts], "topics": topics}

    def run(self, context: Context) -> dict[str, Any]:
        if self.is_dry_run():
            with self.dry_run_of() as plan:
                return {"plan": self.record_plan([plan.elect_leaders("preferred", self._targets)])}
        before = self.cluster.describe().summary["not_preferred_leader"]
        result = preferred_election(self.cluster, self._targets, self.operation_id, self.say)
        after = self.cluster.describe().summary["not_preferred_leader"]
        return {**result, "not_preferred_leader_before": before, "not_preferred_leader_after": after}


class RecoverOfflinePartitionsOperator(KafkaOperationOperator):
    """Bring named offline partitions back with an unclean election (a replica outside the ISR
    becomes leader: committed data may be lost). Guarded: the run must name the exact partitions
    and set ``confirm_unclean``; partitions that are not offline, or have no live replica, are
    refused. The dry run shows who would lead each one."""

    operation_kind = "recover_offline_partitions"
    template_fields: Sequence[str] = (
        *KafkaOperationOperator.template_fields,
        "partitions",
        "confirm_unclean",
    )

    def __init__(self, *, partitions: Any, confirm_unclean: bool | str = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.partitions = partitions
        self.confirm_unclean = confirm_unclean

    def prepare(self, context: Context) -> dict[str, Any]:
        self._targets = as_partitions("partitions", self.partitions)
        confirm = as_bool("confirm_unclean", self.confirm_unclean)
        if not self._targets:
            raise InvalidArgumentError("name the offline partitions to recover in 'partitions' (never all)")
        if not self.is_dry_run() and not confirm:
            raise InvalidArgumentError(
                "unclean election may lose committed data: set 'confirm_unclean' to true"
            )
        view = self.cluster.describe({tp.topic for tp in self._targets})
        known = {p.topic_partition for p in view.partitions}
        missing = [tp for tp in self._targets if tp not in known]
        if missing:
            raise InvalidArgumentError(f"unknown partition {missing[0]}")
        candidates = recoverable_offline(view, self._targets)
        healthy = [tp for tp in self._targets if tp not in candidates]
        if healthy:
            raise InvalidArgumentError(f"partition {healthy[0]} is not offline; refusing an unclean election")
        hopeless = [tp for tp, live in candidates.items() if not live]
        if hopeless:
            raise InvalidArgumentError(
                f"partition {hopeless[0]} has no live replica; start one of its brokers first"
            )
        return {
            "partitions": [str(tp) for tp in self._targets],
            "confirm_unclean": confirm,
            "candidates": {str(tp): live for tp, live in candidates.items()},
        }

    def run(self, context: Context) -> dict[str, Any]:
        if self.is_dry_run():
            with self.dry_run_of() as plan:
                return {"plan": self.record_plan([plan.elect_leaders("unclean", self._targets)])}
        outcome = group_election_results(
            self.cluster.elect_leaders("unclean", self._targets, self.operation_id)
        )
        if outcome.failed:
            tp, (code, msg) = next(iter(outcome.failed.items()))
            raise OperationFailedError(
                f"unclean election failed for {len(outcome.failed)} partition(s), "
                f"e.g. {tp}: {code} {msg or ''}"
            )
        return {
            "elected": {str(tp): leader for tp, leader in outcome.succeeded.items()},
            "not_needed": [str(tp) for tp in outcome.not_needed],
        }
