"""The metadata cache keeps a decoded UpdateMetadata's states as columns, by reference, and
answers as Kafka's merge would: later states win, a partial request keeps the rest, leader -2
deletes."""

from __future__ import annotations

import orjson

from kafka_controller.broker.metadata_cache import MAX_PENDING_RUNS, MetadataCache
from kafka_controller.domain.requests import UpdateMetadataPartitionState, UpdateMetadataRequest
from kafka_controller.domain.values import TopicPartition
from kafka_controller.transport.codec import decode_update_metadata_request, encode_update_metadata_request
from kafka_controller.transport.state_columns import StateColumns


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


def test_the_cache_merges_runs_by_reference_as_kafka_merges_states() -> None:
    cache, model = MetadataCache(0), {}
    requests = [
        tuple(_state(t, p, 1, 1) for t in ("a", "b") for p in range(4)),  # every partition
        tuple(_state("a", p, 2, 2) for p in (1, 3)),  # some of them
        (_state("b", 5, 2, 2), _state("a", 0, 2, 3), _state("a", 1, 0, 4)),  # a new one, interleaved
        tuple(_state("b", p, 0, 5) for p in (0, 1, 2, 3, 5)),  # every partition of b again
        *[(_state("a", 2, 1, 10 + k),) for k in range(MAX_PENDING_RUNS + 2)],  # many runs: built
    ]
    for i, states in enumerate(requests):
        cache.update_metadata(_wire(states) if i % 2 else UpdateMetadataRequest(7, 0, 1, 1, states, ()))
        model.update({(s.topic, s.partition): s for s in states})
        got = {(s.topic, s.partition): s for s in cache.partition_states()}
        assert got == model
    assert cache.get_partition_info(TopicPartition("a", 2)) == _state("a", 2, 1, 11 + MAX_PENDING_RUNS)
    assert [s.partition for s in cache.topic_partition_states(["b"])["b"]] == [0, 1, 2, 3, 5]
    gone = UpdateMetadataPartitionState("b", 5, 1, -2, 6, (), 0, (), ())
    assert cache.update_metadata(_wire((gone,))) == [TopicPartition("b", 5)]
    assert sorted(cache.topic_partitions("b")) == [0, 1, 2, 3]
    deleted = tuple(UpdateMetadataPartitionState("b", p, 1, -2, 6, (), 0, (), ()) for p in range(4))
    cache.update_metadata(_wire(deleted))
    assert not cache.contains_topic("b") and cache.contains_topic("a")
