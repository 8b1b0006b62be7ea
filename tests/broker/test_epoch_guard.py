"""``ControllerEpochGuard``: what ZooKeeper backs is adopted, what it does not is refused, and
ZooKeeper is read only for an epoch newer than anything already vouched for."""

from __future__ import annotations

import threading

import pytest

from kafka_controller.broker.epoch_guard import ControllerEpochGuard
from kafka_controller.domain.errors import StoreUnavailableError, UnansweredRequestError
from tests.broker.helpers import wait_until


class Zk:
    def __init__(self, epoch: int | None) -> None:
        self.epoch = epoch
        self.fail = False
        self.reads = 0

    def read(self) -> int | None:
        self.reads += 1
        if self.fail:
            raise StoreUnavailableError("ConnectionLoss")
        return self.epoch


def test_known_or_older_epochs_never_read_zookeeper() -> None:
    zk = Zk(3)
    guard = ControllerEpochGuard(zk.read)
    assert guard.unbacked(3, 3) is None
    assert guard.unbacked(1, 3) is None  # older: the replica manager's own check refuses it
    assert zk.reads == 0


def test_a_backed_epoch_is_read_once_then_cached() -> None:
    zk = Zk(4)
    guard = ControllerEpochGuard(zk.read)
    assert guard.unbacked(4, 3) is None
    assert guard.unbacked(4, 3) is None
    assert guard.unbacked(2, 0) is None  # a broker that knows less: 2 <= 4, vouched for already
    assert zk.reads == 1
    assert guard.backed_epoch == 4


def test_an_unbacked_epoch_is_refused_and_a_later_real_one_adopted() -> None:
    zk = Zk(4)
    guard = ControllerEpochGuard(zk.read)
    why = guard.unbacked(2**31 - 1, 4)
    assert why is not None and "/controller_epoch in ZooKeeper is 4" in why
    zk.epoch = 5  # a real failover writes the znode before it sends anything
    assert guard.unbacked(5, 4) is None
    assert guard.unbacked(2**31 - 1, 5) is not None  # still refused: each claim is read afresh


def test_no_znode_refuses_and_no_zookeeper_leaves_the_claim_unanswered() -> None:
    """An unreadable ``/controller_epoch`` neither backs nor refuses a claim: the request goes
    unanswered, so that the controller sends it again once ZooKeeper answers."""
    zk = Zk(None)
    guard = ControllerEpochGuard(zk.read)
    assert guard.unbacked(1, 0) == "ZooKeeper has no /controller_epoch"
    zk.fail = True
    with pytest.raises(UnansweredRequestError, match=r"could not be read.*ConnectionLoss"):
        guard.unbacked(1, 0)
    zk.fail, zk.epoch = False, 1
    assert guard.unbacked(1, 0) is None  # the resent request, once ZooKeeper is back


def test_a_failed_sync_leaves_a_claim_it_would_refuse_unanswered() -> None:
    zk = Zk(4)

    def broken_sync() -> None:
        raise OSError("connection dropped")

    guard = ControllerEpochGuard(zk.read, sync=broken_sync)
    with pytest.raises(UnansweredRequestError, match=r"sync.*connection dropped"):
        guard.unbacked(5, 4)
    assert guard.unbacked(4, 3) is None  # a claim the first read backs needs no sync


def test_requests_waiting_on_a_read_reuse_one_started_after_they_arrived() -> None:
    """A flood costs one read at a time: waiters share the next read, never an older one."""
    zk = Zk(4)
    started, release = threading.Event(), threading.Event()
    ticks = iter(range(1_000_000))
    calls: list[int] = []

    def clock() -> int:
        calls.append(tick := next(ticks))
        return tick

    def slow_read() -> int | None:
        started.set()
        release.wait(10)
        return zk.read()

    guard = ControllerEpochGuard(slow_read, clock=clock)
    results: list[str | None] = []
    first = threading.Thread(target=lambda: results.append(guard.unbacked(99, 4)))
    first.start()
    assert started.wait(10)
    waiters = [threading.Thread(target=lambda: results.append(guard.unbacked(99, 4))) for _ in range(5)]
    for t in waiters:
        t.start()
    # Every waiter has arrived (its arrival read the clock) while the first read is in flight.
    wait_until(lambda: len(calls) == 2 + len(waiters), "every waiter to arrive")
    release.set()
    for t in (first, *waiters):
        t.join(10)
    assert len(results) == 6 and all(r is not None for r in results)
    # The first read started before the waiters arrived: the first waiter reads again, the rest
    # reuse that second read.
    assert zk.reads == 2


def test_a_server_behind_the_leader_is_synced_before_a_claim_is_refused() -> None:
    """The session's server has not applied the controller's write yet: sync, then read again."""
    zk = Zk(4)
    synced: list[bool] = []

    def sync() -> None:
        synced.append(True)
        zk.epoch = 5  # what the leader had already committed

    guard = ControllerEpochGuard(zk.read, sync=sync)
    assert guard.unbacked(5, 4) is None
    assert synced == [True] and zk.reads == 2
    assert guard.unbacked(2**31 - 1, 5) is not None  # synced again: still not backed
    assert len(synced) == 2
