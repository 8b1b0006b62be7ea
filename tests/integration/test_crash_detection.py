"""Crash detection beyond Kafka: a broker process observed dead has its ZooKeeper session closed
by its supervisor (``LocalCluster``, or ``kafka-controller close-session`` from systemd's
``ExecStopPost=``), so its ephemerals go at once instead of after the session timeout.

The session timeout here is 18 s (Kafka 2.8's default) and every wait for the new controller or
for a registration to go is 6 s: passing them is possible only if the session was closed. A Kafka
client (librdkafka, through confluent-kafka) must see the crashed controller's partitions led by
live brokers within the same 6 s."""

from __future__ import annotations

import os
import stat
import subprocess
import time
from pathlib import Path

import pytest

from bench._client_watch import listing
from kafka_controller.broker.config import BrokerConfig, zookeeper_store
from kafka_controller.broker.server import BrokerServer
from kafka_controller.cli.main import main
from kafka_controller.cluster.local import LocalCluster
from kafka_controller.ports import SystemClock
from kafka_controller.zk.embedded import EmbeddedZooKeeper
from kafka_controller.zk.kazoo_backend import KazooMetadataStore
from kafka_controller.zk.paths import broker_id_path
from kafka_controller.zk.security import ZkClientConfig
from kafka_controller.zk.session_close import CloseOutcome, close_recorded_session
from kafka_controller.zk.session_file import (
    SESSION_FILE_NAME,
    UNKNOWN_BROKER_EPOCH,
    SessionRecord,
    read_session_file,
    write_session_file,
)
from tests.broker.helpers import wait_until
from tests.integration.conftest import ClusterFactory
from tests.integration.helpers import TIMEOUT, live_replicas_have_live_leaders, wait_all_led, wait_healthy

pytestmark = [pytest.mark.integration, pytest.mark.zk]

SESSION_TIMEOUT_S = 18.0
FAST_S = 6.0  # well inside the session timeout: only a closed session lets these waits pass


@pytest.fixture(scope="module")
def cluster(make_cluster: ClusterFactory) -> LocalCluster:
    c = make_cluster(
        3,
        broker_config={
            "zookeeper.session.timeout.ms": str(int(SESSION_TIMEOUT_S * 1000)),
            "auto.leader.rebalance.enable": "false",
        },
    )
    ids = c.broker_ids
    c.create_topic("crash", {p: [ids[p % 3], ids[(p + 1) % 3]] for p in range(6)})
    wait_healthy(c)
    return c


def _owner(cluster: LocalCluster, broker_id: int) -> tuple[int, int] | None:
    """(ephemeralOwner, czxid) of ``/brokers/ids/<id>``."""
    s = cluster.store.backend.exists(broker_id_path(broker_id))  # type: ignore[attr-defined]
    return None if s is None else (s.ephemeral_owner, s.czxid)


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def _close_session(*args: str) -> int:
    return main(["close-session", *args])


def test_the_broker_records_its_session_0600_and_removes_it_on_clean_shutdown(cluster: LocalCluster) -> None:
    b = cluster.broker_ids[-1]
    data_dir = cluster.broker_data_dir(b)

    # Written before registering (epoch unknown), then again once registered: poll for the second.
    def registered() -> SessionRecord | None:
        r = read_session_file(data_dir)
        return r if r is not None and r.broker_epoch != UNKNOWN_BROKER_EPOCH else None

    record = wait_until(registered, "the session file to carry the broker epoch")
    assert record.broker_id == b and record.pid == cluster.processes[b].pid
    assert _owner(cluster, b) == (record.session_id, record.broker_epoch)
    assert stat.S_IMODE((data_dir / SESSION_FILE_NAME).stat().st_mode) == 0o600

    cluster.stop_broker(b, timeout=TIMEOUT)
    assert read_session_file(data_dir) is None
    cluster.start_broker(b, timeout=TIMEOUT)
    again = read_session_file(data_dir)
    assert again is not None and again.pid == cluster.processes[b].pid != record.pid
    wait_healthy(cluster)


def test_a_crashed_controller_is_replaced_well_before_its_session_timeout(cluster: LocalCluster) -> None:
    assert cluster.session_closer is not None
    old, epoch = cluster.controller()
    assert old is not None and epoch is not None
    pid = cluster.processes[old].pid
    partitions = len(cluster.waits.describe().partitions)
    survivor = cluster.listener(next(b for b in cluster.running_broker_ids() if b != old))
    assert not listing(survivor, old, partitions, 5.0)["ok"]  # the check can fail: the old one is listed
    started = time.monotonic()
    cluster.crash_broker(old)
    new, new_epoch = cluster.waits.wait_for_controller(FAST_S, exclude=[old], min_epoch=epoch + 1)
    # what a Kafka client sees: the dead broker gone, every partition led by a live one
    seen = cluster.waits.wait_until(
        lambda: (r := listing(survivor, old, partitions, 2.0))["ok"] and r,
        FAST_S - (time.monotonic() - started),
        "confluent-kafka to list every partition led by a live broker",
    )
    assert seen["listed"] == seen["led_by_live"] == partitions
    assert time.monotonic() - started < SESSION_TIMEOUT_S
    assert new != old and new_epoch == epoch + 1
    assert old not in cluster.registered()
    closed = (old, pid, CloseOutcome.CLOSED)
    cluster.waits.wait_until(lambda: closed in cluster.session_closer.outcomes, FAST_S, "the close's outcome")  # type: ignore[union-attr]
    assert read_session_file(cluster.broker_data_dir(old)) is None
    assert live_replicas_have_live_leaders(wait_all_led(cluster))

    cluster.start_broker(old, timeout=TIMEOUT)
    wait_healthy(cluster)


