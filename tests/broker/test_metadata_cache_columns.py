"""Decoded UpdateMetadata and LeaderAndIsr states stay columns: the metadata cache queues the
requests and merges them when read, answering as Kafka's merge would (later states win, a partial
request keeps the rest, leader -2 deletes); the replica manager answers them as it answers the
states themselves."""

from __future__ import annotations

from collections.abc import Callable

import orjson
import pytest

from kafka_controller.broker import metadata_cache
from kafka_controller.broker.metadata_cache import MAX_PENDING_REQUESTS, MetadataCache
from kafka_controller.broker.replica_manager import ReplicaManager
from kafka_controller.domain.requests import (
    Errors,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
)
from kafka_controller.domain.values import TopicPartition
from kafka_controller.transport.codec import (
    decode_leader_and_isr_request,
    decode_update_metadata_request,
    encode_leader_and_isr_request,
    encode_update_metadata_request,
)
from kafka_controller.transport.state_columns import StateColumns


def _NO_TIMER(delay_s: float, fn: Callable[[], None]) -> None:
    """The idle-merge timer never fires: tests of the queue itself must not race a real 1 s timer
    (a slow machine's decoding can take that long and merge the queue before the assertion)."""


def _state(topic: str, p: int, leader: int, epoch: int) -> UpdateMetadataPartitionState:
    return UpdateMetadataPartitionState(topic, p, 1, leader, epoch, (leader,), 0, (0, 1, 2), ())


def _wire(states: tuple[UpdateMetadataPartitionState, ...]) -> UpdateMetadataRequest:
    request = UpdateMetadataRequest(7, 0, 1, 1, states, ())
    return decode_update_metadata_request(orjson.loads(orjson.dumps(encode_update_metadata_request(request))))


def test_a_decoded_update_metadata_keeps_its_states_as_columns_equal_to_the_tuple() -> None:
    states = tuple(_state(f"t{i % 3}", i, 1, 1) for i in range(10))
    decoded = _wire(states)
    assert isinstance(decoded.partition_states, StateColumns)
    assert decoded.partition_states == states and len(decoded.partition_states) == 10
    assert decoded.partition_states[4] == states[4]
    assert decoded == UpdateMetadataRequest(7, 0, 1, 1, states, ())


