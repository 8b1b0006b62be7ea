"""Minimal-movement plans, batches under caps, and Kafka's throttle configs."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_controller.admin.throttle import throttle_configs
from kafka_controller.airflow.reassignment_plan import (
    generate_plan,
    movements,
    plan_batches,
    plan_from_json,
    plan_to_json,
)
from kafka_controller.domain.errors import InvalidArgumentError
from tests.airflow.views import tp


def test_generate_moves_only_replicas_on_brokers_leaving_and_keeps_survivors_first() -> None:
    current = {tp("t-0"): (1, 2), tp("t-1"): (2, 3), tp("t-2"): (3, 1), tp("u-0"): (3,)}
    plan = generate_plan(current, ["t"], [1, 2, 4])
    assert plan == {tp("t-1"): (2, 4), tp("t-2"): (1, 4)}  # t-0 untouched; u not asked for
    assert all(m.adding == (4,) for m in movements(current, plan).values())


def test_generate_spreads_new_replicas_to_the_least_loaded_broker() -> None:
    current = {tp(f"t-{i}"): (9,) for i in range(4)}
    plan = generate_plan(current, ["t"], [1, 2])
    assert sorted(plan.values()) == [(1,), (1,), (2,), (2,)]


@pytest.mark.parametrize(
    ("topics", "brokers", "message"),
    [(["nope"], [1], "unknown topic 'nope'"), (["t"], [1], "replication factor 2"), (["t"], [], "empty")],
)
def test_generate_refuses_what_it_cannot_do(topics: list[str], brokers: list[int], message: str) -> None:
    with pytest.raises(InvalidArgumentError, match=message):
        generate_plan({tp("t-0"): (1, 2)}, topics, brokers)


def test_batches_respect_per_broker_and_cluster_caps() -> None:
    current = {tp(f"t-{i}"): (1,) for i in range(4)}
    plan = {tp(f"t-{i}"): (2 + i % 2,) for i in range(4)}  # each moves 1 -> 2 or 1 -> 3
    assert plan_batches(plan, current, max_per_broker=2, max_cluster=10) == [
        [tp("t-0"), tp("t-1")],
        [tp("t-2"), tp("t-3")],
    ]  # broker 1 gives up a replica in every move
    assert [len(b) for b in plan_batches(plan, current, max_per_broker=5, max_cluster=3)] == [3, 1]


def test_a_partition_over_the_caps_alone_gets_its_own_batch_and_reorders_are_free() -> None:
    current = {tp("big-0"): (1, 2, 3), tp("re-0"): (1, 2)}
    plan = {tp("big-0"): (4, 5, 6), tp("re-0"): (2, 1)}
    batches = plan_batches(plan, current, max_per_broker=1, max_cluster=1)
    assert batches == [[tp("big-0")], [tp("re-0")]]  # the oversized batch is closed to others
    assert plan_batches({tp("re-0"): (2, 1)}, current, max_per_broker=1, max_cluster=1) == [[tp("re-0")]]
    with pytest.raises(InvalidArgumentError, match="at least 1"):
        plan_batches(plan, current, max_per_broker=0)


@given(
    st.dictionaries(
        st.integers(0, 30),
        st.tuples(st.permutations([1, 2, 3, 4, 5]), st.integers(1, 3), st.permutations([1, 2, 3, 4, 5])),
        min_size=1,
    ),
    st.integers(1, 4),
    st.integers(1, 8),
)
def test_batches_cover_the_plan_once_and_never_exceed_caps_with_more_than_one_partition(
    raw: dict, per_broker: int, cluster: int
) -> None:
    current = {tp(f"t-{p}"): tuple(a[:rf]) for p, (a, rf, _) in raw.items()}
    plan = {tp(f"t-{p}"): tuple(b[:rf]) for p, (_, rf, b) in raw.items()}
    batches = plan_batches(plan, current, max_per_broker=per_broker, max_cluster=cluster)
    flat = [x for b in batches for x in b]
    assert sorted(flat) == sorted(plan) and len(flat) == len(set(flat))
    moves = movements(current, plan)
    for batch in batches:
        if len(batch) == 1:
            continue
        assert sum(len(moves[x].adding) for x in batch) <= cluster
        load: dict[int, int] = {}
        for x in batch:
            for b in moves[x].brokers:
                load[b] = load.get(b, 0) + 1
        assert max(load.values(), default=0) <= per_broker


def test_throttles_are_set_as_kafkas_tool_sets_them() -> None:
    current = {tp("t-0"): (1, 2), tp("t-1"): (2, 3), tp("u-0"): (1,)}
    plan = {tp("t-0"): (1, 4), tp("t-1"): (3, 2), tp("u-0"): (5,)}
    brokers, topics = throttle_configs(plan, current, 1_000_000)
    assert sorted(brokers) == [1, 2, 4, 5]  # t-1 only reorders: no copy, no throttle
    assert brokers[4] == {
        "leader.replication.throttled.rate": "1000000",
        "follower.replication.throttled.rate": "1000000",
    }
    assert topics == {
        "t": {
            "leader.replication.throttled.replicas": "0:1,0:2",
            "follower.replication.throttled.replicas": "0:4",
        },
        "u": {
            "leader.replication.throttled.replicas": "0:1",
            "follower.replication.throttled.replicas": "0:5",
        },
    }
    with pytest.raises(InvalidArgumentError, match="positive"):
        throttle_configs(plan, current, 0)


def test_plans_round_trip_through_json_and_kafkas_format() -> None:
    plan = {tp("t-1"): (2, 3), tp("a-0"): (1,)}
    assert plan_from_json(plan_to_json(plan)) == plan
    kafka = {"version": 1, "partitions": [{"topic": "a", "partition": 0, "replicas": [1]}]}
    assert plan_from_json(kafka) == {tp("a-0"): (1,)}
    with pytest.raises(InvalidArgumentError, match="listed twice"):
        plan_from_json([{"topic": "a", "partition": 0, "replicas": [1]}] * 2)
    with pytest.raises(InvalidArgumentError, match="broker 1 is listed twice"):
        plan_from_json([{"topic": "a", "partition": 0, "replicas": [1, 1]}])
