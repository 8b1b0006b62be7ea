"""``BrokerServer`` features on one broker: audit, metrics, and session expiry on a real ZooKeeper."""

from __future__ import annotations

import sqlite3
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafka_controller.broker.config import BrokerConfig
from kafka_controller.broker.metrics import (
    LEADER_COUNT,
    ZK_EXPIRES_PER_SEC,
    ZK_REQUEST_LATENCY_MS,
    ZK_SESSION_STATE,
)
from kafka_controller.broker.server import BrokerServer
from kafka_controller.controller.metrics import prometheus_name
from kafka_controller.domain.values import Broker, ReplicaAssignment, TopicPartition
from kafka_controller.dryrun.memory_store import InMemoryMetadataStore
from kafka_controller.dryrun.memory_zk import InMemoryZooKeeper
from kafka_controller.ports import MetadataStore
from tests.broker.helpers import DEADLINE_S, wait_until

TPS = [TopicPartition("audited", p) for p in range(4)]
SETTINGS = {"auto.leader.rebalance.enable": "false", "controlled.shutdown.retry.backoff.ms": "100"}


def led(store: MetadataStore, broker_id: int) -> int:
    states = store.get_partition_states(TPS).values()
    return sum(
        1
        for s in states
        if s is not None and not isinstance(s, Exception) and s.leader_and_isr.leader == broker_id
    )


@pytest.fixture
def tree() -> Iterator[InMemoryZooKeeper]:
    yield InMemoryZooKeeper()


def test_audit_url_records_the_controllers_transitions(tree: InMemoryZooKeeper, tmp_path: Path) -> None:
    db = tmp_path / "audit.db"

    def count(table: str) -> int:
        try:
            with sqlite3.connect(db) as conn:
                return int(conn.execute(f"select count(*) from {table}").fetchone()[0])
        except sqlite3.OperationalError:  # the writer has not created the schema yet
            return 0

    admin = InMemoryMetadataStore(tree)
    server = BrokerServer(
        BrokerConfig.of(1, SETTINGS),
        InMemoryMetadataStore(tree),
        audit_url=f"sqlite:///{db}",
        audit_spool_dir=tmp_path / "spool",
    ).startup()
    try:
        wait_until(lambda: admin.get_controller_id() == 1, "broker 1 to become controller")
        # Its startup done (its context loaded): the topic is then new to it, not found at startup.
        assert server.controller.wait_until_idle(DEADLINE_S)
        admin.create_topic("audited", {p: ReplicaAssignment.of([1]) for p in range(4)})
        wait_until(lambda: led(admin, 1) == 4, "the topic's partitions led by broker 1")
        # Every partition: NonExistent -> New -> Online (the rows follow the ZooKeeper writes).
        wait_until(lambda: count("partition_transitions") >= 8, "8 partition transitions in the audit store")
        assert count("controller_events") >= 1  # at least the election
    finally:
        assert server.shutdown() is True


def test_metrics_endpoint_serves_broker_and_controller_gauges(tree: InMemoryZooKeeper) -> None:
    admin = InMemoryMetadataStore(tree)
    server = BrokerServer(BrokerConfig.of(1, SETTINGS), InMemoryMetadataStore(tree), metrics_port=0).startup()
    try:
        wait_until(lambda: admin.get_controller_id() == 1, "broker 1 to become controller")
        admin.create_topic("audited", {p: ReplicaAssignment.of([1]) for p in range(4)})
        wait_until(lambda: led(admin, 1) == 4, "the topic's partitions led by broker 1")
        url = f"http://127.0.0.1:{server.metrics_server.port}/metrics"

        def scrape() -> str:
            with urllib.request.urlopen(url, timeout=10) as response:
                return str(response.read().decode())

        wait_until(lambda: f"{prometheus_name(LEADER_COUNT)} 4" in scrape(), "LeaderCount 4 in the scrape")
        assert "kafka_controller_kafkacontroller_activecontrollercount 1" in scrape()
    finally:
        server.shutdown()


def test_metrics_endpoint_serves_before_the_broker_registers(tree: InMemoryZooKeeper) -> None:
    """Whoever waits for the registration (``cluster up``'s "ready") may scrape at once."""
    scraped_at_registration: list[str] = []
    server: BrokerServer | None = None

    class Store(InMemoryMetadataStore):
        def register_broker(self, broker: Broker) -> int:
            assert server is not None and server.metrics_server is not None, "no metrics endpoint yet"
            url = f"http://127.0.0.1:{server.metrics_server.port}/metrics"
            with urllib.request.urlopen(url, timeout=10) as response:
                scraped_at_registration.append(response.read().decode())
            return super().register_broker(broker)

    server = BrokerServer(BrokerConfig.of(1, SETTINGS), Store(tree), metrics_port=0)
    server.startup()
    try:
        assert len(scraped_at_registration) == 1
        assert prometheus_name(LEADER_COUNT) in scraped_at_registration[0]
    finally:
        server.shutdown()


