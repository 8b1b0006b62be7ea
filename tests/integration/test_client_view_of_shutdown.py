"""What a Kafka client sees while a broker shuts down: librdkafka (confluent-kafka) lists a surviving
broker's metadata every few milliseconds while another broker, the controller or not, gets SIGTERM.

A controlled shutdown moves the broker's leaderships away before it stops, so no listing may show
a partition without a leader, and none taken after the broker's exit may show one still led by
it: a client never sends to a broker that is gone. (A kill fails the second check: the survivors
name the dead leader until the new controller's UpdateMetadata reaches them.)
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import NamedTuple

import pytest

from kafka_controller.cluster.local import LocalCluster
from tests.integration.conftest import ClusterFactory
from tests.integration.helpers import TIMEOUT, wait_healthy

pytestmark = [pytest.mark.integration, pytest.mark.zk, pytest.mark.clients]


class Listing(NamedTuple):
    start: float
    end: float
    brokers: frozenset[int]
    leaders: dict[tuple[str, int], int]


@pytest.fixture(scope="module")
def cluster(make_cluster: ClusterFactory) -> LocalCluster:
    c = make_cluster(3, broker_config={"auto.leader.rebalance.enable": "false"})
    ids = c.broker_ids
    c.create_topic("payments", {p: [ids[p % 3], ids[(p + 1) % 3], ids[(p + 2) % 3]] for p in range(9)})
    c.create_topic("clicks", {p: [ids[(p + 1) % 3], ids[p % 3]] for p in range(6)})
    wait_healthy(c)
    return c


class ClientWatch:
    """Lists ``bootstrap``'s metadata on a thread, a fresh client each time (no client-side cache)."""

    def __init__(self, bootstrap: str) -> None:
        self._bootstrap = bootstrap
        self.listings: list[Listing] = []
        self.errors: list[str] = []
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> ClientWatch:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stopped.set()
        self._thread.join(30)

    def _run(self) -> None:
        from confluent_kafka.admin import AdminClient

        while not self._stopped.is_set():
            start = time.time()
            try:
                md = AdminClient({"bootstrap.servers": self._bootstrap, "log_level": 0}).list_topics(
                    timeout=10
                )
            except Exception as e:  # kept: the survivor must answer throughout
                self.errors.append(f"{type(e).__name__}: {e}")
                continue
            leaders = {(t.topic, p.id): p.leader for t in md.topics.values() for p in t.partitions.values()}
            self.listings.append(Listing(start, time.time(), frozenset(md.brokers), leaders))
            self._stopped.wait(0.005)

    def wait_for(self, what: str, ok: Callable[[Listing], bool], after: float) -> Listing:
        """The first listing started after ``after`` for which ``ok(listing)`` holds."""
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            for x in list(self.listings):
                if x.start > after and ok(x):
                    return x
            time.sleep(0.01)
        raise AssertionError(
            f"no listing through {self._bootstrap} showed {what}; errors: {self.errors[-3:]}"
        )


@pytest.mark.parametrize("who", ["a broker", "the controller"])
def test_a_client_never_sees_a_leaderless_partition_or_a_leader_that_is_gone(
    cluster: LocalCluster, who: str
) -> None:
    controller, _ = cluster.controller()
    assert controller is not None
    led = {
        b: sum(1 for p in cluster.waits.describe().partitions if p.leader == b) for b in cluster.broker_ids
    }
    b = (
        controller
        if who == "the controller"
        else max((x for x in led if x != controller), key=led.__getitem__)
    )
    assert led[b] > 0
    survivor = next(x for x in cluster.running_broker_ids() if x != b)
    partitions = len(cluster.waits.describe().partitions)
    with ClientWatch(cluster.listener(survivor)) as watch:
        # the check can fail: before the shutdown the client sees b leading
        watch.wait_for(f"broker {b} leading", lambda x: b in x.leaders.values(), 0.0)
        code = cluster.processes[b].stop(TIMEOUT)  # SIGTERM: controlled shutdown, then exit
        exited = time.time()
        assert code == 0
        cluster.waits.wait_deregistered(b, timeout=TIMEOUT)
        watch.wait_for(f"broker {b} gone", lambda x: b not in x.brokers, exited)
    assert not watch.errors, watch.errors
    assert all(len(x.leaders) == partitions for x in watch.listings)
    leaderless = [x for x in watch.listings if any(leader < 0 for leader in x.leaders.values())]
    assert not leaderless, f"listings with a partition without a leader: {leaderless[:2]}"
    unknown = [x for x in watch.listings if not set(x.leaders.values()) <= x.brokers]
    assert not unknown, f"listings naming a leader they do not list: {unknown[:2]}"
    stale = [x for x in watch.listings if x.start > exited and b in x.leaders.values()]
    assert not stale, f"after broker {b} exited, listings still had it leading: {stale[:2]}"
    cluster.start_broker(b, timeout=TIMEOUT)
    wait_healthy(cluster)
