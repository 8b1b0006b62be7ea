"""A LeaderAndIsr's detaches (from a fetcher's clock, from the followers' fetch sessions), which
``apply_state`` does inline for a failover's tens of thousands of partitions, keep exactly what the
one-call-per-value path kept."""

from __future__ import annotations

import pytest

from kafka_controller.broker.fetch_session import NO_TIME, FetcherClock, FetchSession
from kafka_controller.broker.partition import FollowerState, Partition
from kafka_controller.domain.values import TopicPartition

TP = TopicPartition("t", 0)


def _attached(hw: int, leader_now_ms: int, hw_ms: int) -> tuple[Partition, FetcherClock]:
    p = Partition(TP, 2, 50.0)
    p.apply_state(1, 1, (1, 2), 1, (1, 2), 1, 0)
    p.on_fetch_response(10_000, hw)
    clock = FetcherClock()
    clock.leader_now_ms, clock.hw_ms = leader_now_ms, hw_ms
    p.follow_leader_log(clock, 40, 1_000, 0.2)
    return p, clock


@pytest.mark.parametrize("hw", [0, 300, 5_000])
@pytest.mark.parametrize(
    ("leader_now_ms", "hw_ms"), [(3_000, NO_TIME), (3_000, 2_500), (3_000, 4_000), (999, 500)]
)
def test_detach_from_leader_keeps_the_last_answer(hw: int, leader_now_ms: int, hw_ms: int) -> None:
    p, clock = _attached(hw, leader_now_ms, hw_ms)
    attached = (p.log_end_offset(0), p.high_watermark(0))
    p.detach_from_leader()
    assert not p.follows(clock)
    clock.leader_now_ms, clock.hw_ms = 9_000, 8_000  # the fetcher moves on without it
    assert (p.log_end_offset(0), p.high_watermark(0)) == attached


@pytest.mark.parametrize("rate_per_s", [50.0, 0.0])
def test_a_new_epoch_detaches_the_clock_as_detach_from_leader(rate_per_s: float) -> None:
    p, _ = _attached(300, 3_000, 2_500)
    reference, _ = _attached(300, 3_000, 2_500)
    reference.detach_from_leader()
    p.apply_state(1, 2, (1, 2), 2, (1, 2), 1, 5_000)
    reference.apply_state(1, 2, (1, 2), 2, (1, 2), 1, 5_000)
    assert (p.log_end_offset(7_000), p.high_watermark(7_000)) == (
        reference.log_end_offset(7_000),
        reference.high_watermark(7_000),
    )


def _steady_leader() -> tuple[Partition, FetchSession]:
    """Broker 1 leads; broker 2 is in the ISR and steady in its fetch session for two fetches."""
    p = Partition(TP, 1, 50.0)
    p.apply_state(1, 1, (1, 2, 3), 1, (1, 2, 3), 1, 0)
    session = FetchSession(2, 1, 100)
    session.record_fetch(100)
    p.on_follower_fetch(2, 0, 100)
    p.followers[2].attach(session)
    session.record_fetch(300)
    session.record_fetch(500)
    return p, session


def _state(f: FollowerState) -> tuple[object, ...]:
    return tuple(getattr(f, name) for name in FollowerState.__slots__ if name != "session")


def test_a_leader_that_stays_one_keeps_its_followers_brought_up_to_date() -> None:
    p, session = _steady_leader()
    reference, _ = _steady_leader()
    reference.followers[2].refresh(reference)  # what ``FollowerState.detach`` records first
    expected = _state(reference.followers[2])
    follower = p.followers[2]
    p.apply_state(1, 2, (1, 2), 2, (1, 2, 3), 1, 400)  # the ISR shrank: a new epoch
    assert p.followers[2] is follower and follower.session is None
    assert session.explicit == {TP}  # answered one by one from the next fetch
    # what the session derived is recorded; the caught-up time is then reset to the epoch's (Kafka)
    assert _state(follower)[1:] == expected[1:]
    assert (expected[0], follower.last_caught_up_ms) == (300, 400)


def test_a_leader_that_steps_down_drops_its_followers_and_names_the_partition_in_the_session() -> None:
    p, session = _steady_leader()
    leo = p.log_end_offset(600)
    p.apply_state(2, 2, (2, 3), 2, (1, 2, 3), 1, 600)
    assert p.followers == {} and not p.is_leader
    assert session.explicit == {TP}
    assert p.log_end_offset(10_000) == leo  # it stopped producing
