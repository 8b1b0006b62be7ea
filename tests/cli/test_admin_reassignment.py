"""Kafka's reassignment JSON (strict), ``--generate`` and ``--verify`` as pure functions."""

from __future__ import annotations

import random
from collections import Counter

import orjson
import pytest

from kafka_controller.admin.reassignment import (
    COMPLETE,
    IN_PROGRESS,
    MISMATCH,
    MISSING,
    encode_reassignment_json,
    generate_reassignment,
    parse_broker_list,
    parse_reassignment_json,
    parse_topics_to_move_json,
    validate_reassignment,
    verify_reassignment,
)
from kafka_controller.domain.errors import InvalidArgumentError
from kafka_controller.domain.values import ReplicaAssignment, TopicPartition

TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)


def _doc(*entries: dict[str, object]) -> str:
    return orjson.dumps({"version": 1, "partitions": list(entries)}).decode()


def test_parses_kafkas_tool_format_in_file_order() -> None:
    text = _doc(
        {"topic": "t", "partition": 1, "replicas": [3, 1], "log_dirs": ["any", "any"]},
        {"topic": "t", "partition": 0, "replicas": [2]},
    )
    plan = parse_reassignment_json(text)
    assert list(plan.items()) == [(TP1, (3, 1)), (TP0, (2,))]


def test_encode_round_trips_and_is_sorted() -> None:
    plan = {TP1: (3, 1), TP0: (2,)}
    text = encode_reassignment_json(plan)
    assert orjson.loads(text) == {
        "version": 1,
        "partitions": [
            {"topic": "t", "partition": 0, "replicas": [2], "log_dirs": ["any"]},
            {"topic": "t", "partition": 1, "replicas": [3, 1], "log_dirs": ["any", "any"]},
        ],
    }
    assert parse_reassignment_json(text) == plan


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "reassignment JSON is empty"),
        ("{", "reassignment JSON is not valid JSON: "),
        ("[]", "reassignment JSON must be a JSON object"),
        ('{"version":1,"partitions":[],"x":1}', "reassignment JSON has unknown field 'x'"),
        ('{"version":2,"partitions":[]}', "reassignment JSON: unsupported version 2 (expected 1)"),
        ('{"version":1}', "reassignment JSON: 'partitions' must be a list"),
        ('{"version":1,"partitions":[]}', "reassignment JSON: 'partitions' is empty"),
        ('{"partitions":[1]}', "reassignment JSON: partitions[0] must be a JSON object"),
        (
            '{"partitions":[{"partition":0,"replicas":[1]}]}',
            "reassignment JSON: partitions[0]: missing 'topic'",
        ),
        (
            '{"partitions":[{"topic":"","partition":0,"replicas":[1]}]}',
            "reassignment JSON: partitions[0]: 'topic' must be a non-empty string",
        ),
        (
            '{"partitions":[{"topic":"t","replicas":[1]}]}',
            "reassignment JSON: partitions[0]: missing 'partition'",
        ),
        (
            '{"partitions":[{"topic":"t","partition":"0","replicas":[1]}]}',
            "reassignment JSON: partitions[0]: 'partition' must be an integer, got \"0\"",
        ),
        (
            '{"partitions":[{"topic":"t","partition":-1,"replicas":[1]}]}',
            "reassignment JSON: t--1: negative partition",
        ),
        ('{"partitions":[{"topic":"t","partition":0}]}', "reassignment JSON: t-0: missing 'replicas'"),
        (
            '{"partitions":[{"topic":"t","partition":0,"replicas":[]}]}',
            "reassignment JSON: t-0: the replica list is empty",
        ),
        (
            '{"partitions":[{"topic":"t","partition":0,"replicas":[1,"2"]}]}',
            "reassignment JSON: t-0: 'replicas' must be a list of broker ids",
        ),
        (
            '{"partitions":[{"topic":"t","partition":0,"replicas":[1,-2]}]}',
            "reassignment JSON: t-0: negative broker id -2",
        ),
        (
            '{"partitions":[{"topic":"t","partition":0,"replicas":[1,2,1]}]}',
            "reassignment JSON: t-0: broker 1 is listed twice in replicas [1, 2, 1]",
        ),
        (
            '{"partitions":[{"topic":"t","partition":0,"replicas":[1],"logdirs":["any"]}]}',
            "reassignment JSON: partitions[0] has unknown field 'logdirs'",
        ),
        (
            '{"partitions":[{"topic":"t","partition":0,"replicas":[1],"log_dirs":[]}]}',
            "reassignment JSON: t-0: 'log_dirs' must list one entry per replica",
        ),
        (
            '{"partitions":[{"topic":"t","partition":0,"replicas":[1],"log_dirs":["/d"]}]}',
            "reassignment JSON: t-0: 'log_dirs' other than \"any\" are not supported",
        ),
        (
            '{"partitions":[{"topic":"t","partition":0,"replicas":[1]},{"topic":"t","partition":0,"replicas":[2]}]}',
            "reassignment JSON: t-0 is listed twice",
        ),
    ],
)
def test_every_malformed_plan_is_one_line_naming_the_problem(text: str, message: str) -> None:
    with pytest.raises(InvalidArgumentError) as e:
        parse_reassignment_json(text)
    assert str(e.value).startswith(message)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize(
    ("plan", "brokers", "message"),
    [
        ({TopicPartition("u", 0): (1,)}, {1}, "reassignment JSON: unknown topic 'u'"),
        ({TopicPartition("t", 5): (1,)}, {1}, "reassignment JSON: unknown partition t-5 (topic 't' has 2)"),
        ({TP0: (1, 7)}, {1, 2}, "reassignment JSON: t-0: unknown broker id 7 (registered: 1, 2)"),
    ],
)
def test_plan_checked_against_the_cluster(
    plan: dict[TopicPartition, tuple[int, ...]], brokers: set[int], message: str
) -> None:
    with pytest.raises(InvalidArgumentError) as e:
        validate_reassignment(plan, {"t": {0, 1}}, brokers)
    assert str(e.value) == message


