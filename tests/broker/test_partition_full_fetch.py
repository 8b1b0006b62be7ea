"""A full fetch's answer taken in one call is the three calls it replaces, field for field."""

from __future__ import annotations

import pytest

from kafka_controller.broker.fetch_session import FetcherClock
from kafka_controller.broker.partition import Partition
from kafka_controller.domain.values import TopicPartition

TP = TopicPartition("t", 0)


def _follower(attached: bool) -> Partition:
    p = Partition(TP, 2, 50.0)
    p.apply_state(2, 0, (2,), 0, (1, 2), 1, 0)  # it led first and wrote records
    p.apply_state(1, 1, (1, 2), 1, (1, 2), 1, 2_000)
    if attached:  # following an earlier answer's clock
        clock = FetcherClock()
        clock.leader_now_ms, clock.hw_ms = 3_000, 2_500
        p.follow_leader_log(clock, 40, 1_000, 0.2)
    return p


def _fields(p: Partition) -> dict[str, object]:
    return {name: getattr(p, name) for name in Partition.__slots__}


@pytest.mark.parametrize("attached", [False, True])
@pytest.mark.parametrize(("leo", "hw"), [(80, 70), (120, 130)])
def test_follow_from_full_fetch_is_detach_answer_and_follow(attached: bool, leo: int, hw: int) -> None:
    clock = FetcherClock()
    one_by_one, at_once = _follower(attached), _follower(attached)
    one_by_one.detach_from_leader()
    one_by_one.on_fetch_response(leo, hw)
    one_by_one.follow_leader_log(clock, 60, 4_000, 0.1)
    at_once.follow_from_full_fetch(clock, leo, hw, 60, 4_000, 0.1)
    assert _fields(at_once) == _fields(one_by_one)
    clock.leader_now_ms, clock.hw_ms = 9_000, 8_000
    assert (at_once.log_end_offset(0), at_once.high_watermark(0)) == (
        one_by_one.log_end_offset(0),
        one_by_one.high_watermark(0),
    )


def test_a_leader_only_leaves_its_fetcher_clock() -> None:
    p = Partition(TP, 1, 50.0)
    p.apply_state(1, 0, (1, 2), 0, (1, 2), 1, 0)
    before = _fields(p)
    p.follow_from_full_fetch(FetcherClock(), 80, 70, 60, 4_000, 0.1)
    assert _fields(p) == before
