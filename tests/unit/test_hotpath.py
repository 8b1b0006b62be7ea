"""Each bulk form of ``kafka_controller.hotpath`` gives exactly its straightforward form's result, and
the bulk idioms it names are spelled nowhere else in the package."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_controller.domain.requests import LeaderAndIsrPartitionState, StopReplicaPartitionState
from kafka_controller.domain.states import PartitionState, ReplicaState
from kafka_controller.domain.values import LeaderAndIsr, PartitionAndReplica, TopicPartition
from kafka_controller.hotpath import (
    dropped_members,
    identity_hash,
    kept_members,
    members,
    new_tuple,
    new_tuples,
    values_at,
)

small_ints = st.integers(min_value=-3, max_value=12)
# a set, a frozenset, a dict's keys or a list: ``in`` on each is its own __contains__
containers = st.one_of(
    st.sets(small_ints),
    st.frozensets(small_ints),
    st.dictionaries(small_ints, st.none()),
    st.lists(small_ints, max_size=8),
)
items = st.lists(small_ints, max_size=30)


@given(containers, items)
def test_members_is_in_for_each_item(container: Any, xs: list[int]) -> None:
    assert list(members(container, xs)) == [x in container for x in xs]
    assert list(members(container, iter(xs))) == [x in container for x in xs]  # any iterable


@given(containers, items)
def test_kept_members_keeps_the_items_in_the_container(container: Any, xs: list[int]) -> None:
    assert list(kept_members(container, xs)) == [x for x in xs if x in container]


@given(containers, items)
def test_dropped_members_keeps_the_items_not_in_the_container(container: Any, xs: list[int]) -> None:
    assert list(dropped_members(container, xs)) == [x for x in xs if x not in container]


@given(containers, items)
def test_kept_and_dropped_split_the_items(container: Any, xs: list[int]) -> None:
    kept, dropped = list(kept_members(container, xs)), list(dropped_members(container, xs))
    assert sorted(kept + dropped) == sorted(xs)


@given(st.dictionaries(small_ints, st.text(max_size=3)), st.data())
def test_values_at_is_the_value_of_each_key(mapping: dict[int, str], data: st.DataObject) -> None:
    keys = data.draw(st.lists(st.sampled_from(sorted(mapping)), max_size=20)) if mapping else []
    assert list(values_at(mapping, keys)) == [mapping[k] for k in keys]


@given(st.lists(st.text(max_size=3), min_size=1, max_size=8), st.data())
def test_values_at_reads_a_sequence_by_position(names: list[str], data: st.DataObject) -> None:
    positions = data.draw(st.lists(st.integers(min_value=0, max_value=len(names) - 1), max_size=20))
    assert list(values_at(names, positions)) == [names[i] for i in positions]


@given(st.dictionaries(small_ints, st.text(max_size=3)), small_ints)
def test_values_at_raises_key_error_for_a_missing_key(mapping: dict[int, str], key: int) -> None:
    if key in mapping:
        assert list(values_at(mapping, [key])) == [mapping[key]]
    else:
        with pytest.raises(KeyError):
            list(values_at(mapping, [key]))


topics = st.text(alphabet="abc-._", min_size=1, max_size=5)
ints = st.integers(min_value=-2, max_value=2**31 - 1)
replica_lists = st.lists(st.integers(min_value=0, max_value=9), max_size=4).map(tuple)
topic_partition_fields = st.tuples(topics, ints)
leader_and_isr_fields = st.tuples(ints, ints, replica_lists, ints)
lai_state_fields = st.tuples(
    topics,
    ints,
    ints,
    ints,
    ints,
    replica_lists,
    ints,
    replica_lists,
    replica_lists,
    replica_lists,
    st.booleans(),
)
stop_replica_fields = st.tuples(ints, ints, st.booleans())


@pytest.mark.parametrize(
    ("cls", "fields"),
    [
        (TopicPartition, topic_partition_fields),
        (LeaderAndIsr, leader_and_isr_fields),
        (LeaderAndIsrPartitionState, lai_state_fields),
        (StopReplicaPartitionState, stop_replica_fields),
        (PartitionAndReplica, st.tuples(topic_partition_fields.map(lambda f: TopicPartition(*f)), ints)),
    ],
)
@given(data=st.data())
def test_new_tuple_is_the_named_tuples_constructor(cls: type[Any], fields: Any, data: st.DataObject) -> None:
    values = data.draw(fields)
    built, expected = new_tuple(cls, values), cls(*values)
    assert type(built) is cls
    assert built == expected and hash(built) == hash(expected)
    assert built._asdict() == expected._asdict()  # the same fields, by name


@given(st.lists(leader_and_isr_fields, max_size=10))
def test_new_tuples_is_the_constructor_of_each_row(rows: list[tuple[Any, ...]]) -> None:
    built = list(new_tuples(LeaderAndIsr, rows))
    assert built == [LeaderAndIsr(*row) for row in rows]
    assert all(type(b) is LeaderAndIsr for b in built)


def _first_then_fail() -> Any:
    yield ("t", 0)
    raise AssertionError("read past the first item")


@pytest.mark.parametrize(
    ("bulk_form", "first"),
    [
        (lambda items: members({("t", 0)}, items), True),
        (lambda items: kept_members({("t", 0)}, items), ("t", 0)),
        (lambda items: dropped_members(set(), items), ("t", 0)),
        (lambda items: values_at({("t", 0): "x"}, items), "x"),
        (lambda items: new_tuples(TopicPartition, items), TopicPartition("t", 0)),
    ],
)
def test_each_form_is_lazy_like_map(bulk_form: Any, first: Any) -> None:
    """A pipeline of them builds no list in between: each reads an item only when asked for one."""
    assert next(bulk_form(_first_then_fail())) == first


class _Colour(Enum):
    RED = 1
    GREEN = 2

    __hash__ = identity_hash


@pytest.mark.parametrize("member", [*PartitionState, *ReplicaState, *_Colour])
def test_identity_hash_is_objects_hash_and_keeps_enum_sets_working(member: Enum) -> None:
    assert hash(member) == object.__hash__(member)
    cls = type(member)
    assert member in set(cls) and member in frozenset(cls)
    assert {m: m.name for m in cls}[member] == member.name
    others = frozenset(m for m in cls if m is not member)
    assert member not in others


#: The spellings that ``hotpath`` names; outside it the Kafka logic uses the names. A dict's own
#: ``__getitem__`` handed over as a lookup function (``request_batch_states.OfflineReplicas``) is an
#: object passed along, not a bulk idiom, and stays allowed.
IDIOMS = ("tuple.__new__", ".__contains__,", ".__contains__)", "C speed")


def test_the_bulk_idioms_live_only_in_hotpath() -> None:
    package = Path(__file__).resolve().parents[2] / "kafka_controller"
    found = [
        f"{path.relative_to(package.parent)}:{number}: {idiom}"
        for path in sorted(package.rglob("*.py"))
        if path.name != "hotpath.py"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        for idiom in IDIOMS
        if idiom in line
    ]
    assert not found, "use kafka_controller.hotpath's names instead: " + "; ".join(found)