def test_brokers_not_checked_when_not_given() -> None:
    validate_reassignment({TP0: (99,)}, {"t": {0}}, None)  # verify/cancel: brokers may be down


def test_topics_to_move() -> None:
    assert parse_topics_to_move_json('{"version":1,"topics":[{"topic":"a"},{"topic":"b"}]}') == ["a", "b"]
    for text, message in [
        ('{"topics":[]}', "topics-to-move JSON: 'topics' is empty"),
        ('{"topics":[{"topic":"a"},{"topic":"a"}]}', "topics-to-move JSON: topic 'a' is listed twice"),
        ('{"topics":[{"name":"a"}]}', "topics-to-move JSON: topics[0] has unknown field 'name'"),
    ]:
        with pytest.raises(InvalidArgumentError) as e:
            parse_topics_to_move_json(text)
        assert str(e.value) == message


def test_broker_list() -> None:
    assert parse_broker_list("3, 1,2") == (3, 1, 2)
    for text, registered, message in [
        ("1,,2", None, "bad --broker-list '1,,2': '' is not a broker id"),
        ("1,a", None, "bad --broker-list '1,a': 'a' is not a broker id"),
        ("1,-1", None, "bad --broker-list '1,-1': negative broker id -1"),
        ("1,1", None, "bad --broker-list '1,1': broker 1 is listed twice"),
        ("1,4", {1, 2}, "bad --broker-list '1,4': broker 4 is not registered"),
    ]:
        with pytest.raises(InvalidArgumentError) as e:
            parse_broker_list(text, registered)
        assert str(e.value) == message


def test_generate_keeps_replication_factor_and_uses_only_the_broker_list() -> None:
    current = {TopicPartition("a", p): (1, 2) for p in range(6)} | {TopicPartition("b", 0): (1,)}
    old, new = generate_reassignment(current, ["a"], [3, 4, 5], random.Random(3))
    assert set(old) == set(new) == {TopicPartition("a", p) for p in range(6)}
    assert all(old[tp] == (1, 2) for tp in old)
    assert all(len(rs) == 2 and set(rs) <= {3, 4, 5} and len(set(rs)) == 2 for rs in new.values())
    leaders = Counter(rs[0] for rs in new.values())
    assert sorted(leaders.values()) == [2, 2, 2]


def test_generate_refuses_rf_above_broker_list() -> None:
    with pytest.raises(InvalidArgumentError) as e:
        generate_reassignment({TP0: (1, 2, 3)}, ["t"], [1, 2])
    assert str(e.value) == "topic 't' has replication factor 3, more than the 2 brokers in --broker-list"


def test_verify_statuses() -> None:
    plan = {
        TopicPartition("t", 0): (2,),
        TopicPartition("t", 1): (3,),
        TopicPartition("t", 2): (1,),
        TopicPartition("t", 3): (2,),
        TopicPartition("t", 4): (1,),
    }
    current = {
        TopicPartition("t", 0): ReplicaAssignment.of([2]),
        TopicPartition("t", 1): ReplicaAssignment.of([3, 1], adding=[3], removing=[1]),
        TopicPartition("t", 2): ReplicaAssignment.of([2]),
        TopicPartition("t", 4): ReplicaAssignment.of([2]),
    }
    result = verify_reassignment(plan, current, legacy_pending={TopicPartition("t", 4)})
    assert [v.status for v in result] == [COMPLETE, IN_PROGRESS, MISMATCH, MISSING, IN_PROGRESS]
    assert result[0].describe() == "Reassignment of partition t-0 is complete."
    assert result[1].describe() == (
        "Reassignment of partition t-1 is still in progress (replicas [3, 1], adding [3], removing [1])."
    )
    assert result[2].describe() == (
        "There is no active reassignment of partition t-2, but its replica set is [2] rather than [1]."
    )
    assert result[3].describe() == "Partition t-3 does not exist."
