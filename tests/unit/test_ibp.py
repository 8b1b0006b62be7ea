"""InterBrokerProtocolVersion: Kafka's parsing rules, total order, feature gates, request versions."""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_controller.core import ibp
from kafka_controller.core.ibp import InterBrokerProtocolVersion
from kafka_controller.domain.errors import InvalidArgumentError

ALL = InterBrokerProtocolVersion.all_versions()
parse = InterBrokerProtocolVersion.parse

# Kafka 2.8.2 ApiVersion.allVersions followed by 3.6.2 MetadataVersion's 3.x values, spelled out.
_KAFKA_ORDER_LINES = (
    "0.8.0 0.8.1 0.8.2 0.9.0 0.10.0-IV0 0.10.0-IV1 0.10.1-IV0 0.10.1-IV1 0.10.1-IV2 0.10.2-IV0",
    "0.11.0-IV0 0.11.0-IV1 0.11.0-IV2 1.0-IV0 1.1-IV0 2.0-IV0 2.0-IV1 2.1-IV0 2.1-IV1 2.1-IV2",
    "2.2-IV0 2.2-IV1 2.3-IV0 2.3-IV1 2.4-IV0 2.4-IV1 2.5-IV0 2.6-IV0 2.7-IV0 2.7-IV1 2.7-IV2",
    "2.8-IV0 2.8-IV1 3.0-IV0 3.0-IV1 3.1-IV0 3.2-IV0 3.3-IV0 3.3-IV1 3.3-IV2 3.3-IV3 3.4-IV0",
    "3.5-IV0 3.5-IV1 3.5-IV2 3.6-IV0 3.6-IV1 3.6-IV2",
)
KAFKA_ORDER = [v for line in _KAFKA_ORDER_LINES for v in line.split()]


def test_all_versions_follow_kafkas_list() -> None:
    assert [v.version for v in ALL] == KAFKA_ORDER


def test_full_versions_round_trip() -> None:
    for name in KAFKA_ORDER:
        v = parse(name)
        assert v.version == name
        assert str(v) == name
        assert parse(v.version) is v


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2.8", "2.8-IV1"),
        ("2.7", "2.7-IV2"),
        ("0.10.0", "0.10.0-IV1"),
        ("0.10.1", "0.10.1-IV2"),
        ("0.11.0", "0.11.0-IV2"),
        ("1.0", "1.0-IV0"),
        ("3.3", "3.3-IV3"),
        ("0.9.0", "0.9.0"),
        ("0.8.2", "0.8.2"),
    ],
)
def test_short_version_maps_to_newest_internal_version(text: str, expected: str) -> None:
    assert parse(text).version == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2.8.1", "2.8-IV1"),
        ("2.8.2", "2.8-IV1"),
        ("0.10.0.1", "0.10.0-IV1"),
        ("0.8.2.2", "0.8.2"),
        ("2.4.1", "2.4-IV1"),
        (" 2.8-IV0 ", "2.8-IV0"),
        ("3.4-IV0", "3.4-IV0"),
        ("0.10.0-IV0", "0.10.0-IV0"),
    ],
)
def test_patch_segments_are_ignored_as_in_kafka(text: str, expected: str) -> None:
    assert parse(text).version == expected


def test_parse_accepts_a_version_instance() -> None:
    assert parse(ibp.IBP_2_6_IV0) is ibp.IBP_2_6_IV0


@pytest.mark.parametrize("text", ["", "2", "2.9", "abc", "2.8-IV9", "2.8-iv1", "0.10", "3.7-IV0", "v2.8"])
def test_bad_strings_raise_one_line_error(text: str) -> None:
    with pytest.raises(InvalidArgumentError) as info:
        parse(text)
    message = str(info.value)
    assert "\n" not in message
    assert repr(text) in message
    assert "inter.broker.protocol.version" in message