def test_close_session_closes_the_session_of_a_broker_killed_outside_supervision(
    cluster: LocalCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    b = next(x for x in cluster.broker_ids if x != cluster.controller()[0])
    data_dir = cluster.broker_data_dir(b)
    cluster.kill_broker(b)  # asked for by the cluster: its supervisor leaves the session to lapse
    assert b in cluster.registered()
    assert _close_session("--data-dir", str(data_dir), "--zookeeper", cluster.connect_string) == 0
    assert "closed session" in capsys.readouterr().out
    cluster.waits.wait_deregistered(b, timeout=FAST_S)
    assert read_session_file(data_dir) is None
    assert _close_session("--data-dir", str(data_dir), "--zookeeper", cluster.connect_string) == 0
    assert "nothing to close" in capsys.readouterr().out
    cluster.start_broker(b, timeout=TIMEOUT)
    wait_healthy(cluster)


def test_close_session_refuses_a_live_process_and_leaves_stale_records_alone(
    cluster: LocalCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    b = cluster.broker_ids[0]
    live = read_session_file(cluster.broker_data_dir(b))
    assert live is not None
    zk = ["--zookeeper", cluster.connect_string]

    assert _close_session("--data-dir", str(cluster.broker_data_dir(b)), *zk) == 1
    err = capsys.readouterr().err
    assert "still running" in err and len(err.strip().splitlines()) == 1

    stale_dir = tmp_path / "stale"
    dead = _dead_pid()
    for stale in (
        live._replace(pid=dead, session_id=live.session_id + 1),  # an older incarnation's session
        live._replace(pid=dead, broker_epoch=live.broker_epoch - 1),  # written for another registration
    ):
        write_session_file(stale_dir, stale)
        assert _close_session("--data-dir", str(stale_dir), *zk) == 0
        assert "left session" in capsys.readouterr().out
        assert _owner(cluster, b) == (live.session_id, live.broker_epoch)  # untouched
    assert b in cluster.registered()


def test_close_session_error_paths_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    zk = ["--zookeeper", "127.0.0.1:1", "--timeout", "1"]
    assert _close_session("--data-dir", str(tmp_path / "missing"), *zk) == 2
    assert "is not a directory" in capsys.readouterr().err

    (tmp_path / SESSION_FILE_NAME).write_text("{not json")
    assert _close_session("--data-dir", str(tmp_path), *zk) == 1
    err = capsys.readouterr().err
    assert "is not a broker session file" in err and len(err.strip().splitlines()) == 1

    write_session_file(tmp_path, SessionRecord(7, _dead_pid(), -1, 0x1234, b"\x01" * 16, 42))
    assert _close_session("--data-dir", str(tmp_path), "--broker-id", "8", *zk) == 1
    assert "records broker 7, not broker 8" in capsys.readouterr().err

    assert _close_session("--data-dir", str(tmp_path), *zk) == 1  # nothing listens on port 1
    err = capsys.readouterr().err
    assert "cannot connect to ZooKeeper" in err and len(err.strip().splitlines()) == 1
    assert read_session_file(tmp_path) is not None  # nothing closed, so the record stays
    assert os.path.exists(tmp_path / SESSION_FILE_NAME)


def test_a_broker_killed_right_after_registering_leaves_a_record_that_closes_its_session(
    zk_server: EmbeddedZooKeeper, tmp_path: Path
) -> None:
    """Seen in a fault trial: a broker killed between registering and writing its record left a
    registration that only the session timeout removed. The record is written before registering,
    so what the supervisor would read at any moment after the registration closes its session."""
    config = BrokerConfig.of(1, {"zookeeper.session.timeout.ms": str(int(SESSION_TIMEOUT_S * 1000))})
    connect = f"{zk_server.connect_string}/it/crash-window"
    store = zookeeper_store(connect, config, SystemClock())
    assert isinstance(store, KazooMetadataStore)
    at_registering: list[SessionRecord | None] = []
    register = store.register_broker

    def registering(*args: object) -> int:  # what a supervisor would read were the process killed now
        at_registering.append(read_session_file(tmp_path))
        return register(*args)  # type: ignore[arg-type]

    store.register_broker = registering  # type: ignore[method-assign,assignment]
    server = BrokerServer(config, store, data_dir=tmp_path).startup()
    admin = KazooMetadataStore(connect)
    try:
        early = at_registering[0]
        assert early is not None and early.broker_epoch == UNKNOWN_BROKER_EPOCH
        owner = admin.backend.exists(broker_id_path(1))
        assert owner is not None and owner.ephemeral_owner == early.session_id
        after = read_session_file(tmp_path)  # rewritten with the registration's epoch
        assert owner.czxid == server.broker_epoch
        assert after == early._replace(broker_epoch=server.broker_epoch)

        # The process "dies" here, before the rewrite: its early record must be enough.
        epoch = server.broker_epoch  # the re-registration that follows the close gets a new one
        outcome = close_recorded_session(ZkClientConfig(connect, connection_timeout_ms=10_000), early)
        assert outcome is CloseOutcome.CLOSED

        def first_registration_gone() -> bool:
            now = admin.backend.exists(broker_id_path(1))
            return now is None or now.czxid != epoch

        wait_until(first_registration_gone, "the closed session's registration to go", timeout=FAST_S)
    finally:
        admin.close()
        server.shutdown()
