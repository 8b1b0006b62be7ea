"""``_replica_map``'s bulk path (every key plain digits, every replica list exactly ints) gives what
the per-entry path gives, and everything else still takes the per-entry path with its errors."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from kafka_controller.domain.errors import ZNodeDecodeError
from kafka_controller.domain.values import ReplicaAssignment, TopicPartition
from kafka_controller.zk import codecs
from kafka_controller.zk.codecs import _replica_map, decode_topic


def _slow(value: dict[str, Any]) -> dict[int, tuple[int, ...]]:
    """The per-entry path alone (the bulk path's list check made to fail)."""
    real = codecs._LIST_ONLY
    codecs._LIST_ONLY = frozenset()  # type: ignore[misc]
    try:
        return _replica_map("/p", value, "partitions")
    finally:
        codecs._LIST_ONLY = real  # type: ignore[misc]


@pytest.mark.parametrize(
    "value",
    [
        {},
        {"0": [1], "1": [2, 3], "2": []},
        {"01": [1], "1": [2]},  # the same partition twice: the last wins, as per entry
        {"7": [1, 2, 3], "3": [3, 2, 1]},
    ],
)
def test_bulk_path_equals_the_per_entry_path(value: dict[str, Any]) -> None:
    got = _replica_map("/p", value, "partitions")
    assert got == _slow(value)
    assert list(got.items()) == list(_slow(value).items())  # same order too


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"0": [1, True]}, "partitions\\[0\\] must be a list of integers"),
        ({"0": [1.0]}, "must be a list of integers"),
        ({"0": "1"}, "must be a list of integers"),
        ({"a": [1]}, "is not a partition number"),
        ({"": [1]}, "is not a partition number"),
        ({"\u0663": [1]}, "is not a partition number"),  # a non-ASCII digit
        ({"9" * 5000: [1]}, "is not a partition number"),  # more digits than int() takes
    ],
)
def test_what_the_bulk_path_refuses_fails_as_before(value: dict[str, Any], message: str) -> None:
    with pytest.raises(ZNodeDecodeError, match=message):
        _replica_map("/p", value, "partitions")


def test_negative_keys_still_parse_per_entry() -> None:
    assert _replica_map("/p", {"-1": [1], "2": [2]}, "partitions") == {-1: (1,), 2: (2,)}


def test_decoded_topic_shares_one_assignment_per_distinct_replica_list() -> None:
    data = orjson.dumps({"version": 2, "partitions": {str(p): [p % 2, 9] for p in range(6)}})
    _, assignment = decode_topic("t", data)
    assert assignment == {TopicPartition("t", p): ReplicaAssignment((p % 2, 9)) for p in range(6)}
    assert len({id(a) for a in assignment.values()}) == 2
