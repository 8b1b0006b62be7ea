"""Crash detection on a 3-server ZooKeeper ensemble: the supervisor closes a crashed broker's
session even while the ensemble elects a new leader, which drops every client for a moment.

The brokers' session timeout is 18 s (Kafka 2.8's default) and a new leader restarts every
session's timeout, so a new controller within ``FAST_S`` of the crash is possible only if the dead
controller's session was closed."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kafka_controller.cluster import LocalCluster
from kafka_controller.zk.ensemble import ZooKeeperEnsemble
from kafka_controller.zk.session_close import CloseOutcome
from tests.integration.helpers import TIMEOUT, live_replicas_have_live_leaders, wait_all_led, wait_healthy

pytestmark = [pytest.mark.integration, pytest.mark.zk, pytest.mark.timeout(600)]

SESSION_TIMEOUT_S = 18.0
FAST_S = 9.0  # half the session timeout, which the ensemble's new leader starts afresh


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    c = LocalCluster(
        3,
        zk_servers=3,
        data_dir=tmp_path_factory.mktemp("ensemble-crash"),
        broker_config={
            "zookeeper.session.timeout.ms": str(int(SESSION_TIMEOUT_S * 1000)),
            "auto.leader.rebalance.enable": "false",
        },
    )
    try:
        c.start(timeout=180)
        ids = c.broker_ids
        c.create_topic("crash", {p: [ids[p % 3], ids[(p + 1) % 3]] for p in range(6)})
        wait_healthy(c)
        yield c
    finally:
        c.close(graceful=False)


def test_a_controller_crashed_while_the_ensemble_elects_a_leader_is_replaced_at_once(
    cluster: LocalCluster,
) -> None:
    ensemble = cluster.zk
    assert isinstance(ensemble, ZooKeeperEnsemble) and cluster.session_closer is not None
    old, epoch = cluster.controller()
    assert old is not None and epoch is not None
    pid = cluster.processes[old].pid
    dead_zk = ensemble.kill_leader()  # every member drops its clients until a new leader is elected
    cluster.crash_broker(old)
    new, new_epoch = cluster.wait_for_controller(FAST_S, exclude=[old], min_epoch=epoch + 1)
    assert new != old and new_epoch == epoch + 1
    assert old not in cluster.registered()
    closed = (old, pid, CloseOutcome.CLOSED)
    cluster.wait_until(lambda: closed in cluster.session_closer.outcomes, TIMEOUT, "the close's outcome")  # type: ignore[union-attr]
    assert live_replicas_have_live_leaders(wait_all_led(cluster))

    ensemble.member(dead_zk).start(timeout=TIMEOUT)
    ensemble.wait_quorum(timeout=TIMEOUT)
    cluster.start_broker(old, timeout=TIMEOUT)
    wait_healthy(cluster)