@pytest.mark.parametrize("value", [2.8, None, 28])
def test_non_strings_raise_one_line_error(value: object) -> None:
    with pytest.raises(InvalidArgumentError, match="must be a string") as info:
        parse(value)  # type: ignore[arg-type]
    assert "\n" not in str(info.value)


def test_total_order() -> None:
    assert all(a < b for a, b in itertools.pairwise(ALL))
    shuffled = list(ALL)
    random.Random(7).shuffle(shuffled)
    assert tuple(sorted(shuffled)) == ALL
    assert ibp.IBP_2_8_IV1 > ibp.IBP_2_8_IV0 >= ibp.IBP_2_8_IV0
    assert ibp.IBP_0_9_0 < ibp.IBP_0_10_0_IV0 <= ibp.IBP_0_10_0_IV0
    assert ibp.IBP_2_8_IV1 == parse("2.8") != ibp.IBP_2_8_IV0
    assert len({hash(v) for v in ALL}) == len(ALL)


@given(st.sampled_from(ALL), st.sampled_from(ALL))
def test_order_matches_position_in_kafkas_list(
    a: InterBrokerProtocolVersion, b: InterBrokerProtocolVersion
) -> None:
    ia, ib = KAFKA_ORDER.index(a.version), KAFKA_ORDER.index(b.version)
    assert (a < b) == (ia < ib)
    assert (a == b) == (ia == ib)
    assert (a >= b) == (ia >= ib)


def test_latest_is_2_8_iv1() -> None:
    assert ibp.latest is ibp.IBP_2_8_IV1
    assert ibp.latest.version == "2.8-IV1"


@pytest.mark.parametrize(
    ("gate", "last_without", "first_with"),
    [
        ("is_alter_isr_supported", "2.7-IV1", "2.7-IV2"),
        ("is_feature_versioning_supported", "2.6-IV0", "2.7-IV0"),
        ("uses_topic_id", "2.7-IV2", "2.8-IV0"),
        ("is_leader_recovery_supported", "3.1-IV0", "3.2-IV0"),
    ],
)
def test_feature_gates(gate: str, last_without: str, first_with: str) -> None:
    boundary = KAFKA_ORDER.index(first_with)
    assert KAFKA_ORDER[boundary - 1] == last_without
    for i, name in enumerate(KAFKA_ORDER):
        assert getattr(parse(name), gate) is (i >= boundary), name


@pytest.mark.parametrize(
    ("version", "leader_and_isr", "update_metadata", "stop_replica"),
    [
        ("0.8.0", 0, 0, 0),
        ("0.8.2", 0, 0, 0),
        ("0.9.0", 0, 1, 0),
        ("0.10.0-IV0", 0, 1, 0),
        ("0.10.0-IV1", 0, 2, 0),
        ("0.10.2-IV0", 0, 3, 0),
        ("0.11.0-IV2", 0, 3, 0),
        ("1.0-IV0", 1, 4, 0),
        ("2.1-IV2", 1, 4, 0),
        ("2.2-IV0", 2, 5, 1),
        ("2.3-IV1", 2, 5, 1),
        ("2.4-IV0", 3, 5, 1),
        ("2.4-IV1", 4, 6, 2),
        ("2.5-IV0", 4, 6, 2),
        ("2.6-IV0", 4, 6, 3),
        ("2.8-IV0", 4, 6, 3),
        ("2.8-IV1", 5, 7, 3),
        ("3.1-IV0", 5, 7, 3),
        ("3.2-IV0", 6, 7, 3),
        ("3.3-IV3", 6, 7, 3),
        ("3.4-IV0", 7, 8, 4),
        ("3.6-IV2", 7, 8, 4),
    ],
)
def test_request_versions_at_boundaries(
    version: str, leader_and_isr: int, update_metadata: int, stop_replica: int
) -> None:
    v = parse(version)
    assert v.leader_and_isr_request_version == leader_and_isr
    assert v.update_metadata_request_version == update_metadata
    assert v.stop_replica_request_version == stop_replica
