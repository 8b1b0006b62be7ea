"""``kafka_controller.heap``: a large request's objects leave the collector's generations when its
pause ends, and a broker never re-freezes the controller's resigned context before the collector
has had a full pass at it."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import orjson
import pytest

from kafka_controller import heap
from kafka_controller.domain.requests import StopReplicaRequest, build_stop_replica_partition_state
from kafka_controller.domain.values import TopicPartition
from kafka_controller.transport.codec import decode_stop_replica_request, encode_stop_replica_request
from kafka_controller.transport.columns import GC_PAUSE_MIN_ROWS


@pytest.fixture(autouse=True)
def thawed() -> Iterator[None]:
    heap.unfreeze()
    gc.collect()  # pays what unfreeze() owes: end_bulk may freeze again
    assert gc.get_freeze_count() == 0
    yield
    heap.unfreeze()
    gc.collect()
    assert gc.isenabled()


def test_end_bulk_freezes_and_re_enables() -> None:
    gc.disable()
    heap.end_bulk()
    assert gc.isenabled()
    assert gc.get_freeze_count() > 0


def test_a_large_decode_leaves_its_objects_frozen_and_the_collector_on() -> None:
    n = GC_PAUSE_MIN_ROWS
    states = {
        TopicPartition(f"t{i // 100}", i % 100): build_stop_replica_partition_state(i % 100, 3, True)
        for i in range(n)
    }
    request = StopReplicaRequest(1, 1, 2, 5, True, states)
    body = orjson.loads(orjson.dumps(encode_stop_replica_request(request)))
    before = gc.get_freeze_count()
    decoded = decode_stop_replica_request(body)
    assert decoded.partition_states == states
    assert gc.isenabled()
    assert gc.get_freeze_count() >= before + n  # one TopicPartition per partition, at least


def test_no_bulk_freeze_between_an_unfreeze_and_the_next_full_collection() -> None:
    heap.freeze()
    assert gc.get_freeze_count() > 0
    heap.unfreeze()  # the controller resigns: its context is garbage the collector must see
    assert gc.get_freeze_count() == 0
    gc.disable()
    heap.end_bulk()
    assert gc.isenabled() and gc.get_freeze_count() == 0
    gc.collect()  # a full collection has walked everything that was frozen
    gc.disable()
    heap.end_bulk()
    assert gc.get_freeze_count() > 0


def test_a_young_collection_does_not_settle_the_debt() -> None:
    heap.unfreeze()
    gc.collect(0)
    gc.collect(1)
    gc.disable()
    heap.end_bulk()
    assert gc.get_freeze_count() == 0


def test_what_a_frozen_request_built_is_freed_when_dropped() -> None:
    """Frozen objects are still freed by reference counting: a broker's partitions, built under a
    frozen pause, go away with a StopReplica (they hold no cycles)."""
    import tracemalloc

    from kafka_controller.broker.replica_manager import ReplicaManager
    from kafka_controller.domain.requests import (
        LeaderAndIsrRequest,
        StopReplicaRequest,
        build_leader_and_isr_partition_state,
        build_stop_replica_partition_state,
    )
    from kafka_controller.domain.values import TopicPartition

    n = GC_PAUSE_MIN_ROWS * 2
    states = tuple(
        build_leader_and_isr_partition_state(
            f"t{i // 100}", i % 100, 1, 1 + i % 2, 1, (1, 2), 0, (1, 2), (), (), False
        )
        for i in range(n)
    )
    stop = StopReplicaRequest(
        3,
        1,
        1,
        1,
        True,
        {
            TopicPartition(s.topic, s.partition): build_stop_replica_partition_state(s.partition, 2, True)
            for s in states
        },
    )
    rm = ReplicaManager(1, lambda: 1_000, produce_rate_per_s=10.0)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        rm.become_leader_or_follower(LeaderAndIsrRequest(5, 1, 1, 1, states, {}, ()))
        assert len(rm.partitions) == n and gc.get_freeze_count() > 0
        held = tracemalloc.get_traced_memory()[0] - before
        rm.stop_replicas(stop)
        assert not rm.partitions
        left = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert held > 1_000_000 and left < held // 10
