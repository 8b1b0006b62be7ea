"""Crash detection on a 3-server ZooKeeper ensemble: the supervisor (``LocalCluster``) and
``kafka-controller close-session`` (systemd's ``ExecStopPost=``) close a dead broker's session
even while the ensemble elects a new leader, which drops every client for a moment.

The brokers' session timeout is 18 s (Kafka 2.8's default) and a new leader restarts every
session's timeout, so a new controller within ``FAST_S`` of the crash is possible only if the dead
controller's session was closed."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kafka_controller.cli.main import main
from kafka_controller.cluster.local import LocalCluster
from kafka_controller.zk.ensemble import ZooKeeperEnsemble
from kafka_controller.zk.session_close import CloseOutcome
from kafka_controller.zk.session_file import read_session_file
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
    try:
        cluster.crash_broker(old)
        new, new_epoch = cluster.waits.wait_for_controller(FAST_S, exclude=[old], min_epoch=epoch + 1)
        assert new != old and new_epoch == epoch + 1
        assert old not in cluster.registered()
        closed = (old, pid, CloseOutcome.CLOSED)
        closer = cluster.session_closer
        assert closer is not None
        cluster.waits.wait_until(lambda: closed in closer.outcomes, TIMEOUT, "the close's outcome")
        assert live_replicas_have_live_leaders(wait_all_led(cluster))
    finally:  # whole again, pass or fail: the next test kills a leader of its own
        _restore(cluster, dead_zk, old)


def test_close_session_closes_a_dead_brokers_session_while_the_ensemble_elects_a_leader(
    cluster: LocalCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    """As under systemd: the broker dies unsupervised, and ``close-session`` runs at once, while the
    ensemble has no leader."""
    ensemble = cluster.zk
    assert isinstance(ensemble, ZooKeeperEnsemble)
    b = next(x for x in cluster.broker_ids if x != cluster.controller()[0])
    data_dir = cluster.broker_data_dir(b)
    cluster.kill_broker(b)  # asked for by the cluster: its supervisor leaves the session to lapse
    assert b in cluster.registered()
    dead_zk = ensemble.kill_leader()
    try:
        args = ["--data-dir", str(data_dir), "--broker-id", str(b), "--zookeeper", cluster.connect_string]
        assert main(["close-session", *args, "--timeout", "20"]) == 0
        assert "closed session" in capsys.readouterr().out
        cluster.waits.wait_deregistered(b, timeout=FAST_S)
        assert read_session_file(data_dir) is None
    finally:
        _restore(cluster, dead_zk, b)


def _restore(cluster: LocalCluster, dead_zk: int, broker: int) -> None:
    """The killed ZooKeeper server and broker back, and the cluster healthy."""
    ensemble = cluster.zk
    assert isinstance(ensemble, ZooKeeperEnsemble)
    ensemble.member(dead_zk).start(timeout=TIMEOUT)
    ensemble.wait_quorum(timeout=TIMEOUT)
    if broker not in cluster.running_broker_ids():
        cluster.start_broker(broker, timeout=TIMEOUT)
    wait_healthy(cluster)