@pytest.mark.zk
def test_session_expiry_on_real_zookeeper_gives_a_new_broker_epoch(
    zk_connect: str, zk_server: object
) -> None:
    from kafka_controller.testing.zk_harness import expire_session
    from kafka_controller.zk.kazoo_backend import KazooMetadataStore

    admin = KazooMetadataStore(zk_connect)
    server = BrokerServer(
        BrokerConfig.of(1, {**SETTINGS, "zookeeper.session.timeout.ms": "4000"}), zk_connect
    ).startup()
    try:
        wait_until(lambda: admin.get_controller_id() == 1, "broker 1 to become controller")
        admin.create_topic("audited", {p: ReplicaAssignment.of([1]) for p in range(4)})
        wait_until(lambda: led(admin, 1) == 4, "the topic's partitions led by broker 1")
        old_epoch = server.broker_epoch
        assert isinstance(server.store, KazooMetadataStore)
        expire_session(server.store.backend.client, zk_server, wait_reconnected=True)  # type: ignore[arg-type]
        wait_until(lambda: server.broker_epoch > old_epoch, "re-registration with a new broker epoch", 30)
        epochs = {b.id: e for b, e in admin.get_all_brokers_and_epochs().items()}
        assert epochs == {1: server.broker_epoch}
        wait_until(lambda: admin.get_controller_id() == 1, "broker 1 controller again", 30)
        # The new controller's requests carry the new broker epoch, and the broker accepts them.
        admin.create_topic("after", {0: ReplicaAssignment.of([1])})
        wait_until(
            lambda: server.replica_manager.get(TopicPartition("after", 0)) is not None,
            "a LeaderAndIsr accepted after the bounce",
            30,
        )
        # the ZooKeeper client's metrics saw it: one expiry, connected again, timed round trips
        snap = server.metrics.snapshot()
        assert snap[ZK_EXPIRES_PER_SEC]["count"] == 1
        assert snap[ZK_SESSION_STATE] == 1.0
        assert snap[ZK_REQUEST_LATENCY_MS]["count"] > 0
    finally:
        server.shutdown()
        admin.close()


def test_a_session_file_it_cannot_write_does_not_keep_the_broker_from_registering_again(
    zk_connect: str, zk_server: object, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """After a session expiry the broker records its new session for crash detection, then
    registers. A record it cannot write (here a directory stands where the file goes; a full disk
    does the same) costs only crash detection: it warns and registers, as Kafka's broker would. It
    used to fail the whole re-registration, and the broker stayed on its old epoch for good."""
    from kafka_controller.testing.zk_harness import expire_session
    from kafka_controller.zk.kazoo_backend import KazooMetadataStore
    from kafka_controller.zk.session_file import SESSION_FILE_NAME

    admin = KazooMetadataStore(zk_connect)
    config = BrokerConfig.of(1, {**SETTINGS, "zookeeper.session.timeout.ms": "4000"})
    server = BrokerServer(config, zk_connect, data_dir=tmp_path).startup()
    try:
        old_epoch = server.broker_epoch
        (tmp_path / SESSION_FILE_NAME).unlink()
        (tmp_path / SESSION_FILE_NAME / "in-the-way").mkdir(parents=True)
        assert isinstance(server.store, KazooMetadataStore)
        expire_session(server.store.backend.client, zk_server, wait_reconnected=True)  # type: ignore[arg-type]
        wait_until(lambda: server.broker_epoch > old_epoch, "re-registration with a new broker epoch", 30)
        epochs = {b.id: e for b, e in admin.get_all_brokers_and_epochs().items()}
        assert epochs == {1: server.broker_epoch}
        warned = [
            r.getMessage() for r in caplog.records if "cannot record its ZooKeeper session" in r.getMessage()
        ]
        assert len(warned) == 2 and str(tmp_path) in warned[0]  # before registering and after
    finally:
        server.shutdown()
        admin.close()


def test_controlled_shutdown_stops_fetching_before_asking_the_controller(tree: InMemoryZooKeeper) -> None:
    """A deviation from Kafka 2.8 (README, "Deviations"): its broker keeps fetching while it asks,
    so a leader may add it back to an ISR it was just moved out of (closed by KIP-841 in 3.3 on the
    controller's side); this broker stops its fetchers first."""
    server = BrokerServer(BrokerConfig.of(1, SETTINGS), InMemoryMetadataStore(tree)).startup()
    steps: list[str] = []
    stop_fetching, controlled_shutdown = server.data_plane.stop_fetching, server.controlled_shutdown

    def recording_stop_fetching() -> None:
        steps.append("stop_fetching")
        stop_fetching()

    def recording_controlled_shutdown() -> bool:
        steps.append("controlled_shutdown")
        return controlled_shutdown()

    server.data_plane.stop_fetching = recording_stop_fetching  # type: ignore[method-assign]
    server.controlled_shutdown = recording_controlled_shutdown  # type: ignore[method-assign]
    assert server.shutdown() is True
    assert steps[:2] == ["stop_fetching", "controlled_shutdown"]  # (stopping the broker stops it again)
