"""The decommission plan (``admin.decommission``): every replica off the leaving brokers, replication
factors kept, racks spread when every candidate has one, load balanced, nothing else moved."""

from __future__ import annotations

from collections import Counter

import pytest

from kafka_controller.admin.decommission import decommission_plan
from kafka_controller.domain.errors import InvalidArgumentError
from kafka_controller.domain.values import TopicPartition

RACKS = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}


def _fleet(partitions: int) -> dict[TopicPartition, tuple[int, ...]]:
    """RF 3 round-robin over brokers 1-6: replicas on three distinct racks for every partition."""
    order = [1, 3, 5, 2, 4, 6]
    return {
        TopicPartition("t", p): tuple(order[(p + i * 2) % 6] for i in range(3)) for p in range(partitions)
    }


def test_every_replica_leaves_and_the_rest_stays_put() -> None:
    current = _fleet(60)
    plan = decommission_plan(current, [5], [1, 2, 3, 4, 6], RACKS)
    assert set(plan) == {tp for tp, rs in current.items() if 5 in rs}
    for tp, target in plan.items():
        assert 5 not in target and len(target) == len(current[tp]) == len(set(target))
        survivors = [r for r in current[tp] if r != 5]
        assert list(target[: len(survivors)]) == survivors  # kept replicas first, in their order
        # rack c still has broker 6: the replacement takes the rack broker 5 left when 6 is not
        # already in the partition, else the least-used rack, never a rack used twice if avoidable
        assert len({RACKS[r] for r in target}) == 3


def test_the_load_is_balanced_over_the_candidates() -> None:
    current = {TopicPartition("t", p): (9,) for p in range(40)}
    plan = decommission_plan(current, [9], [1, 2, 3, 4], {})
    counts = Counter(target[0] for target in plan.values())
    assert sorted(counts.values()) == [10, 10, 10, 10]


def test_racks_are_ignored_unless_every_candidate_has_one() -> None:
    current = {TopicPartition("t", 0): (1, 9)}
    with_racks = decommission_plan(current, [9], [1, 2, 3], {1: "a", 2: "a", 3: "b"})
    assert with_racks == {TopicPartition("t", 0): (1, 3)}  # another rack than broker 1's
    mixed = decommission_plan(current, [9], [1, 2, 3], {1: "a", 2: "a", 3: None})
    assert mixed == {TopicPartition("t", 0): (1, 2)}  # least loaded, lowest id


def test_not_enough_brokers_left() -> None:
    with pytest.raises(
        InvalidArgumentError, match=r"t-0 has replication factor 3, more than the 2 brokers left \(1,2\)"
    ):
        decommission_plan({TopicPartition("t", 0): (1, 2, 3)}, [3], [1, 2], {})
    with pytest.raises(InvalidArgumentError, match="no broker is left"):
        decommission_plan({TopicPartition("t", 0): (1,)}, [1], [1], {})
