"""The column helpers the codec's hot paths use: same bytes as the per-row encoder, shared topic names."""

from __future__ import annotations

import orjson
from hypothesis import given
from hypothesis import strategies as st

from kafka_controller.domain.requests import UpdateMetadataPartitionState
from kafka_controller.transport.codec import DEFAULT_APIS, LEADER_AND_ISR, UPDATE_METADATA
from kafka_controller.transport.codec_common import _encode_states
from kafka_controller.transport.columns import Dictionary
from tests.runtime.builders import leader_and_isr, update_metadata


@given(st.lists(st.sampled_from(["a", "b", "c", "d"]), max_size=40), st.lists(st.sampled_from("xab")))
def test_encode_runs_gives_the_indexes_and_table_of_encode(first: list[str], second: list[str]) -> None:
    """Runs or not, and across calls sharing one table: the indexes and the table are ``encode``'s."""
    by_row, by_run = Dictionary[str](), Dictionary[str]()
    assert by_run.encode_runs(iter(first)) == by_row.encode(first)
    assert by_run.encode_runs(second) == by_row.encode(second)
    assert by_run.values() == by_row.values()


def test_encode_runs_merges_equal_but_distinct_values() -> None:
    a, b = "".join(["to", "pic"]), "".join(["top", "ic"])
    assert a is not b
    dictionary = Dictionary[str]()
    assert dictionary.encode_runs([a, "x", b, b]) == [0, 1, 0, 0]
    assert dictionary.values() == ["topic", "x"]


def test_decoded_topic_names_are_one_object_per_name() -> None:
    """A broker finds the partitions a request names by the names an earlier request gave them."""
    requests = ((LEADER_AND_ISR, leader_and_isr(2, 2)),) * 2 + ((UPDATE_METADATA, update_metadata(6)),)
    decoded = [
        DEFAULT_APIS.decode_request(api, orjson.loads(orjson.dumps(DEFAULT_APIS.get(api).encode_request(r))))
        for api, r in requests
    ]
    names = [s.topic for request in decoded for s in request.partition_states]
    assert len({id(name) for name in names}) == len(set(names)) == 4


class _CountingTuple(tuple[int, ...]):
    hashes = 0

    def __hash__(self) -> int:
        _CountingTuple.hashes += 1
        return super().__hash__()


def test_a_replicas_column_equal_to_the_isr_column_reuses_its_indexes() -> None:
    """A full ISR is the replicas: the second column is compared, not hashed tuple by tuple."""
    sets = [_CountingTuple((i % 3, (i + 1) % 3)) for i in range(6)]
    states = [
        UpdateMetadataPartitionState("t", i, 1, s[0], 1, s, 0, _CountingTuple(s), ())
        for i, s in enumerate(sets)
    ]
    _CountingTuple.hashes = 0
    encoded = _encode_states(states, ("isr", "replicas", "offline_replicas"))
    assert _CountingTuple.hashes == len(states)  # the ISR column's only
    columns = encoded["partitions"]
    assert columns["isr"] == columns["replicas"] == [0, 1, 2, 0, 1, 2]
    assert columns["isr"] is not columns["replicas"]
    assert columns["offline_replicas"] == [3] * 6
    assert encoded["replica_sets"] == [(0, 1), (1, 2), (2, 0), ()]


class _CountingState(UpdateMetadataPartitionState):
    """Counts reads of its fields by name (a NamedTuple's fields are descriptors)."""

    reads = 0

    def __getattribute__(self, name: str) -> object:
        if name in UpdateMetadataPartitionState._fields:
            _CountingState.reads += 1
        return super().__getattribute__(name)


def test_states_are_encoded_by_field_position_not_by_name() -> None:
    """100,000 states a column: a tuple slot is read without the descriptor call a name costs."""
    plain = [UpdateMetadataPartitionState("t", i, 1, i % 2, 1, (0, 1), 0, (0, 1), ()) for i in range(4)]
    counting = [_CountingState(*s) for s in plain]
    _CountingState.reads = 0
    encoded = _encode_states(counting, ("isr", "replicas", "offline_replicas"))
    assert _CountingState.reads == 0
    assert encoded == _encode_states(plain, ("isr", "replicas", "offline_replicas"))
