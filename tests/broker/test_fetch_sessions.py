"""Fetch sessions: in the steady state a fetch names no partition, and what the leader derives from
the session's clock is what fetching every partition one by one would have recorded.

Two in-process brokers as in ``test_data_plane``; a second pair is forced to full fetches every
time (the per-partition path) and serves as the reference on the same clock."""

from __future__ import annotations

from typing import Any

import pytest

from kafka_controller.broker import apis as A
from kafka_controller.broker.fetch_session import FETCH_SESSION_ID_NOT_FOUND
from kafka_controller.domain.values import TopicPartition
from kafka_controller.transport.errors import TransportConnectionError
from tests.broker.helpers import broker, leader_and_isr, state
from tests.broker.test_data_plane import LAG_MS, T0, T1, TwoBrokers

T2 = TopicPartition("u", 7)


def _recorded_requests(c: TwoBrokers, follower: int = 2, leader: int = 1) -> list[A.FetchRequest]:
    """Wrap the follower's client so that every Fetch it sends is kept."""
    client = c.plane[follower].fetchers[leader].client
    sent: list[A.FetchRequest] = []
    inner = client.request

    def request(api: str, body: Any) -> Any:
        sent.append(body)
        return inner(api, body)

    client.request = request
    return sent


def _leader_view(c: TwoBrokers, tp: TopicPartition) -> tuple[int, int, int, int]:
    p = c.part(1, tp)
    f = p.followers[2]
    f.refresh(p)
    now = c.clock.time_ms()
    return f.log_end_offset, f.last_caught_up_ms, f.last_fetch_leader_leo, p.high_watermark(now)


def test_steady_fetches_name_no_partition_and_still_advance_the_follower() -> None:
    c = TwoBrokers()
    c.assign(1, 0, (1, 2), T0, T1, T2)
    sent = _recorded_requests(c)
    for _ in range(5):
        c.clock.advance(0.2)
        c.fetch()
    assert [len(r.topics) for r in sent] == [3, 0, 0, 0, 0]
    assert sent[0].session_id == 0 and sent[1].session_id > 0
    assert [r.session_epoch for r in sent[1:]] == [1, 2, 3, 4]
    now = c.clock.time_ms()
    assert c.part(2, T2).log_end_offset(now) == c.part(1, T2).log_end_offset(now) == 100
    assert c.part(1, T2).high_watermark(now) == 80  # the follower's position: the previous fetch


def test_derived_state_matches_fetching_every_partition_one_by_one() -> None:
    sessions, reference = TwoBrokers(), TwoBrokers()
    for c in (sessions, reference):
        c.assign(1, 0, (1, 2), T0, T1)
    for step in (0.2, 0.2, 0.35, 0.2, 0.05, 0.2, 0.9):
        for c in (sessions, reference):
            c.clock.advance(step)
            c.plane[2].fetchers[1].needs_full = c is reference
            c.fetch()
            now = c.clock.time_ms()
            c.part(1).high_watermark(now)  # the reference computes it at every fetch
        for tp in (T0, T1):
            assert _leader_view(sessions, tp) == _leader_view(reference, tp)
            now = sessions.clock.time_ms()
            assert sessions.part(2, tp).log_end_offset(now) == reference.part(2, tp).log_end_offset(now)
            # A steady follower's high watermark may trail Kafka's, never lead it.
            assert sessions.part(2, tp).high_watermark(now) <= reference.part(2, tp).high_watermark(now)


def test_a_steady_follower_that_stops_is_shrunk_then_rejoins_one_by_one() -> None:
    c = TwoBrokers()
    c.assign(1, 0, (1, 2), T0)
    for _ in range(3):
        c.clock.advance(0.2)
        c.fetch()
    assert c.plane[1].maybe_shrink_isr() == 0
    c.clock.advance(LAG_MS / 1000 + 0.1)  # silent
    assert c.plane[1].maybe_shrink_isr() == 1
    c.isr[1].send_pending()
    assert c.part(1).isr == (1,)
    sent = _recorded_requests(c)
    c.clock.advance(0.2)
    c.fetch()  # behind: the leader answers the partition one by one from now on
    c.clock.advance(0.2)
    c.fetch()  # reached the high watermark it was told: proposed for the ISR
    assert [len(r.topics) for r in sent] == [0, 0]
    assert c.part(1).pending_isr == (1, 2)
    c.isr[1].send_pending()
    assert c.part(1).isr == (1, 2)


