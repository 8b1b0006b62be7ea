"""The broker's Kafka 2.8 metrics (``broker.metrics``) on embedded brokers: min-ISR counts from the
topics' ``min.insync.replicas``, ISR expand/shrink meters from committed AlterIsr, BrokerState, the
ZooKeeper session gauge and the controller channel manager's queue sizes, in the Prometheus scrape."""

from __future__ import annotations

import threading
import time
import urllib.request
from collections.abc import Iterator

import pytest

from kafka_controller.broker import metrics as M
from kafka_controller.broker.config import BrokerConfig
from kafka_controller.broker.server import BrokerServer
from kafka_controller.controller.metrics import Meter, MetricsRegistry, prometheus_name
from kafka_controller.domain.values import ReplicaAssignment
from kafka_controller.dryrun.memory_store import InMemoryMetadataStore
from kafka_controller.dryrun.memory_zk import InMemoryZooKeeper
from tests.broker.helpers import wait_until

SETTINGS = {
    "auto.leader.rebalance.enable": "false",
    "controlled.shutdown.retry.backoff.ms": "100",
    "replica.lag.time.max.ms": "1000",
    "sim.fetch.interval.ms": "50",
}


@pytest.fixture
def tree() -> Iterator[InMemoryZooKeeper]:
    yield InMemoryZooKeeper()


def _gauge(server: BrokerServer, name: str) -> float:
    metric = server.metrics.get(name)
    assert callable(metric), name
    return float(metric())


def _count(server: BrokerServer, name: str) -> int:
    metric = server.metrics.get(name)
    assert isinstance(metric, Meter), name
    return metric.count


def test_min_isr_counts_isr_meters_and_broker_state(tree: InMemoryZooKeeper) -> None:
    admin = InMemoryMetadataStore(tree)
    one = BrokerServer(BrokerConfig.of(1, SETTINGS), InMemoryMetadataStore(tree), metrics_port=0)
    assert _gauge_before_start(one) == M.NOT_RUNNING
    one.startup()
    two: BrokerServer | None = None
    try:
        assert _gauge(one, M.BROKER_STATE) == M.RUNNING_AS_BROKER
        wait_until(lambda: admin.get_controller_id() == 1, "broker 1 to become controller")
        admin.create_topic("at", {0: ReplicaAssignment.of([1])})  # ISR [1] = min ISR 1
        admin.create_topic("under", {0: ReplicaAssignment.of([1, 2])}, {"min.insync.replicas": "2"})
        wait_until(lambda: _gauge(one, M.LEADER_COUNT) == 2, "broker 1 leading both topics")
        # broker 2 is not there: "under" has ISR [1] below its min ISR 2
        assert (_gauge(one, M.UNDER_MIN_ISR_PARTITION_COUNT), _gauge(one, M.AT_MIN_ISR_PARTITION_COUNT)) == (
            1,
            1,
        )

        two = BrokerServer(BrokerConfig.of(2, SETTINGS), InMemoryMetadataStore(tree)).startup()
        wait_until(lambda: _count(one, M.ISR_EXPANDS_PER_SEC) == 1, "broker 2 added to the ISR of 'under'")
        wait_until(
            lambda: _gauge(one, M.UNDER_MIN_ISR_PARTITION_COUNT) == 0, "'under' no longer under min ISR"
        )
        assert _gauge(one, M.AT_MIN_ISR_PARTITION_COUNT) == 2  # ISR [1, 2] = min ISR 2
        assert _count(one, M.ISR_SHRINKS_PER_SEC) == 0

        two.data_plane.stop_fetching()  # registered but silent: the leader shrinks the ISR itself
        wait_until(lambda: _count(one, M.ISR_SHRINKS_PER_SEC) == 1, "broker 2 dropped from the ISR", 30)
        wait_until(lambda: _gauge(one, M.UNDER_MIN_ISR_PARTITION_COUNT) == 1, "'under' under min ISR again")

        text = _scrape(one)
        assert f"{prometheus_name(M.UNDER_MIN_ISR_PARTITION_COUNT)} 1" in text
        assert f"{prometheus_name(M.ISR_EXPANDS_PER_SEC)}_total 1" in text
        assert f"{prometheus_name(M.BROKER_STATE)} 3" in text
        assert f"{prometheus_name(M.ZK_SESSION_STATE)} 1" in text
        # the controller's channel: a total, and one labelled series per broker under one TYPE line
        assert f"{prometheus_name(M.TOTAL_QUEUE_SIZE)} 0" in text
        family = prometheus_name(M.QUEUE_SIZE)
        assert text.count(f"# TYPE {family} gauge") == 1
        assert f'{family}{{broker_id="1"}} 0' in text and f'{family}{{broker_id="2"}} 0' in text
        # each thread's CPU, under one TYPE line: the controller's event thread is one of them
        threads = prometheus_name(M.THREAD_CPU_SECONDS)
        assert text.count(f"# TYPE {threads} gauge") == 1
        assert f'{threads}{{thread="controller-event-thread"}} ' in text
    finally:
        if two is not None:
            two.shutdown()
        one.shutdown()
    assert _gauge(one, M.BROKER_STATE) == M.NOT_RUNNING


def _gauge_before_start(server: BrokerServer) -> int:
    return server.broker_state


def _scrape(server: BrokerServer) -> str:
    url = f"http://127.0.0.1:{server.metrics_server.port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as response:
        return str(response.read().decode())


def test_min_isr_follows_a_config_change_notification(tree: InMemoryZooKeeper) -> None:
    admin = InMemoryMetadataStore(tree)
    one = BrokerServer(BrokerConfig.of(1, SETTINGS), InMemoryMetadataStore(tree)).startup()
    try:
        wait_until(lambda: admin.get_controller_id() == 1, "broker 1 to become controller")
        admin.create_topic("t", {0: ReplicaAssignment.of([1])})
        wait_until(lambda: _gauge(one, M.AT_MIN_ISR_PARTITION_COUNT) == 1, "t at its min ISR 1")
        admin.change_topic_config("t", {"min.insync.replicas": "2"})  # with its notification
        wait_until(lambda: _gauge(one, M.UNDER_MIN_ISR_PARTITION_COUNT) == 1, "t under its new min ISR 2")
        assert _gauge(one, M.AT_MIN_ISR_PARTITION_COUNT) == 0
    finally:
        one.shutdown()


def test_each_threads_cpu_is_a_series_labelled_with_its_name() -> None:
    """A thread that burned a measured 0.3 s of CPU reads at least 0.2 s (10 ms ticks), under its
    name made fit for a label."""
    registry = MetricsRegistry()
    M.register_thread_cpu_metrics(registry)
    done, release = threading.Event(), threading.Event()

    def burn() -> None:
        start = time.thread_time()
        while time.thread_time() - start < 0.3:
            pass
        done.set()
        release.wait(30)

    worker = threading.Thread(target=burn, name="burner (1)", daemon=True)
    worker.start()
    try:
        assert done.wait(30)
        text = registry.render_prometheus()
    finally:
        release.set()
        worker.join()
    family = prometheus_name(M.THREAD_CPU_SECONDS)
    values = {
        line.split('thread="', 1)[1].split('"', 1)[0]: float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(family + "{")
    }
    assert values["burner__1_"] >= 0.2
    assert "MainThread" in values
