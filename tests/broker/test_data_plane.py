"""The simulated data plane between two in-process brokers: fetching, high watermark, ISR changes.

Fetches go through the real Fetch codec (``LoopbackClient``) but no sockets, threads are not
started, and time is a manual clock: every step is explicit.
"""

from __future__ import annotations

import itertools
import time
from typing import Any

from kafka_controller.broker import apis as A
from kafka_controller.broker.alter_isr import AlterIsrManager
from kafka_controller.broker.data_plane import DataPlane
from kafka_controller.broker.replica_manager import ReplicaManager
from kafka_controller.domain.requests import Errors
from kafka_controller.domain.values import LeaderAndIsr, TopicPartition
from kafka_controller.testing.clock import ManualClock
from kafka_controller.transport.errors import TransportConnectionError
from tests.broker.helpers import LoopbackClient, broker, leader_and_isr, state

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)
LAG_MS = 1_000


class ControllerStub:
    """Answers AlterIsr as the controller would (zk version + 1), or with scripted outcomes."""

    def __init__(self) -> None:
        self.requests: list[A.AlterIsrRequest] = []
        self.script: list[Any] = []  # per call: an exception, a top-level error, or per-tp overrides

    def __call__(self, request: A.AlterIsrRequest, fresh: bool) -> A.AlterIsrResponse:
        self.requests.append(request)
        step = self.script.pop(0) if self.script else None
        if isinstance(step, Exception):
            raise step
        if isinstance(step, str):
            return A.AlterIsrResponse(step)
        out: dict[TopicPartition, Any] = {
            tp: LeaderAndIsr(request.broker_id, lai.leader_epoch, lai.isr, lai.zk_version + 1)
            for tp, lai in request.isrs.items()
        }
        out.update(step or {})
        return A.AlterIsrResponse(Errors.NONE, out)


class TwoBrokers:
    def __init__(self) -> None:
        self.clock = ManualClock(start_s=0.0)
        self.controller = ControllerStub()
        self.rm: dict[int, ReplicaManager] = {}
        self.isr: dict[int, AlterIsrManager] = {}
        self.plane: dict[int, DataPlane] = {}
        by_port: dict[int, DataPlane] = {}
        for b in (1, 2):
            rm = self.rm[b] = ReplicaManager(b, self.clock.time_ms, produce_rate_per_s=100.0)
            self.isr[b] = AlterIsrManager(rm, lambda: 10, self.controller)
            self.plane[b] = by_port[9000 + b] = DataPlane(
                rm,
                self.isr[b],
                replica_lag_time_max_ms=LAG_MS,
                start_threads=False,
                client_factory=lambda _h, port, _t: LoopbackClient(
                    lambda _api, body: by_port[port].handle_fetch(body)
                ),
            )

    def assign(self, leader: int, epoch: int, isr: tuple[int, ...], *tps: TopicPartition) -> None:
        for rm in self.rm.values():
            rm.become_leader_or_follower(
                leader_and_isr(
                    [state(tp.topic, tp.partition, leader, epoch, isr, replicas=(1, 2)) for tp in tps],
                    live_leaders=[broker(leader, 9000 + leader)],
                )
            )

    def fetch(self, follower: int = 2, leader: int = 1) -> int:
        return self.plane[follower].fetchers[leader].fetch_once()

    def part(self, broker_id: int, tp: TopicPartition = T0) -> Any:
        p = self.rm[broker_id].get(tp)
        assert p is not None
        return p


def test_follower_fetches_the_leaders_log_and_high_watermark() -> None:
    c = TwoBrokers()
    c.assign(1, 0, (1, 2), T0, T1)
    c.clock.advance(2.0)
    assert c.fetch() == 2
    now = c.clock.time_ms()
    assert c.part(2).log_end_offset(now) == 200
    assert c.part(2).high_watermark(now) == 0  # the leader did not know the follower's position yet
    c.clock.advance(1.0)
    c.fetch()
    now = c.clock.time_ms()
    assert c.part(1).high_watermark(now) == 200  # min(leader 300, follower 200)
    assert (c.part(2).log_end_offset(now), c.part(2).high_watermark(now)) == (300, 200)


