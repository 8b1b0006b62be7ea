"""Coercion of templated run parameters: what the trigger form and templates hand the operators."""

from __future__ import annotations

import pytest

from kafka_controller.airflow.params import (
    as_bool,
    as_int,
    as_int_list,
    as_json,
    as_partitions,
    as_str_list,
    as_text,
    refuse_unknown_conf,
)
from kafka_controller.domain.errors import InvalidArgumentError
from kafka_controller.domain.values import TopicPartition


def test_values_rendered_as_text_or_native_are_accepted() -> None:
    assert as_bool("dry_run", "False") is False and as_bool("dry_run", True) is True
    assert as_int("n", "12") == 12 and as_int("n", 3, minimum=1) == 3
    assert (
        as_int_list("brokers", "[3, 1]")
        == [3, 1]
        == as_int_list("brokers", "3,1")
        == as_int_list("b", [3, 1])
    )
    assert as_int_list("brokers", "") == [] == as_int_list("brokers", None)
    assert as_str_list("topics", "a, b,a") == ["a", "b"]
    assert as_partitions("p", "orders-3,my.topic-10") == [
        TopicPartition("orders", 3),
        TopicPartition("my.topic", 10),
    ]
    assert as_partitions("p", [{"topic": "t-x", "partition": 2}]) == [TopicPartition("t-x", 2)]
    assert as_json("plan", '{"partitions": []}') == {"partitions": []} == as_json("plan", {"partitions": []})
    assert as_text("reason", "  ", required=False) is None and as_text("reason", " why ") == "why"


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: as_bool("dry_run", "yes"), "'dry_run' must be true or false"),
        (lambda: as_int("timeout_s", "soon"), "'timeout_s' must be an integer"),
        (lambda: as_int("timeout_s", 0, minimum=1), "at least 1"),
        (lambda: as_int("n", True), "must be an integer"),
        (lambda: as_int_list("brokers", "1,1"), "lists a broker twice"),
        (lambda: as_int_list("brokers", "1,-2"), "at least 0"),
        (lambda: as_partitions("partitions", "orders"), "'orders' is not TOPIC-PARTITION"),
        (lambda: as_partitions("partitions", ["a-1", "a-1"]), "lists a-1 twice"),
        (lambda: as_partitions("partitions", [{"topic": "a"}]), "bad partition entry"),
        (lambda: as_partitions("partitions", "[1,"), "not a JSON list"),
        (lambda: as_text("requester", ""), "'requester' must not be empty"),
        (lambda: as_json("plan", "{oops"), "'plan' is not valid JSON"),
    ],
)
def test_bad_parameters_are_one_line_errors_naming_the_parameter(call, message: str) -> None:
    with pytest.raises(InvalidArgumentError, match=message) as e:
        call()
    assert "\n" not in str(e.value)


def test_unknown_conf_keys_are_refused_with_the_known_ones() -> None:
    known = ["dry_run", "reason", "requester", "topics"]
    refuse_unknown_conf({"dry_run": False, "topics": []}, known, "preferred_leader_rebalance")
    refuse_unknown_conf(None, known, "preferred_leader_rebalance")
    with pytest.raises(InvalidArgumentError) as e:
        refuse_unknown_conf({"dryrun": False}, known, "preferred_leader_rebalance")
    assert str(e.value) == (
        "unknown parameter 'dryrun' (did you mean 'dry_run'?) in the conf of a preferred_leader_rebalance "
        "run; its parameters are: dry_run, reason, requester, topics"
    )
    with pytest.raises(InvalidArgumentError, match="unknown parameter 'zzz' in the conf"):
        refuse_unknown_conf({"zzz": 1}, known, "d")