def test_a_leadership_change_on_the_leader_is_answered_and_the_follower_keeps_its_log() -> None:
    c = TwoBrokers()
    c.assign(1, 0, (1, 2), T0, T1)
    for _ in range(2):
        c.clock.advance(0.2)
        c.fetch()
    # Only the leader hears yet that broker 2 leads T0 now.
    c.rm[1].become_leader_or_follower(
        leader_and_isr([state("t", 0, 2, 1, (2, 1), replicas=(1, 2))], live_leaders=[broker(2, 9002)])
    )
    c.clock.advance(0.2)
    assert c.fetch() == 1  # T0 answered NOT_LEADER_OR_FOLLOWER, T1 advanced
    now = c.clock.time_ms()
    assert c.part(2, T0).log_end_offset(now) == 40  # kept what the previous answer gave
    c.clock.advance(1.0)
    now = c.clock.time_ms()
    assert c.part(2, T0).log_end_offset(now) == 40
    assert c.part(2, T1).log_end_offset(now) == 60  # still following: as of the last answer


def test_an_unknown_session_or_a_lost_answer_means_a_full_fetch_next() -> None:
    c = TwoBrokers()
    c.assign(1, 0, (1, 2), T0)
    sent = _recorded_requests(c)
    c.clock.advance(0.2)
    c.fetch()
    c.plane[1].sessions.clear()  # the leader restarted, say
    c.clock.advance(0.2)
    assert c.fetch() == 0
    c.clock.advance(0.2)
    assert c.fetch() == 1
    assert [len(r.topics) for r in sent] == [1, 0, 1]
    stale = A.FetchRequest(2, (), (), (), (), sent[1].session_id, 99)
    assert c.plane[1].handle_fetch(stale).error == FETCH_SESSION_ID_NOT_FOUND


def test_a_partition_the_leader_refused_is_named_again_until_taken() -> None:
    """The follower hears of its new leader before the leader does (a restarted leader, say): the
    first full fetch is refused for that partition, and every later fetch names it again until the
    leader takes it — it must not drop out of fetching for the rest of the session (found by the
    unclean-election conformance tests: the old leader never rejoined the ISR)."""
    c = TwoBrokers()
    c.assign(1, 0, (1, 2), T0)
    sent = _recorded_requests(c)
    for _ in range(2):
        c.clock.advance(0.2)
        c.fetch()
    # broker 2 learns that T1 is led by broker 1 at epoch 0; broker 1 does not know T1 yet
    c.rm[2].become_leader_or_follower(
        leader_and_isr([state("t", 1, 1, 0, (1,), replicas=(1, 2))], live_leaders=[broker(1, 9001)])
    )
    c.clock.advance(0.2)
    c.fetch()  # T1 refused by the leader
    c.rm[1].become_leader_or_follower(
        leader_and_isr([state("t", 1, 1, 0, (1,), replicas=(1, 2))], live_leaders=[broker(1, 9001)])
    )
    for _ in range(3):
        c.clock.advance(0.2)
        c.fetch()
    assert ("t", 1) in {(t, p) for r in sent[3:] for t, p in zip(r.topics, r.partitions, strict=True)}
    now = c.clock.time_ms()
    assert c.part(2, T1).log_end_offset(now) > 0  # following: it advanced with the leader


class _Waits:
    """Stands in for a fetcher's events: records each wait's timeout, stops the loop after ``n``."""

    def __init__(self, log: list[tuple[str, float]], name: str, stop: Any, n: int) -> None:
        self.log, self.name, self.stop, self.n = log, name, stop, n
        self.flag = False

    def wait(self, timeout: float) -> bool:
        self.log.append((self.name, timeout))
        if len(self.log) >= self.n:
            self.stop()
        return self.flag

    def is_set(self) -> bool:
        return self.flag

    def set(self) -> None:
        self.flag = True

    def clear(self) -> None:
        self.flag = False


