"""Topic creation planning: Kafka's placement, ``--replica-assignment`` and ``--config`` checks."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from kafka_controller.admin.topics import (
    TOPIC_CONFIG_KEYS,
    assign_replicas_to_brokers,
    parse_config_pairs,
    parse_replica_assignment,
    plan_topic_creation,
    validate_topic_config,
)
from kafka_controller.domain.errors import InvalidArgumentError


def test_placement_matches_kafkas_fixed_start_example() -> None:
    # Kafka's AdminUtilsTest.testReplicaAssignment: 5 brokers, 10 partitions, RF 3, start index 0.
    expected = {
        0: (0, 1, 2),
        1: (1, 2, 3),
        2: (2, 3, 4),
        3: (3, 4, 0),
        4: (4, 0, 1),
        5: (0, 2, 3),
        6: (1, 3, 4),
        7: (2, 4, 0),
        8: (3, 0, 1),
        9: (4, 1, 2),
    }
    assert assign_replicas_to_brokers(10, 3, [4, 2, 0, 3, 1]) == expected


@pytest.mark.parametrize(("partitions", "rf", "brokers"), [(6, 3, 3), (12, 2, 4), (7, 1, 3), (9, 3, 5)])
def test_placement_spreads_leaders_and_replicas_evenly(partitions: int, rf: int, brokers: int) -> None:
    ids = list(range(10, 10 + brokers))
    rng = random.Random(7)
    from kafka_controller.admin.topics import random_assignment

    plan = random_assignment(partitions, rf, ids, rng)
    assert sorted(plan) == list(range(partitions))
    assert all(len(rs) == rf and len(set(rs)) == rf and set(rs) <= set(ids) for rs in plan.values())
    leaders = Counter(rs[0] for rs in plan.values())
    assert max(leaders.values()) - min(leaders.get(b, 0) for b in ids) <= 1
    replicas = Counter(r for rs in plan.values() for r in rs)
    assert max(replicas.values()) - min(replicas.get(b, 0) for b in ids) <= 1


@pytest.mark.parametrize(
    ("n", "rf", "brokers", "message"),
    [
        (0, 1, [1], "number of partitions must be larger than 0, got 0"),
        (1, 0, [1], "replication factor must be larger than 0, got 0"),
        (1, 3, [1, 2], "replication factor 3 is larger than the 2 available brokers"),
    ],
)
def test_placement_refuses_impossible_requests(n: int, rf: int, brokers: list[int], message: str) -> None:
    with pytest.raises(InvalidArgumentError) as e:
        assign_replicas_to_brokers(n, rf, brokers)
    assert str(e.value) == message


def test_replica_assignment_syntax() -> None:
    assert parse_replica_assignment("1:2,2:3") == {0: (1, 2), 1: (2, 3)}
    assert parse_replica_assignment(" 3 ") == {0: (3,)}
    assert parse_replica_assignment("0:1:2,2:0:1") == {0: (0, 1, 2), 1: (2, 0, 1)}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "--replica-assignment is empty"),
        ("1:x", "bad --replica-assignment '1:x': partition 0 has 'x', not a broker id"),
        ("1:2,", "bad --replica-assignment '1:2,': partition 1 has '', not a broker id"),
        ("1:-2", "bad --replica-assignment '1:-2': negative broker id -2"),
        ("1:2,3:3", "bad --replica-assignment '1:2,3:3': partition 1 lists broker 3 twice"),
        (
            "1:2,3",
            "bad --replica-assignment '1:2,3': partition 1 has replication factor 1, partition 0 has 2",
        ),
    ],
)
def test_replica_assignment_errors(text: str, message: str) -> None:
    with pytest.raises(InvalidArgumentError) as e:
        parse_replica_assignment(text)
    assert str(e.value) == message


def test_config_pairs_and_values() -> None:
    pairs = parse_config_pairs(["min.insync.replicas=2", "cleanup.policy=compact,delete", "retention.ms=-1"])
    assert validate_topic_config(pairs) == {
        "min.insync.replicas": "2",
        "cleanup.policy": "compact,delete",
        "retention.ms": "-1",
    }
    assert "unclean.leader.election.enable" in TOPIC_CONFIG_KEYS
    assert len(TOPIC_CONFIG_KEYS) == 26  # Kafka 2.8's LogConfig


@pytest.mark.parametrize(
    ("pairs", "message"),
    [
        (["retention.ms"], "bad --config 'retention.ms': expected KEY=VALUE"),
        (["=1"], "bad --config '=1': expected KEY=VALUE"),
        (["a=1", "a=2"], "--config a is given twice"),
        (["retention.mss=1"], "unknown topic config 'retention.mss' (did you mean 'retention.ms'?)"),
        (["zzz=1"], "unknown topic config 'zzz'"),
        (
            ["min.insync.replicas=0"],
            "invalid value 0 for topic config min.insync.replicas: must be at least 1",
        ),
        (
            ["min.insync.replicas=two"],
            "invalid value 'two' for topic config min.insync.replicas: expected an integer",
        ),
        (
            ["segment.bytes=3000000000"],
            "invalid value 3000000000 for topic config segment.bytes: must be at most 2147483647",
        ),
        (
            ["unclean.leader.election.enable=yes"],
            "invalid value 'yes' for topic config unclean.leader.election.enable: expected true or false",
        ),
        (
            ["cleanup.policy=compacted"],
            "invalid value 'compacted' for topic config cleanup.policy: "
            "expected compact, delete or compact,delete",
        ),
        (
            ["min.cleanable.dirty.ratio=1.5"],
            "invalid value 1.5 for topic config min.cleanable.dirty.ratio: must be between 0 and 1",
        ),
        (
            ["leader.replication.throttled.replicas=0:1,x"],
            "invalid value '0:1,x' for topic config leader.replication.throttled.replicas: "
            "expected * or a list of PARTITION:BROKER",
        ),
    ],
)
def test_config_errors(pairs: list[str], message: str) -> None:
    with pytest.raises(InvalidArgumentError) as e:
        validate_topic_config(parse_config_pairs(pairs))
    assert str(e.value) == message


def _plan(**kw: object):  # type: ignore[no-untyped-def]
    args: dict[str, object] = {
        "partitions": None,
        "replication_factor": None,
        "replica_assignment": None,
        "config_pairs": None,
        "live_brokers": [1, 2, 3],
        "existing_topics": {"a_b"},
        "rng": random.Random(1),
    }
    args.update(kw)
    topic = str(args.pop("topic", "t"))
    return plan_topic_creation(topic, **args)  # type: ignore[arg-type]


def test_plan_with_partitions_and_rf() -> None:
    plan = _plan(partitions=4, replication_factor=2, config_pairs=["min.insync.replicas=2"])
    assert sorted(plan.assignment) == [0, 1, 2, 3]
    assert plan.replication_factor == 2
    assert plan.config == {"min.insync.replicas": "2"}


def test_plan_with_explicit_assignment_may_name_offline_brokers() -> None:
    plan = _plan(replica_assignment="1:9")  # Kafka accepts brokers that are not live
    assert plan.assignment == {0: (1, 9)}


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        (
            {"topic": "bad name", "partitions": 1, "replication_factor": 1},
            "topic name 'bad name' has illegal characters ' '",
        ),
        (
            {"topic": "a.b", "partitions": 1, "replication_factor": 1},
            "topic 'a.b' collides with existing topic 'a_b' ('.' and '_' clash)",
        ),
        ({"topic": "a_b", "partitions": 1, "replication_factor": 1}, "topic 'a_b' already exists"),
        ({"partitions": 0, "replication_factor": 1}, "--partitions must be greater than 0, got 0"),
        (
            {"partitions": 1, "replication_factor": 0},
            "--replication-factor must be between 1 and 32767, got 0",
        ),
        (
            {"partitions": 1, "replication_factor": 4},
            "--replication-factor 4 is larger than the 3 live brokers",
        ),
        ({"replication_factor": 1}, "missing --partitions (or give --replica-assignment)"),
        ({"partitions": 1}, "missing --replication-factor (or give --replica-assignment)"),
        (
            {"partitions": 1, "replica_assignment": "1:2"},
            "--replica-assignment cannot be combined with --partitions or --replication-factor",
        ),
        ({"partitions": 1, "replication_factor": 1, "config_pairs": ["x=1"]}, "unknown topic config 'x'"),
    ],
)
def test_plan_errors(kw: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidArgumentError) as e:
        _plan(**kw)
    assert str(e.value) == message