def test_a_caught_up_follower_joins_the_isr_through_alter_isr() -> None:
    c = TwoBrokers()
    c.assign(1, 0, (1,), T0, T1)
    c.clock.advance(1.0)
    c.fetch()  # first fetch: behind, nothing proposed
    assert c.isr[1].pending_count == 0
    c.clock.advance(0.2)
    c.fetch()  # reached the high watermark it was told: both partitions proposed
    assert c.part(1).pending_isr == (1, 2) and c.isr[1].pending_count == 2
    assert c.isr[1].send_pending() is True
    (request,) = c.controller.requests  # one request for both partitions
    assert request.broker_id == 1 and request.broker_epoch == 10
    assert request.isrs == {T0: LeaderAndIsr(1, 0, (1, 2), 0), T1: LeaderAndIsr(1, 0, (1, 2), 0)}
    assert (c.part(1).isr, c.part(1).zk_version, c.part(1).pending_isr) == ((1, 2), 1, None)


def test_a_silent_follower_is_dropped_from_the_isr_after_the_lag_time() -> None:
    c = TwoBrokers()
    c.assign(1, 0, (1, 2), T0)
    c.clock.advance(0.1)
    c.fetch()
    assert c.plane[1].maybe_shrink_isr() == 0
    c.clock.advance(LAG_MS / 1000 + 0.1)  # the follower stops fetching
    assert c.plane[1].maybe_shrink_isr() == 1
    assert c.plane[1].maybe_shrink_isr() == 0  # pending: not proposed twice
    c.isr[1].send_pending()
    assert c.part(1).isr == (1,)
    c.clock.advance(1.0)
    assert c.part(1).high_watermark(c.clock.time_ms()) == c.part(1).log_end_offset(c.clock.time_ms())


def test_alter_isr_retries_on_no_answer_and_not_controller_and_gives_up_when_fenced() -> None:
    c = TwoBrokers()
    c.assign(1, 0, (1, 2), T0, T1)
    c.clock.advance(LAG_MS / 1000 + 0.1)
    c.plane[1].maybe_shrink_isr()
    c.controller.script = [TransportConnectionError("refused"), "NOT_CONTROLLER", {T1: "FENCED_LEADER_EPOCH"}]
    assert c.isr[1].send_pending() is False
    assert c.isr[1].send_pending(fresh=True) is False
    assert c.isr[1].pending_count == 2  # both re-queued
    assert c.isr[1].send_pending(fresh=True) is True
    assert len(c.controller.requests) == 3
    assert c.part(1, T0).isr == (1,)
    assert c.part(1, T1).isr == (1, 2) and c.part(1, T1).pending_isr is None  # waits for the controller
    assert c.isr[1].pending_count == 0


def test_a_proposal_is_not_sent_once_the_leader_epoch_moved_on() -> None:
    c = TwoBrokers()
    c.assign(1, 0, (1, 2), T0)
    c.clock.advance(LAG_MS / 1000 + 0.1)
    c.plane[1].maybe_shrink_isr()
    c.assign(1, 1, (1, 2), T0)  # the controller moved on before the proposal left
    assert c.isr[1].send_pending() is True
    assert c.controller.requests == []


def test_fetch_is_fenced_by_leader_epoch_and_leadership() -> None:
    c = TwoBrokers()
    c.assign(1, 3, (1, 2), T0)
    fetch = A.FetchRequest(2, ("t", "t", "t", "x"), (0, 0, 0, 0), (0, 0, 0, 0), (2, 4, 3, 0))
    response = c.plane[1].handle_fetch(fetch)
    assert response.errors == (
        "FENCED_LEADER_EPOCH",
        A.UNKNOWN_LEADER_EPOCH,
        "NONE",
        A.NOT_LEADER_OR_FOLLOWER,
    )
    assert response.high_watermarks[0] == -1 and response.log_end_offsets[2] == 0
    assert c.plane[2].handle_fetch(fetch).errors[2] == A.NOT_LEADER_OR_FOLLOWER


