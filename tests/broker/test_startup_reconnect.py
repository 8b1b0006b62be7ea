"""A broker whose ZooKeeper connection drops while it starts finishes its start once connected
again, as Kafka's does (``KafkaZkClient`` retries a request that failed with CONNECTIONLOSS after
``waitUntilConnected``). Seen in a fault trial: a broker cut from ZooKeeper in the middle of its
start gave up at once, and the restarts that followed met the registration its failed start had
left behind."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kafka_controller.broker import reregistration
from kafka_controller.broker.config import BrokerConfig, zookeeper_store
from kafka_controller.broker.metrics import NOT_RUNNING
from kafka_controller.broker.server import BrokerServer
from kafka_controller.broker.zk_wait import UntilConnected
from kafka_controller.domain.errors import StoreUnavailableError
from kafka_controller.dryrun.memory_store import InMemoryMetadataStore
from kafka_controller.dryrun.memory_zk import InMemoryZooKeeper
from kafka_controller.ports import SystemClock
from kafka_controller.zk.embedded import EmbeddedZooKeeper
from kafka_controller.zk.kazoo_backend import KazooMetadataStore
from tests.broker.helpers import wait_until

SETTINGS = {"auto.leader.rebalance.enable": "false", "zookeeper.session.timeout.ms": "15000"}


def _before_first(store: Any, method: str, cut: Callable[[], None]) -> None:
    """Run ``cut`` right before the first call of ``store.method`` (then call through)."""
    real = getattr(store, method)

    def first(*args: Any, **kwargs: Any) -> Any:
        setattr(store, method, real)
        cut()
        return real(*args, **kwargs)

    setattr(store, method, first)


@pytest.fixture
def zookeeper(tmp_path: Path) -> Iterator[EmbeddedZooKeeper]:
    """A private server: this test stops it, which would cut every other test's sessions."""
    server = EmbeddedZooKeeper(data_dir=tmp_path / "zk").start(timeout=60.0)
    try:
        yield server
    finally:
        server.close()


def test_a_broker_started_across_a_zookeeper_restart_registers_and_elects(
    zookeeper: EmbeddedZooKeeper, caplog: pytest.LogCaptureFixture
) -> None:
    config = BrokerConfig.of(1, SETTINGS)
    store = zookeeper_store(zookeeper.connect_string + "/kc", config, SystemClock())
    assert isinstance(store, KazooMetadataStore)
    back = threading.Event()

    def restart_later() -> None:
        zookeeper.start(timeout=60.0)
        back.set()

    def cut() -> None:  # the server goes; the registration is tried while it is down
        zookeeper.stop()
        wait_until(lambda: not store.connected, "the broker's client to see the server gone")
        threading.Thread(target=restart_later, daemon=True).start()

    _before_first(store, "register_broker", cut)
    caplog.set_level("INFO", logger="kafka_controller.broker.zk_wait")
    server = BrokerServer(config, store).startup()
    try:
        assert back.is_set()
        assert any("Registering the broker was cut short" in r.getMessage() for r in caplog.records)
        admin = KazooMetadataStore(zookeeper.connect_string + "/kc")
        try:
            assert admin.get_broker(1) is not None
            assert admin.get_all_brokers_and_epochs() == {server.broker_info: server.broker_epoch}
            wait_until(lambda: admin.get_controller_id() == 1, "broker 1 to become the controller")
        finally:
            admin.close()
    finally:
        server.shutdown()


def test_a_stop_asked_for_while_waiting_ends_the_start_and_leaves_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    tree = InMemoryZooKeeper()
    store = InMemoryMetadataStore(tree)
    server = BrokerServer(BrokerConfig.of(1, SETTINGS), store)
    _before_first(store, "register_broker", store.disconnect)
    caplog.set_level("INFO", logger="kafka_controller.broker.zk_wait")
    failure: list[BaseException] = []

    def start() -> None:
        try:
            server.startup()
        except BaseException as e:
            failure.append(e)

    starter = threading.Thread(target=start, daemon=True)
    starter.start()
    wait_until(lambda: any("cut short" in r.getMessage() for r in caplog.records), "the start to be waiting")
    assert starter.is_alive() and not failure
    server.shutdown_requested.set()
    starter.join(30)
    assert not starter.is_alive()
    assert len(failure) == 1 and isinstance(failure[0], StoreUnavailableError)
    assert server.broker_state == NOT_RUNNING
    admin = InMemoryMetadataStore(tree)
    assert admin.get_sorted_broker_list() == []
    assert admin.get_controller_id() is None


def test_a_step_that_keeps_failing_is_retried_once_connected_and_warned_of_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = InMemoryMetadataStore(InMemoryZooKeeper())
    calls: list[int] = []

    def flapping() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise StoreUnavailableError("connection loss")
        return "done"

    caplog.set_level("DEBUG", logger="kafka_controller.broker.zk_wait")
    retry = UntilConnected(store, threading.Event(), SystemClock())
    assert retry(flapping, "A step") == "done"
    assert len(calls) == 3
    warnings = [r for r in caplog.records if r.levelname == "WARNING"]
    assert [r.getMessage() for r in warnings] == [
        "A step was cut short (connection loss); waiting until connected to ZooKeeper"
    ]


def test_a_lost_connection_while_re_registering_costs_no_attempt(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a session expiry the broker registers again on its own thread, a bounded number of
    attempts for refusals; a connection lost meanwhile is waited out, as Kafka's client does. With
    one attempt allowed, the old loop gave up on the lost connection."""
    monkeypatch.setattr(reregistration, "REREGISTER_ATTEMPTS", 1)
    tree = InMemoryZooKeeper()
    store = InMemoryMetadataStore(tree)
    server = BrokerServer(BrokerConfig.of(1, SETTINGS), store).startup()
    try:
        old_epoch = server.broker_epoch
        _before_first(store, "register_broker", store.disconnect)
        caplog.set_level("INFO", logger="kafka_controller.broker.zk_wait")
        store.expire_session()
        wait_until(
            lambda: any("Re-registering the broker was cut short" in r.getMessage() for r in caplog.records),
            "the re-registration to wait for the connection",
        )
        store.reconnect()
        wait_until(lambda: server.broker_epoch > old_epoch, "re-registration with a new broker epoch")
        admin = InMemoryMetadataStore(tree)
        assert {b.id: e for b, e in admin.get_all_brokers_and_epochs().items()} == {1: server.broker_epoch}
    finally:
        server.shutdown()
