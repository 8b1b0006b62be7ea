"""Election targets from the command line or Kafka's JSON, and results grouped as Kafka prints them."""

from __future__ import annotations

import pytest

from kafka_controller.admin.election import (
    election_targets,
    group_election_results,
    parse_election_json,
    render_election,
)
from kafka_controller.domain.errors import InvalidArgumentError
from kafka_controller.domain.values import TopicPartition


def test_parse_election_json() -> None:
    text = '{"partitions":[{"topic":"a","partition":1},{"topic":"b","partition":0}]}'
    assert parse_election_json(text) == (TopicPartition("a", 1), TopicPartition("b", 0))


def test_a_reassignment_plan_is_election_json_too() -> None:
    """Kafka ignores a partition entry's other fields (``replicas``, ``log_dirs``, anything else)."""
    plan = (
        '{"version":1,"partitions":[{"topic":"a","partition":1,"replicas":[1,2],"log_dirs":["any","any"]},'
        '{"topic":"b","partition":0,"replicas":[3],"x":{"nested":[1]}}]}'
    )
    assert parse_election_json(plan) == (TopicPartition("a", 1), TopicPartition("b", 0))
    with pytest.raises(InvalidArgumentError, match=r"partitions\[0\]: 'partition' must be an integer"):
        parse_election_json('{"partitions":[{"topic":"a","replicas":[1]}]}')


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("nope", "election JSON is not valid JSON: "),
        ('{"partitions":[]}', "election JSON: 'partitions' is empty"),
        ('{"partition":[]}', "election JSON has unknown field 'partition'"),
        ('{"partitions":{}}', "election JSON: 'partitions' must be a list"),
        (
            '{"partitions":[{"topic":"a"}]}',
            "election JSON: partitions[0]: 'partition' must be an integer >= 0",
        ),
        (
            '{"partitions":[{"topic":"a","partition":-1}]}',
            "election JSON: partitions[0]: 'partition' must be an integer >= 0",
        ),
        (
            '{"partitions":[{"topic":1,"partition":0}]}',
            "election JSON: partitions[0]: 'topic' must be a non-empty string",
        ),
        (
            '{"partitions":[{"topic":"a","partition":0},{"topic":"a","partition":0}]}',
            "election JSON: a-0 is listed twice",
        ),
    ],
)
def test_bad_election_json(text: str, message: str) -> None:
    with pytest.raises(InvalidArgumentError) as e:
        parse_election_json(text)
    assert str(e.value).startswith(message)


def test_targets() -> None:
    one = election_targets(topic="t", partition=2, all_topic_partitions=False, json_partitions=None)
    assert one == (TopicPartition("t", 2),)
    assert (
        election_targets(topic=None, partition=None, all_topic_partitions=True, json_partitions=None) is None
    )
    listed = (TopicPartition("x", 0),)
    assert (
        election_targets(topic=None, partition=None, all_topic_partitions=False, json_partitions=listed)
        == listed
    )


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({}, "name the partitions one way"),
        ({"all_topic_partitions": True, "topic": "t", "partition": 0}, "name the partitions one way"),
        ({"topic": "t"}, "--topic and --partition must be given together"),
        ({"partition": 1}, "--topic and --partition must be given together"),
        ({"topic": "t", "partition": -1}, "--partition must be >= 0, got -1"),
    ],
)
def test_target_errors(kw: dict[str, object], message: str) -> None:
    args: dict[str, object] = {
        "topic": None,
        "partition": None,
        "all_topic_partitions": False,
        "json_partitions": None,
    }
    args.update(kw)
    with pytest.raises(InvalidArgumentError) as e:
        election_targets(**args)  # type: ignore[arg-type]
    assert str(e.value).startswith(message)


def test_grouping_and_kafkas_lines() -> None:
    outcome = group_election_results(
        {
            TopicPartition("t", 1): ("ELECTION_NOT_NEEDED", 2, None),
            TopicPartition("t", 0): ("NONE", 1, None),
            TopicPartition("u", 0): (
                "PREFERRED_LEADER_NOT_AVAILABLE",
                -1,
                "Failed to elect leader for partition u-0",
            ),
        }
    )
    assert outcome.succeeded == {TopicPartition("t", 0): 1}
    assert outcome.not_needed == [TopicPartition("t", 1)]
    assert not outcome.ok
    assert render_election(outcome, "preferred") == [
        "Successfully completed leader election (PREFERRED) for partitions t-0 (leader 1)",
        "Valid replica already elected for partitions t-1",
        "Error completing leader election (PREFERRED) for partition u-0: PREFERRED_LEADER_NOT_AVAILABLE: "
        "Failed to elect leader for partition u-0",
    ]
    assert render_election(group_election_results({}), "unclean") == ["No partitions to elect leaders for"]
