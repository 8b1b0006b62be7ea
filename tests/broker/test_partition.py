"""The simulated log and Kafka's follower bookkeeping, on explicit millisecond times."""

from __future__ import annotations

from kafka_controller.broker.partition import Partition
from kafka_controller.domain.values import LeaderAndIsr, TopicPartition

TP = TopicPartition("t", 0)


def leader(rate: float = 100.0, isr: tuple[int, ...] = (1, 2, 3), now: int = 0) -> Partition:
    p = Partition(TP, 1, rate)
    p.apply_state(1, 0, isr, 0, (1, 2, 3), 1, now)
    return p


def test_leader_log_grows_at_the_produce_rate_and_a_follower_log_does_not() -> None:
    p = leader(rate=100.0)
    assert p.log_end_offset(0) == 0
    assert p.log_end_offset(2_500) == 250
    follower = Partition(TP, 2, 100.0)
    follower.apply_state(1, 0, (1, 2), 0, (1, 2), 1, 0)
    assert follower.log_end_offset(10_000) == 0


def test_follower_takes_the_leaders_log_end_and_truncates_when_ahead() -> None:
    f = Partition(TP, 2, 50.0)
    f.apply_state(2, 0, (2,), 0, (1, 2), 1, 0)  # it led first and wrote 100 records
    f.apply_state(1, 1, (1, 2), 1, (1, 2), 1, 2_000)
    assert f.log_end_offset(5_000) == 100
    f.on_fetch_response(80, 70)  # the new leader has less: truncate to it
    assert (f.log_end_offset(5_000), f.high_watermark(5_000)) == (80, 70)
    f.on_fetch_response(120, 90)
    assert (f.log_end_offset(6_000), f.high_watermark(6_000)) == (120, 90)


def test_high_watermark_is_the_smallest_isr_log_end_and_never_goes_down() -> None:
    p = leader(rate=1000.0)
    assert p.high_watermark(1_000) == 0  # followers' log ends unknown yet
    p.on_follower_fetch(2, 600, 1_000)
    p.on_follower_fetch(3, 400, 1_000)
    assert p.high_watermark(1_000) == 400
    p.on_follower_fetch(3, 900, 1_000)
    assert p.high_watermark(1_000) == 600
    p.isr = (1,)  # the ISR shrank to the leader alone: its own log end
    assert p.high_watermark(2_000) == 2_000
    p.isr = (1, 2)
    assert p.high_watermark(2_000) == 2_000  # follower 2 is behind, but the HW does not go back


def test_follower_is_caught_up_when_it_reaches_the_log_end_of_its_previous_fetch() -> None:
    p = leader(rate=100.0, now=0)
    p.on_follower_fetch(2, 0, 1_000)  # leader at 100: behind
    assert p.followers[2].last_caught_up_ms == 0
    p.on_follower_fetch(2, 100, 1_500)  # reached where the log ended at 1_000
    assert p.followers[2].last_caught_up_ms == 1_000
    p.on_follower_fetch(2, 150, 1_500)  # reached the log end itself
    assert p.followers[2].last_caught_up_ms == 1_500


def test_out_of_sync_after_the_lag_time_and_never_the_leader_or_while_a_change_is_pending() -> None:
    p = leader(rate=10.0, now=0)
    p.on_follower_fetch(2, 0, 0)
    p.on_follower_fetch(3, 0, 0)
    for t in range(100, 40_000, 500):  # follower 2 keeps up, follower 3 is silent
        p.on_follower_fetch(2, p.log_end_offset(t - 100), t)
    assert p.out_of_sync_replicas(39_600, 30_000) == (3,)
    assert p.out_of_sync_replicas(20_000, 30_000) == ()
    p.propose_isr((1, 2))
    assert p.out_of_sync_replicas(39_600, 30_000) == ()


def test_follower_joins_once_it_reaches_the_high_watermark_it_was_told() -> None:
    p = leader(rate=100.0, isr=(1,), now=0)
    hw, leo, join = p.on_follower_fetch(2, 0, 1_000)
    assert (hw, leo, join) == (100, 100, False)  # first fetch: far behind
    hw, leo, join = p.on_follower_fetch(2, 100, 1_200)
    assert join and (hw, leo) == (120, 120)
    proposal = p.propose_isr((1, 2))
    assert proposal == LeaderAndIsr(1, 0, (1, 2), 0)
    assert p.maximal_isr() == (1, 2)
    assert p.on_follower_fetch(2, 120, 1_400)[2] is False  # pending: no second proposal


def test_no_join_before_the_start_of_the_leader_epoch() -> None:
    p = Partition(TP, 1, 100.0)
    p.apply_state(2, 0, (1, 2), 0, (1, 2, 3), 1, 0)
    p.on_fetch_response(500, 500)
    p.apply_state(1, 1, (1,), 1, (1, 2, 3), 1, 0)  # leads from offset 500
    assert p.leader_epoch_start_offset == 500
    p.on_follower_fetch(3, 0, 0)
    assert p.on_follower_fetch(3, 0, 100)[2] is False


def test_becoming_leader_keeps_the_log_and_resets_the_isr_members_clock() -> None:
    p = Partition(TP, 1, 100.0)
    p.apply_state(2, 0, (1, 2), 0, (1, 2), 1, 0)
    p.on_fetch_response(700, 650)
    assert p.apply_state(1, 1, (1, 2), 1, (1, 2), 1, 10_000) is True
    assert p.log_end_offset(10_000) == 700
    assert p.log_end_offset(11_000) == 800
    assert p.high_watermark(10_000) == 650
    assert p.followers[2].last_caught_up_ms == 10_000
    assert p.apply_state(2, 2, (1, 2), 2, (1, 2), 1, 12_000) is False
    assert p.log_end_offset(20_000) == 900  # stopped producing when it lost leadership


def test_isr_update_from_the_controller_is_ignored_after_a_leader_epoch_change() -> None:
    p = leader(now=0)
    p.propose_isr((1, 2))
    assert p.apply_isr_update(LeaderAndIsr(1, 0, (1, 2), 5)) is True
    assert (p.isr, p.zk_version, p.pending_isr) == ((1, 2), 5, None)
    p.apply_state(1, 1, (1, 2, 3), 6, (1, 2, 3), 1, 0)
    assert p.apply_isr_update(LeaderAndIsr(1, 0, (1,), 7)) is False
    assert p.isr == (1, 2, 3)
