"""``put_partition_states``' bulk path (no topic being deleted, no partition twice) leaves the
same states and offline count as one ``put_partition_state`` per item."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kafka_controller.core.context import ControllerContext
from kafka_controller.domain.states import PartitionState
from kafka_controller.domain.values import TopicPartition

_STATES = list(PartitionState)
_tp = st.builds(TopicPartition, st.sampled_from(["a", "b"]), st.integers(0, 4))
_items = st.lists(st.tuples(_tp, st.sampled_from(_STATES)), max_size=12)


def _context(initial: list[tuple[TopicPartition, PartitionState]], deleting: bool) -> ControllerContext:
    ctx = ControllerContext()
    for tp, state in initial:
        ctx.put_partition_state(tp, state)
    if deleting:
        ctx.topics_with_deletion_started.add("b")
    return ctx


@given(_items, _items, st.booleans(), st.booleans())
def test_bulk_equals_one_by_one(
    initial: list[tuple[TopicPartition, PartitionState]],
    items: list[tuple[TopicPartition, PartitionState]],
    deleting: bool,
    as_generator: bool,
) -> None:
    bulk, single = _context(initial, deleting), _context(initial, deleting)
    bulk.put_partition_states(iter(items) if as_generator else items)
    for tp, state in items:
        single.put_partition_state(tp, state)
    assert bulk.partition_states == single.partition_states
    assert bulk.offline_partition_count == single.offline_partition_count


def test_a_failover_fill_counts_its_offline_partitions() -> None:
    ctx = ControllerContext()
    tps = [TopicPartition("t", p) for p in range(5)]
    offline, online = PartitionState.OFFLINE_PARTITION, PartitionState.ONLINE_PARTITION
    ctx.put_partition_states([(tp, offline if p % 2 else online) for p, tp in enumerate(tps)])
    assert ctx.offline_partition_count == 2
    ctx.put_partition_states([(tps[1], online), (tps[0], offline)])
    assert ctx.offline_partition_count == 2