def test_the_cache_merges_queued_requests_as_kafka_merges_states(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(metadata_cache, "MIN_QUEUED_STATES", 1)  # queue even these small requests
    cache, model = MetadataCache(0), {}
    requests = [
        tuple(_state(t, p, 1, 1) for t in ("a", "b") for p in range(4)),  # every partition
        tuple(_state("a", p, 2, 2) for p in (1, 3)),  # some of them
        (_state("b", 5, 2, 2), _state("a", 0, 2, 3), _state("a", 1, 0, 4)),  # a new one, interleaved
        tuple(_state("b", p, 0, 5) for p in (0, 1, 2, 3, 5)),  # every partition of b again
        *[(_state("a", 2, 1, 10 + k),) for k in range(MAX_PENDING_REQUESTS + 2)],  # many runs: built
    ]
    for i, states in enumerate(requests):
        cache.update_metadata(_wire(states) if i % 2 else UpdateMetadataRequest(7, 0, 1, 1, states, ()))
        model.update({(s.topic, s.partition): s for s in states})
        got = {(s.topic, s.partition): s for s in cache.partition_states()}
        assert got == model
    assert cache.get_partition_info(TopicPartition("a", 2)) == _state("a", 2, 1, 11 + MAX_PENDING_REQUESTS)
    assert [s.partition for s in cache.topic_partition_states(["b"])["b"]] == [0, 1, 2, 3, 5]
    gone = UpdateMetadataPartitionState("b", 5, 1, -2, 6, (), 0, (), ())
    assert cache.update_metadata(_wire((gone,))) == [TopicPartition("b", 5)]
    assert sorted(cache.topic_partitions("b")) == [0, 1, 2, 3]
    deleted = tuple(UpdateMetadataPartitionState("b", p, 1, -2, 6, (), 0, (), ()) for p in range(4))
    cache.update_metadata(_wire(deleted))
    assert not cache.contains_topic("b") and cache.contains_topic("a")


def test_the_replica_manager_answers_a_decoded_leader_and_isr_as_the_states_it_holds() -> None:
    def state(p: int, leader: int, epoch: int, replicas: tuple[int, ...]) -> LeaderAndIsrPartitionState:
        return LeaderAndIsrPartitionState("t", p, 1, leader, epoch, replicas, 0, replicas, (), (), p == 3)

    first = tuple(state(p, p % 2, 1, (0, 1)) for p in range(4))
    second = (state(0, 1, 2, (0, 1)), state(1, 1, 1, (0, 1)), state(2, 0, 0, (0, 1)), state(4, 2, 1, (2, 3)))
    answers = []
    for wire in (False, True):
        rm = ReplicaManager(0, lambda: 0)
        for states in (first, second):
            request = LeaderAndIsrRequest(5, 1, 1, 1, states)
            if wire:
                body = orjson.loads(orjson.dumps(encode_leader_and_isr_request(request)))
                request = decode_leader_and_isr_request(body)
                assert isinstance(request.partition_states, StateColumns)
                assert request.partition_states == states
            answers.append(rm.become_leader_or_follower(request))
        answers.append({tp: (p.leader, p.leader_epoch, p.isr) for tp, p in rm.partitions.items()})
    assert answers[:3] == answers[3:]
    assert answers[1].partition_errors == {
        TopicPartition("t", 0): Errors.NONE,
        TopicPartition("t", 1): Errors.FENCED_LEADER_EPOCH,
        TopicPartition("t", 2): Errors.STALE_CONTROLLER_EPOCH,
        TopicPartition("t", 4): Errors.UNKNOWN_TOPIC_OR_PARTITION,
    }


def test_an_update_metadata_is_queued_unmerged_until_the_cache_is_read() -> None:
    states = tuple(_state(f"t{i % 7}", i, 1, 1) for i in range(metadata_cache.MIN_QUEUED_STATES))
    cache = MetadataCache(0, timer=_NO_TIMER)
    request = _wire(states)
    cache.update_metadata(request)
    assert cache._topics == {} and cache._pending == [request.partition_states]
    assert sorted(s.partition for s in cache.partition_states()) == list(range(len(states)))
    assert cache._pending == []


def test_the_queue_is_bounded_in_states() -> None:
    big = tuple(_state(f"t{i % 50}", i, 1, 1) for i in range(metadata_cache.MAX_PENDING_STATES // 2 + 1))
    cache = MetadataCache(0, timer=_NO_TIMER)
    cache.update_metadata(_wire(big))
    assert len(cache._pending) == 1
    cache.update_metadata(_wire(big))
    assert cache._pending == [] and len(cache._topics["t0"]) == len(big) // 50 + 1


def test_the_queue_is_merged_once_no_update_metadata_came_for_the_idle_time() -> None:
    timers: list[tuple[float, Callable[[], None]]] = []
    now = [100.0]
    cache = MetadataCache(0, timer=lambda delay_s, fn: timers.append((delay_s, fn)), clock=lambda: now[0])
    first = tuple(_state("a", p, 1, 1) for p in range(metadata_cache.MIN_QUEUED_STATES))
    cache.update_metadata(_wire(first))
    assert [d for d, _ in timers] == [metadata_cache.MERGE_WHEN_IDLE_S]
    now[0] += 0.75 * metadata_cache.MERGE_WHEN_IDLE_S
    cache.update_metadata(_wire(first[:1]))  # queued behind the first; the timer is armed already
    assert len(timers) == 1
    now[0] += 0.5 * metadata_cache.MERGE_WHEN_IDLE_S
    timers.pop()[1]()  # not idle long enough since the second request: waits for the rest
    assert len(cache._pending) == 2 and timers[0][0] == pytest.approx(0.5 * metadata_cache.MERGE_WHEN_IDLE_S)
    now[0] += 0.5 * metadata_cache.MERGE_WHEN_IDLE_S
    timers.pop()[1]()
    assert cache._pending == [] and len(cache._topics["a"]) == len(first) and not timers


def test_states_handed_over_built_are_merged_at_once_unless_requests_are_queued() -> None:
    states = tuple(_state(f"t{i % 7}", i, 1, 1) for i in range(metadata_cache.MIN_QUEUED_STATES))
    cache = MetadataCache(0, timer=lambda delay_s, fn: None)
    cache.update_metadata(UpdateMetadataRequest(7, 0, 1, 1, states, ()))
    assert cache._pending == [] and sum(map(len, cache._topics.values())) == len(states)
    decoded = _wire(states)
    cache.update_metadata(decoded)
    cache.update_metadata(UpdateMetadataRequest(7, 0, 1, 1, states, ()))  # behind the decoded one
    assert cache._pending == [decoded.partition_states, states]


def test_a_queued_merge_keeps_kafkas_topic_and_partition_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """The queue is merged a run of one topic at a time; topics and partitions come out in the
    order of the state-by-state merge (first seen first), with the last state of each."""
    monkeypatch.setattr(metadata_cache, "MIN_QUEUED_STATES", 1)
    requests = [
        tuple(_state(t, p, 1, 1) for p in (3, 0) for t in ("b", "a")),  # runs of one state
        tuple(_state(t, p, 2, 2) for t in ("c", "a", "c") for p in (5, 0, 7)),  # c, a, c again
        (_state("a", 9, 0, 3), _state("d", 1, 0, 3), _state("b", 3, 0, 4)),
    ]
    cache, model = MetadataCache(0, timer=_NO_TIMER), MetadataCache(0)
    for i, states in enumerate(requests):
        cache.update_metadata(UpdateMetadataRequest(7, 0, 1, 1, states, ()) if i % 2 else _wire(states))
        model._merge(states, [])
    assert len(cache._pending) == len(requests)
    merged = cache._merged()
    assert [(t, list(parts.items())) for t, parts in merged.items()] == [
        (t, list(parts.items())) for t, parts in model._topics.items()
    ]
    assert list(merged) == ["b", "a", "c", "d"] and list(merged["a"]) == [3, 0, 5, 7, 9]
    assert merged["c"][5] == _state("c", 5, 2, 2) and merged["b"][3] == _state("b", 3, 0, 4)
