"""The topic znode's size, known before anything is written: the bound from counts never under-
estimates the real encoding, the size of an explicit assignment is exact, and an absurd count is
refused in constant time with a message naming ZooKeeper's limit."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_controller.admin.topics import plan_topic_creation
from kafka_controller.admin.znode_size import (
    DEFAULT_JUTE_MAXBUFFER,
    ZnodeTooLargeError,
    assignment_znode_size,
    check_partition_count,
    config_size,
    data_limit,
    digits_total,
    max_partitions,
    topic_znode_bound,
)
from kafka_controller.domain.values import ReplicaAssignment
from kafka_controller.zk.codecs import encode_topic, new_topic_id

replica_lists = st.lists(st.integers(0, 10**6), min_size=1, max_size=6, unique=True)


@given(st.integers(0, 10**7), st.integers(0, 10**5))
def test_digits_total_is_the_sum_of_the_lengths(start: int, span: int) -> None:
    assert digits_total(start, start + span) == sum(len(str(i)) for i in range(start, start + span))


@given(
    st.dictionaries(st.integers(0, 5000), replica_lists, min_size=1, max_size=60),
    st.dictionaries(st.integers(0, 5000), replica_lists, max_size=10),
    st.dictionaries(st.integers(0, 5000), replica_lists, max_size=10),
)
def test_an_explicit_assignment_is_measured_exactly(
    assignment: dict[int, list[int]], adding: dict[int, list[int]], removing: dict[int, list[int]]
) -> None:
    adding = {p: rs for p, rs in adding.items() if p in assignment}
    removing = {p: rs for p, rs in removing.items() if p in assignment}
    encoded = encode_topic(
        {p: ReplicaAssignment.of(rs, adding.get(p, ()), removing.get(p, ())) for p, rs in assignment.items()},
        new_topic_id(),
    )
    assert assignment_znode_size(assignment, adding, removing) == len(encoded)


@given(st.integers(1, 400), st.integers(1, 5), st.integers(4, 10**6), st.integers(0, 2**32))
def test_the_bound_from_counts_never_underestimates(n: int, rf: int, max_id: int, seed: int) -> None:
    rng = random.Random(seed)
    brokers = [max_id, *(rng.randrange(max_id) for _ in range(rf - 1))]
    assignment = {p: tuple(rng.sample(brokers, len(brokers))) for p in range(n)}
    real = len(encode_topic({p: ReplicaAssignment.of(rs) for p, rs in assignment.items()}, new_topic_id()))
    bound = topic_znode_bound(n, len(brokers), max_id)
    assert real <= bound
    if max_id < 10:  # one digit per id: the bound is exact
        assert bound == real


def test_two_billion_partitions_are_refused_at_once_naming_the_limit() -> None:
    with pytest.raises(ZnodeTooLargeError) as e:
        check_partition_count("huge", 2_000_000_000, 1, [1, 2, 3])
    message = str(e.value)
    assert "\n" not in message
    assert (
        "jute.maxbuffer of 1,048,575 bytes" in message and "2,000,000,000 partitions of 1 replica" in message
    )
    fits = max_partitions(1, 3)
    assert f"at most {fits:,} such partitions fit" in message
    check_partition_count("huge", fits, 1, [1, 2, 3])  # the count it names does fit
    with pytest.raises(ZnodeTooLargeError):
        check_partition_count("huge", fits + 1, 1, [1, 2, 3])
    assert (
        topic_znode_bound(fits, 1, 3)
        <= data_limit(DEFAULT_JUTE_MAXBUFFER)
        < topic_znode_bound(fits + 1, 1, 3)
    )


def test_a_smaller_jute_maxbuffer_lowers_the_limit() -> None:
    check_partition_count("t", 10_000, 3, [1, 2, 3])
    with pytest.raises(ZnodeTooLargeError, match=r"jute\.maxbuffer of 65,536 bytes"):
        check_partition_count("t", 10_000, 3, [1, 2, 3], jute_maxbuffer=65536)


def plan(**overrides: object):  # type: ignore[no-untyped-def]
    args: dict[str, object] = {
        "partitions": None,
        "replication_factor": None,
        "replica_assignment": None,
        "config_pairs": None,
        "live_brokers": [1, 2, 3],
        "existing_topics": [],
        "rng": random.Random(7),
    }
    args.update(overrides)
    return plan_topic_creation("big", **args)  # type: ignore[arg-type]


def test_topics_create_plans_refuse_what_cannot_fit_before_placing() -> None:
    with pytest.raises(ZnodeTooLargeError, match=r"topic 'big' \(2,000,000,000 partitions of 2 replicas\)"):
        plan(partitions=2_000_000_000, replication_factor=2)
    fits = max_partitions(3, 3, extra=config_size({}))  # the empty config's znode goes in the same multi
    assert len(plan(partitions=fits, replication_factor=3).assignment) == fits
    # the topic config is written in the same multi, so it counts too
    with pytest.raises(ZnodeTooLargeError):
        plan(
            partitions=fits,
            replication_factor=3,
            config_pairs=["follower.replication.throttled.replicas=*" + " " * 9000],
        )
    text = ",".join("1:2:3" for _ in range(fits + 200))
    with pytest.raises(ZnodeTooLargeError, match="partitions in --replica-assignment"):
        plan(replica_assignment=text)
