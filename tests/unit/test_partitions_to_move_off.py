"""``ControllerContext.partitions_to_move_off``: Kafka's ``partitionsToActOn`` of a controlled
shutdown (``KafkaController.doControlledShutdown``), split by leadership, in one pass."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_controller.core.context import ControllerContext
from kafka_controller.domain.values import (
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
    TopicPartition,
)

BROKERS = (1, 2, 3, 4)


def _kafka(ctx: ControllerContext, broker_id: int) -> tuple[list[TopicPartition], list[TopicPartition]]:
    """Kafka's code, literally: ``partitionsOnBroker(id).filter(...)``, then ``partition`` by leader."""
    to_act_on = [
        tp
        for tp in ctx.partitions_on_broker(broker_id)
        if len(ctx.partition_replica_assignment(tp)) > 1
        and ctx.partition_leadership_info(tp) is not None
        and not ctx.is_topic_queued_up_for_deletion(tp.topic)
    ]
    led = [tp for tp in to_act_on if ctx.partition_leadership_info(tp).leader_and_isr.leader == broker_id]  # type: ignore[union-attr]
    return led, [tp for tp in to_act_on if tp not in set(led)]


_partition = st.tuples(
    st.lists(st.sampled_from(BROKERS), min_size=1, max_size=3, unique=True),  # replicas
    st.one_of(st.none(), st.sampled_from((-1, *BROKERS))),  # cached leader, if any
)


@settings(max_examples=150, deadline=None)
@given(
    topics=st.lists(st.lists(_partition, min_size=1, max_size=4), min_size=0, max_size=8),
    queued=st.sets(st.integers(0, 7), max_size=3),
    broker_id=st.sampled_from(BROKERS),
)
def test_is_kafkas_partitions_to_act_on_split_by_leadership(
    topics: list[list[tuple[list[int], int | None]]], queued: set[int], broker_id: int
) -> None:
    ctx = ControllerContext()
    for t, partitions in enumerate(topics):
        for p, (replicas, leader) in enumerate(partitions):
            tp = TopicPartition(f"t{t}", p)
            ctx.update_partition_full_replica_assignment(tp, ReplicaAssignment.of(replicas))
            if leader is not None:
                lai = LeaderAndIsr.initial(leader, tuple(replicas))
                ctx.put_partition_leadership_info(tp, LeaderIsrAndControllerEpoch(lai, 1))
    ctx.queue_topic_deletion({f"t{t}" for t in queued if t < len(topics)})
    assert ctx.partitions_to_move_off(broker_id) == _kafka(ctx, broker_id)


def test_hands_out_the_contexts_shared_partitions() -> None:
    """The returned ``TopicPartition``s are the context's shared ones (the request batch and the
    state maps key on them), whichever of the context's lookups made them first."""
    ctx = ControllerContext()
    a0, a1 = TopicPartition("a", 0), TopicPartition("a", 1)
    for tp in (a0, a1):
        ctx.update_partition_full_replica_assignment(tp, ReplicaAssignment.of((1, 2)))
        ctx.put_partition_leadership_info(tp, LeaderIsrAndControllerEpoch(LeaderAndIsr.initial(1, (1, 2)), 1))
    first = ctx.partitions_for_topic("a")
    led, followed = ctx.partitions_to_move_off(1)
    assert led == [a0, a1] and followed == []
    assert all(x is y for x, y in zip(led, first, strict=True))
    assert ctx.partitions_to_move_off(2) == ([], [a0, a1])
