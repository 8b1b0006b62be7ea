"""The columnar codec against straightforward references: the encoder's transposed columns byte for
byte, run encoding of one value, and the decoder's checks of a column of one index."""

from __future__ import annotations

import random
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_controller.domain.requests import LeaderAndIsrPartitionState, UpdateMetadataPartitionState
from kafka_controller.transport.codec_common import _encode_states
from kafka_controller.transport.columns import Columns, Dictionary
from kafka_controller.transport.errors import ProtocolError

_INTS = ("partition", "controller_epoch", "leader", "leader_epoch", "zk_version")


def _reference(
    states: list[Any],
    list_fields: tuple[str, ...],
    optional_lists: tuple[str, ...],
    optional_bools: tuple[str, ...],
) -> dict[str, Any]:
    """One state at a time, by name: what the wire format says, without any shortcut."""
    topics: dict[str, int] = {}
    sets: dict[tuple[int, ...], int] = {}
    cols: dict[str, Any] = {"topic": [topics.setdefault(s.topic, len(topics)) for s in states]}
    for name in _INTS:
        cols[name] = [getattr(s, name) for s in states]
    for name in list_fields:
        cols[name] = [sets.setdefault(getattr(s, name), len(sets)) for s in states]
    for name in optional_lists:
        if any(getattr(s, name) for s in states):
            cols[name] = [sets.setdefault(getattr(s, name), len(sets)) for s in states]
    for name in optional_bools:
        if any(getattr(s, name) for s in states):
            cols[name] = [getattr(s, name) for s in states]
    return {"topics": list(topics), "replica_sets": list(sets), "partitions": cols}


_replicas = st.lists(st.integers(0, 4), max_size=3).map(tuple)
_small = st.integers(-1, 3)


@st.composite
def _states(draw: st.DrawFn, kind: type) -> list[Any]:
    """Random states; replica tuples drawn from a few shared objects (as the controller's context
    gives them) or built per state; topics in runs or scattered."""
    shared = draw(st.lists(_replicas, min_size=1, max_size=4))
    tuple_of = st.one_of(st.sampled_from(shared), _replicas.map(lambda t: tuple(list(t))))
    rows = []
    for i in range(draw(st.integers(0, 30))):
        common = (draw(st.sampled_from("abc")), i, draw(_small), draw(_small), draw(_small))
        isr, zk_version, replicas = draw(tuple_of), draw(_small), draw(tuple_of)
        if kind is LeaderAndIsrPartitionState:
            extra = (draw(tuple_of), draw(tuple_of), draw(st.booleans()))
        else:
            extra = (draw(tuple_of),)
        rows.append(kind(*common, isr, zk_version, replicas, *extra))
    return rows


@given(_states(LeaderAndIsrPartitionState))
def test_leader_and_isr_states_encode_to_the_reference_bytes(states: list[Any]) -> None:
    shape = (("isr", "replicas"), ("adding_replicas", "removing_replicas"), ("is_new",))
    encoded = _encode_states(iter(states), *shape)
    assert orjson.dumps(encoded) == orjson.dumps(_reference(states, *shape))


@given(_states(UpdateMetadataPartitionState))
def test_update_metadata_states_encode_to_the_reference_bytes(states: list[Any]) -> None:
    shape = (("isr", "replicas", "offline_replicas"), (), ())
    encoded = _encode_states(tuple(states), *shape)
    assert orjson.dumps(encoded) == orjson.dumps(_reference(states, *shape))


@given(st.lists(st.sampled_from(["a", "b"]), min_size=1, max_size=20), st.sampled_from([list, tuple, iter]))
def test_encode_runs_of_one_value_gives_encode_indexes(values: list[str], kind: Any) -> None:
    by_row, by_run = Dictionary[str](), Dictionary[str]()
    by_row.encode(["b"])
    by_run.encode(["b"])
    assert by_run.encode_runs(kind(values)) == by_row.encode(values)
    assert by_run.values() == by_row.values()


@given(
    st.lists(st.sampled_from(["x", "y", "z"]), min_size=1, max_size=3),
    st.integers(0, 3),
    st.integers(1, 20),
)
def test_a_column_of_one_index_looks_up_like_any_other(table: list[str], index: int, n: int) -> None:
    """In the table or outside it, a column of one index answers what indexing each row does."""
    columns = Columns({"partitions": {"partition": [0] * n, "c": [index] * n}})
    if index < len(table):
        assert list(columns.lookup("c", table)) == [table[index]] * n
    else:
        with pytest.raises(ProtocolError, match="outside its table"):
            columns.lookup("c", table)


@pytest.mark.parametrize(
    ("column", "picked"),
    [
        ([0, 0, False, 0], ["x"] * 4),
        ([1, True, 1], ["y"] * 3),
        ([0, 0.0, 0], None),
        ([0.0, 0], None),
        ([-1, -1], None),
    ],
)
def test_a_column_of_one_value_is_type_checked(column: list[Any], picked: list[str] | None) -> None:
    """A boolean picks the entry it equals (as indexing does); a float equal to the index does not."""
    columns = Columns({"partitions": {"partition": [0] * len(column), "c": column}})
    if picked is None:
        with pytest.raises(ProtocolError):
            columns.lookup("c", ["x", "y"])
    else:
        assert list(columns.lookup("c", ["x", "y"])) == picked


def test_states_across_several_slices_encode_to_the_reference_bytes() -> None:
    """More states than one transposition slice takes (512), the last slice partial."""
    rng = random.Random(19)
    shared = [(0, 1, 2), (1, 2, 3), (2, 3)]
    states = [
        LeaderAndIsrPartitionState(
            f"t{i // 50}",
            i % 50,
            1,
            rng.randrange(5),
            rng.randrange(3),
            rng.choice(shared),
            i,
            tuple(rng.sample(range(5), 3)),
            (),
            rng.choice([(), (4,)]),
            rng.random() < 0.01,
        )
        for i in range(1_300)
    ]
    shape = (("isr", "replicas"), ("adding_replicas", "removing_replicas"), ("is_new",))
    assert orjson.dumps(_encode_states(states, *shape)) == orjson.dumps(_reference(states, *shape))
