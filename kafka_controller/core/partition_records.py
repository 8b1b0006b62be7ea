"""Audit records of partition transitions (``PartitionTransition``), built positionally: one
per partition of a failover, so the field order is checked once, at import."""

from __future__ import annotations

from kafka_controller.domain.audit_records import PartitionTransition, require_leading_fields
from kafka_controller.domain.states import PartitionState
from kafka_controller.domain.values import LeaderAndIsr, TopicPartition

__all__ = ["error_text", "partition_transition"]


def error_text(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


def partition_transition(
    tp: TopicPartition,
    current: PartitionState,
    target: PartitionState,
    outcome: str,
    before: LeaderAndIsr | None,
    after: LeaderAndIsr | None,
    strategy: str | None = None,
    unclean: bool = False,
    error: str | None = None,
) -> PartitionTransition:
    """Positional, in ``PartitionTransition``'s field order: one per partition of a failover."""
    return PartitionTransition(
        tp.topic,
        tp.partition,
        _KAFKA_NAME[current],
        _KAFKA_NAME[target],
        outcome,
        before.leader if before is not None else None,
        after.leader if after is not None else None,
        before.isr if before is not None else None,
        after.isr if after is not None else None,
        before.leader_epoch if before is not None else None,
        after.leader_epoch if after is not None else None,
        strategy,
        unclean,
        error,
    )


_KAFKA_NAME: dict[PartitionState, str] = {s: s.kafka_name for s in PartitionState}
# ``partition_transition`` is positional: refuse to import if ``PartitionTransition``'s leading fields move.
_RECORD_FIELDS = [
    "topic",
    "partition",
    "from_state",
    "to_state",
    "outcome",
    "leader_before",
    "leader_after",
    "isr_before",
    "isr_after",
    "leader_epoch_before",
    "leader_epoch_after",
    "election_strategy",
    "unclean",
    "error",
]
require_leading_fields(PartitionTransition, _RECORD_FIELDS, "partition_records.partition_transition")