def test_an_unreachable_leader_is_retried_after_the_backoff_with_the_request_already_built() -> None:
    """Kafka's replica.fetch.backoff.ms: a dead leader costs one attempt per backoff, and the full
    request (every partition) is built once, not once per attempt, while nothing changed."""
    c = TwoBrokers()
    c.assign(1, 0, (1, 2), T0, T1)
    fetcher = c.plane[2].fetchers[1]
    sent: list[A.FetchRequest] = []
    reachable = [True]
    inner = fetcher.client.request

    def request(api: str, body: Any) -> Any:
        sent.append(body)
        if not reachable[0]:
            raise TransportConnectionError("refused")
        return inner(api, body)

    fetcher.client.request = request
    c.clock.advance(0.2)
    c.fetch()
    reachable[0] = False
    for _ in range(2):
        c.clock.advance(0.2)
        with pytest.raises(TransportConnectionError):
            c.fetch()
    assert [len(r.topics) for r in sent] == [2, 0, 2]
    with pytest.raises(TransportConnectionError):
        c.fetch()
    assert sent[3] is sent[2]  # reused: nothing changed and no answer came
    c.assign(1, 1, (1, 2), T1)  # a LeaderAndIsr for T1: rebuilt with its new epoch
    with pytest.raises(TransportConnectionError):
        c.fetch()
    assert sent[4] is not sent[3] and sent[4].leader_epochs == (0, 1)
    reachable[0] = True
    assert c.fetch() == 2
    assert fetcher._unanswered is None


def test_the_fetch_loop_waits_the_backoff_after_a_failure_until_the_partitions_change() -> None:
    """The interval after an answer, the backoff after a failure; the backoff waits on the event a
    LeaderAndIsr moving partitions to or from the fetcher sets (Kafka's ``partitionMapCond``)."""
    c = TwoBrokers()
    c.assign(1, 0, (1, 2), T0, T1)
    fetcher = c.plane[2].fetchers[1]
    plane = c.plane[2]
    assert plane.fetch_backoff_s == 1.0 and plane.fetch_interval_s == 0.2
    waits: list[tuple[str, float]] = []
    fetcher.stopped = _Waits(waits, "interval", fetcher.close, 3)  # type: ignore[assignment]
    fetcher.changed = _Waits(waits, "backoff", fetcher.close, 3)  # type: ignore[assignment]
    outcomes = iter([None, TransportConnectionError("refused"), None])

    def fetch_once() -> int:
        outcome = next(outcomes)
        if outcome is not None:
            raise outcome
        return 0

    fetcher.fetch_once = fetch_once  # type: ignore[method-assign]
    fetcher._run()
    assert waits == [("interval", 0.2), ("backoff", 1.0), ("interval", 0.2)]
    fetcher.changed.clear()
    c.plane[2].on_become_leaders([c.part(2, T0)])  # moved away from the fetcher: wakes it
    assert fetcher.changed.is_set()


def _named(r: A.FetchRequest) -> list[tuple[str, int, int]]:
    return list(zip(r.topics, r.partitions, r.leader_epochs, strict=True))


