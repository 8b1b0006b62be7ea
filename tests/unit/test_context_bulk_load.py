"""The context's bulk load of a topic's assignment (a failover's)."""

from __future__ import annotations

from kafka_controller.core.context import ControllerContext
from kafka_controller.domain.values import ReplicaAssignment, TopicPartition


def test_a_loaded_topic_assignment_shares_its_partitions() -> None:
    """A failover's context load keeps the decoded partitions as the shared ones, rather than
    building each partition again on first use."""
    ctx = ControllerContext()
    ctx.set_all_topics(["t"])
    decoded = {TopicPartition("t", p): ReplicaAssignment((p, p + 1)) for p in (2, 0, 1)}
    ctx.load_topic_assignment("t", decoded)
    assert list(ctx.partition_assignments["t"].items()) == [(tp.partition, a) for tp, a in decoded.items()]
    assert all(tp is key for tp, key in zip(ctx.all_partitions, decoded, strict=True))
    assert [tp for tp, _ in ctx.iter_assignments()] == list(decoded)
