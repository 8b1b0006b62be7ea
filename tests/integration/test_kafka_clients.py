"""Kafka's own clients read the cluster: ``kcat -L``, kafka-python's ``KafkaAdminClient`` and
confluent-kafka's ``AdminClient`` list every broker, topic, partition leader, replicas and ISR
exactly as ZooKeeper holds them, from any broker, before and after a controller failover.

The brokers' metadata caches follow ZooKeeper through the controller's UpdateMetadata, so each
check polls until the listing equals ZooKeeper's (bounded by ``TIMEOUT``). kcat must be installed
(Debian's ``kcat``; ``.ci/bootstrap`` installs it): without it these tests fail, they never skip.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable

import pytest

from kafka_controller.cluster.local import LocalCluster
from tests.integration.conftest import ClusterFactory
from tests.integration.helpers import TIMEOUT, wait_all_led, wait_healthy

pytestmark = [pytest.mark.integration, pytest.mark.zk, pytest.mark.clients]

#: ``(brokers {id: "host:port"}, controller id, {topic: {partition: (leader, replicas, isr)}})``.
Listing = tuple[dict[int, str], int, dict[str, dict[int, tuple[int, tuple[int, ...], tuple[int, ...]]]]]


@pytest.fixture(scope="module")
def cluster(make_cluster: ClusterFactory) -> LocalCluster:
    c = make_cluster(3, broker_config={"auto.leader.rebalance.enable": "false"})
    ids = c.broker_ids
    c.create_topic("orders", {p: [ids[p % 3], ids[(p + 1) % 3], ids[(p + 2) % 3]] for p in range(6)})
    c.create_topic("audit-log", {p: [ids[(p + 1) % 3], ids[p % 3]] for p in range(3)})
    wait_healthy(c)
    return c


def zookeeper_listing(cluster: LocalCluster) -> Listing:
    store = cluster.store
    brokers = {}
    for b in store.get_all_brokers_and_epochs():
        ep = b.endpoint()
        assert ep is not None
        brokers[b.id] = f"{ep.host}:{ep.port}"
    topics: dict[str, dict[int, tuple[int, tuple[int, ...], tuple[int, ...]]]] = {}
    for p in cluster.waits.describe().partitions:
        topics.setdefault(p.topic, {})[p.partition] = (p.leader, tuple(p.replicas), tuple(p.isr))
    controller = store.get_controller_id()
    assert controller is not None
    return brokers, controller, topics


def kcat_listing(bootstrap: str) -> Listing:
    kcat = shutil.which("kcat")
    assert kcat is not None, "kcat is not installed (Debian's kcat package; .ci/bootstrap installs it)"
    out = subprocess.run(
        [kcat, "-L", "-J", "-b", bootstrap, "-m", "10"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    doc = json.loads(out)
    topics = {
        t["topic"]: {
            p["partition"]: (
                p["leader"],
                tuple(r["id"] for r in p["replicas"]),
                tuple(r["id"] for r in p["isrs"]),
            )
            for p in t["partitions"]
        }
        for t in doc["topics"]
    }
    return {b["id"]: b["name"] for b in doc["brokers"]}, doc["controllerid"], topics


def kafka_python_listing(bootstrap: str) -> Listing:
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000, client_id="kc-test")
    try:
        names = admin.list_topics()
        described = admin.describe_topics(names)
        # describe_cluster() of kafka-python 3.0.12 fails on DescribeCluster v0 (KeyError
        # 'endpoint_type'), a client bug; its cached Metadata answer has the brokers and controller.
        cluster_md = admin._client.cluster
        brokers = {b.node_id: f"{b.host}:{b.port}" for b in cluster_md.brokers()}
        controller = cluster_md.controller.node_id if cluster_md.controller is not None else -1
    finally:
        admin.close()
    topics = {
        t["name"]: {
            p["partition_index"]: (p["leader_id"], tuple(p["replica_nodes"]), tuple(p["isr_nodes"]))
            for p in t["partitions"]
        }
        for t in described
        if t["error_code"] == 0
    }
    assert len(topics) == len(names), described
    return brokers, controller, topics


def confluent_listing(bootstrap: str) -> Listing:
    from confluent_kafka.admin import AdminClient

    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
    topics = {
        t.topic: {p.id: (p.leader, tuple(p.replicas), tuple(p.isrs)) for p in t.partitions.values()}
        for t in md.topics.values()
        if t.error is None
    }
    assert len(topics) == len(md.topics), {t.topic: t.error for t in md.topics.values()}
    return {b.id: f"{b.host}:{b.port}" for b in md.brokers.values()}, md.controller_id, topics


CLIENTS: dict[str, Callable[[str], Listing]] = {
    "kcat": kcat_listing,
    "kafka-python": kafka_python_listing,
    "confluent-kafka": confluent_listing,
}


def assert_client_sees_zookeeper(cluster: LocalCluster, client: str, bootstrap: str) -> None:
    """Polls until the client's listing through ``bootstrap`` equals ZooKeeper's."""
    seen: list[tuple[Listing, object]] = []

    def probe() -> bool:
        expected = zookeeper_listing(cluster)
        try:
            got: object = CLIENTS[client](bootstrap)
        except Exception as e:  # a client that cannot list yet: poll again, report it if it lasts
            got = f"{type(e).__name__}: {e}"
        seen.append((expected, got))
        return expected == got

    try:
        cluster.waits.wait_until(probe, TIMEOUT, f"{client} via {bootstrap} to list what ZooKeeper holds")
    except Exception:
        expected, got = seen[-1] if seen else (None, None)
        pytest.fail(f"{client} via {bootstrap}:\n  ZooKeeper: {expected}\n  client:    {got}")


@pytest.mark.parametrize("client", list(CLIENTS))
def test_clients_list_the_cluster_as_zookeeper_holds_it(cluster: LocalCluster, client: str) -> None:
    for broker_id in cluster.running_broker_ids():
        assert_client_sees_zookeeper(cluster, client, cluster.listener(broker_id))


def test_kcat_prints_brokers_topics_leaders_replicas_and_isr(cluster: LocalCluster) -> None:
    kcat = shutil.which("kcat")
    assert kcat is not None, "kcat is not installed (Debian's kcat package; .ci/bootstrap installs it)"
    broker_id = cluster.broker_ids[0]
    out = subprocess.run(
        [kcat, "-L", "-b", cluster.listener(broker_id)],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    assert " 3 brokers:" in out and " 2 topics:" in out, out
    assert 'topic "orders" with 6 partitions:' in out and 'topic "audit-log" with 3 partitions:' in out
    assert f"broker {broker_id} at {cluster.listener(broker_id)}" in out


def test_after_a_controller_failover_every_client_still_sees_zookeeper(cluster: LocalCluster) -> None:
    old, epoch = cluster.controller()
    assert old is not None and epoch is not None
    cluster.kill_broker(old)
    try:
        cluster.waits.wait_for_controller(TIMEOUT, exclude=[old], min_epoch=epoch + 1)
        wait_all_led(cluster)
        brokers, _, topics = zookeeper_listing(cluster)
        assert old not in brokers
        assert all(p[0] != old for parts in topics.values() for p in parts.values())
        for broker_id in cluster.running_broker_ids():
            for client in CLIENTS:
                assert_client_sees_zookeeper(cluster, client, cluster.listener(broker_id))
    finally:
        cluster.start_broker(old, timeout=TIMEOUT)
    wait_healthy(cluster)
    assert_client_sees_zookeeper(cluster, "kcat", cluster.listener(old))