def test_a_changed_partition_set_is_told_incrementally_and_only_what_changed() -> None:
    """After a leadership change only the moved partitions travel (as after a failover: Kafka's
    incremental fetch sessions), not every partition of the fetcher again."""
    c = TwoBrokers()
    c.assign(1, 0, (1, 2), T0, T1)
    sent = _recorded_requests(c)
    for _ in range(2):
        c.clock.advance(0.2)
        c.fetch()
    session = c.plane[1].sessions[2]

    c.assign(1, 0, (1, 2), T2)  # a partition added to the fetcher
    c.clock.advance(0.2)
    c.fetch()
    assert sent[-1].session_id == session.session_id and _named(sent[-1]) == [("u", 7, 0)]
    c.assign(1, 1, (1, 2), T1)  # a new leader epoch, same leader
    c.clock.advance(0.2)
    c.fetch()
    assert _named(sent[-1]) == [("t", 1, 1)] and session.partitions[T1] == 1
    c.clock.advance(0.2)
    c.fetch()
    assert _named(sent[-1]) == [] and not sent[-1].forgotten_topics
    assert c.plane[1].sessions[2] is session  # one session throughout
    now = c.clock.time_ms()
    for tp in (T0, T1, T2):
        assert c.part(2, tp).log_end_offset(now) == c.part(1, tp).log_end_offset(now), tp

    c.assign(2, 1, (2, 1), T0)  # broker 2 leads T0 now: its fetcher from broker 1 forgets it
    c.clock.advance(0.2)
    c.fetch()
    forgotten = list(zip(sent[-1].forgotten_topics, sent[-1].forgotten_partitions, strict=True))
    assert _named(sent[-1]) == [] and forgotten == [("t", 0)]
    assert T0 not in session.partitions and T0 not in session.explicit


def test_incremental_changes_derive_what_full_fetches_record() -> None:
    """The same leadership changes on two pairs of brokers, one told incrementally and one forced
    to full fetches every time: the leader's view of its follower and the follower's log agree."""
    sessions, reference = TwoBrokers(), TwoBrokers()
    changes = {
        2: lambda c: c.assign(1, 0, (1, 2), T2),  # added
        4: lambda c: c.assign(1, 1, (1, 2), T1),  # new epoch
        5: lambda c: c.assign(1, 1, (1,), T0),  # out of the ISR at a new epoch: answered one by one
    }
    for c in (sessions, reference):
        c.assign(1, 0, (1, 2), T0, T1)
    for step, advance in enumerate((0.2, 0.2, 0.35, 0.2, 0.05, 0.2, 0.2, 0.9, 0.2)):
        for c in (sessions, reference):
            if step in changes:
                changes[step](c)
            c.clock.advance(advance)
            c.plane[2].fetchers[1].needs_full = c is reference
            c.fetch()
            now = c.clock.time_ms()
            for tp in (T0, T1, T2):
                if c.rm[1].get(tp) is not None:
                    c.part(1, tp).high_watermark(now)  # the reference computes it at every fetch
        for tp in (T0, T1, T2):
            if sessions.rm[1].get(tp) is None:
                continue
            assert _leader_view(sessions, tp) == _leader_view(reference, tp), (step, tp)
            now = sessions.clock.time_ms()
            assert sessions.part(2, tp).log_end_offset(now) == reference.part(2, tp).log_end_offset(now)
            assert sessions.part(2, tp).high_watermark(now) <= reference.part(2, tp).high_watermark(now)
    assert sessions.part(1, T0).pending_isr == reference.part(1, T0).pending_isr


def test_a_leader_that_ignores_named_partitions_gets_a_full_fetch_next() -> None:
    """A leader of the version before incremental changes answers only its session's own
    partitions: the follower falls back to a full fetch, which names them, instead of waiting for
    answers that never come (a rolling upgrade)."""
    c = TwoBrokers()
    c.assign(1, 0, (1, 2), T0)
    c.clock.advance(0.2)
    c.fetch()
    client = c.plane[2].fetchers[1].client
    current = client.request
    sent: list[A.FetchRequest] = []

    def older_leader(api: str, body: A.FetchRequest) -> Any:
        sent.append(body)
        if body.session_id:  # the older leader's incremental path reads no partition
            body = A.FetchRequest(body.replica_id, (), (), (), (), body.session_id, body.session_epoch)
        return current(api, body)

    client.request = older_leader
    c.assign(1, 0, (1, 2), T2)
    c.clock.advance(0.2)
    c.fetch()
    c.clock.advance(0.2)
    c.fetch()
    assert [(r.session_id == 0, len(r.topics)) for r in sent] == [(False, 1), (True, 2)]
    now = c.clock.time_ms()
    assert c.part(2, T2).log_end_offset(now) == c.part(1, T2).log_end_offset(now) > 0