def test_leadership_changes_move_partitions_between_fetchers() -> None:
    c = TwoBrokers()
    c.assign(1, 0, (1, 2), T0, T1)
    assert list(c.plane[2].fetchers) == [1] and set(c.plane[2].fetchers[1].partitions) == {T0, T1}
    c.rm[2].become_leader_or_follower(leader_and_isr([state("t", 0, 2, 1, (2, 1), replicas=(1, 2))]))
    assert set(c.plane[2].fetchers[1].partitions) == {T1}
    c.rm[1].become_leader_or_follower(
        leader_and_isr([state("t", 0, 2, 1, (2, 1), replicas=(1, 2))], live_leaders=[broker(2, 9002)])
    )
    assert set(c.plane[1].fetchers[2].partitions) == {T0}
    c.clock.advance(1.0)
    assert c.fetch(follower=1, leader=2) == 1


def test_after_stop_fetching_no_fetcher_thread_runs_but_fetches_are_still_served() -> None:
    c = TwoBrokers()
    leader = c.plane[1]
    plane = DataPlane(
        c.rm[2],
        c.isr[2],
        client_factory=lambda _h, _p, _t: LoopbackClient(lambda _a, body: leader.handle_fetch(body)),
    )
    c.assign(1, 0, (1, 2), T0)
    running = plane.fetchers[1].thread
    plane.stop_fetching()
    assert not running.is_alive() and plane.fetchers == {}
    c.rm[2].become_leader_or_follower(
        leader_and_isr([state("t", 1, 1, 0, (1, 2), replicas=(1, 2))], live_leaders=[broker(1, 9001)])
    )
    assert not plane.fetchers[1].thread.is_alive()  # following is over for good
    c.rm[2].become_leader_or_follower(leader_and_isr([state("t", 2, 2, 0, (2, 1), replicas=(1, 2))]))
    served = plane.handle_fetch(A.FetchRequest(1, ("t",), (2,), (0,), (0,)))
    assert served.errors == ("NONE",)


def test_a_partition_the_controller_failed_to_update_is_resent_only_after_the_backoff() -> None:
    """UNKNOWN_SERVER_ERROR for a partition (the controller's ZooKeeper session is suspended) is
    retried, but after ``retry_backoff_s``: resent at once it spun at thousands of requests a
    second against the controller (seen in a ZooKeeper-restart fault trial)."""
    c = TwoBrokers()
    c.assign(1, 0, (1, 2), T0)
    c.clock.advance(LAG_MS / 1000 + 0.1)
    c.plane[1].maybe_shrink_isr()
    failure = {T0: Errors.UNKNOWN_SERVER_ERROR}
    c.controller.script = [failure, failure, failure]
    sent_at: list[float] = []

    def timed(request: A.AlterIsrRequest, fresh: bool) -> A.AlterIsrResponse:
        sent_at.append(time.monotonic())
        return c.controller(request, fresh)

    backoff = 0.2
    manager = AlterIsrManager(c.rm[1], lambda: 10, timed, retry_backoff_s=backoff)
    manager.submit(T0, LeaderAndIsr(1, 0, (1,), 0))
    manager.start()
    try:
        deadline = time.monotonic() + 30
        while c.part(1).isr != (1,):
            assert time.monotonic() < deadline, f"ISR never applied after {len(sent_at)} requests"
            time.sleep(0.01)  # polling interval
    finally:
        manager.stop()
    assert len(sent_at) == 4  # three failures, then the success
    gaps = [b - a for a, b in itertools.pairwise(sent_at)]
    assert min(gaps) >= backoff * 0.9, gaps
