"""``kafka-controller topics alter`` and ``configs describe|alter`` against a running cluster, over
Kafka's protocol (kafka-python's admin client), bootstrapping from ``--bootstrap-server`` or from the
brokers registered in ZooKeeper; each outcome checked in ZooKeeper, each mistake one line."""

from __future__ import annotations

import pytest

from kafka_controller.cluster import LocalCluster
from tests.cli.clirun import run
from tests.integration.conftest import ClusterFactory
from tests.integration.helpers import wait_healthy

pytestmark = [pytest.mark.integration, pytest.mark.zk, pytest.mark.clients]


@pytest.fixture(scope="module")
def cluster(make_cluster: ClusterFactory) -> LocalCluster:
    c = make_cluster(3, broker_config={"auto.leader.rebalance.enable": "false"})
    ids = c.broker_ids
    c.create_topic("events", {0: [ids[0], ids[1]], 1: [ids[1], ids[2]]})
    wait_healthy(c)
    return c


def zk(cluster: LocalCluster) -> str:
    return cluster.connect_string  # with the chroot


def test_topics_alter_adds_partitions(cluster: LocalCluster, capsys: pytest.CaptureFixture[str]) -> None:
    boot = cluster.listener(cluster.broker_ids[0])
    r = run(capsys, "topics", "alter", "--bootstrap-server", boot, "--topic", "events", "--partitions", "4")
    assert r.code == 0, r.err
    assert "now has 4 partitions" in r.out
    read = cluster.store.get_replica_assignment_and_topic_ids(["events"])["events"]
    assert not isinstance(read, Exception) and len(read.assignment) == 4
    for args, words in (
        (("--partitions", "3"), "which is higher than the requested 3"),
        (("--partitions", "4"), "already has 4 partitions"),
    ):
        r = run(capsys, "topics", "alter", "--bootstrap-server", boot, "--topic", "events", *args)
        assert r.code == 1 and words in r.error_line, r.err
    r = run(capsys, "topics", "alter", "--zookeeper", zk(cluster), "--topic", "nope", "--partitions", "2")
    assert r.code == 1 and "does not exist" in r.error_line, r.err


def test_configs_describe_and_alter(cluster: LocalCluster, capsys: pytest.CaptureFixture[str]) -> None:
    base = ("--zookeeper", zk(cluster), "--entity-type", "topics", "--entity-name", "events")
    r = run(
        capsys, "configs", "alter", *base, "--add-config", "retention.ms=1000,cleanup.policy=[compact,delete]"
    )
    assert r.code == 0, r.err
    assert cluster.store.get_topic_config("events") == {
        "retention.ms": "1000",
        "cleanup.policy": "compact,delete",
    }
    r = run(capsys, "configs", "describe", *base, "--json")
    assert r.code == 0, r.err
    assert r.json()["configs"] == {"retention.ms": "1000", "cleanup.policy": "compact,delete"}
    r = run(capsys, "configs", "alter", *base, "--delete-config", "retention.ms")
    assert r.code == 0 and cluster.store.get_topic_config("events") == {"cleanup.policy": "compact,delete"}
    r = run(capsys, "configs", "alter", *base, "--add-config", "retention.mss=1")
    assert r.code == 1 and "Unknown topic config name: retention.mss" in r.error_line, r.err

    b = cluster.broker_ids[1]
    brokers = ("--zookeeper", zk(cluster), "--entity-type", "brokers")
    r = run(
        capsys,
        "configs",
        "alter",
        *brokers,
        "--entity-name",
        str(b),
        "--add-config",
        "leader.replication.throttled.rate=1000",
    )
    assert r.code == 0, r.err
    assert cluster.store.get_entity_configs([("brokers", str(b))])[("brokers", str(b))] == {
        "leader.replication.throttled.rate": "1000"
    }
    r = run(capsys, "configs", "describe", *brokers, "--entity-name", str(b))
    assert r.code == 0 and "leader.replication.throttled.rate=1000" in r.out, r.out
    r = run(
        capsys, "configs", "alter", *brokers, "--entity-default", "--add-config", "delete.topic.enable=false"
    )
    assert r.code == 1 and "Cannot update these configs dynamically" in r.error_line, r.err
    r = run(
        capsys,
        "configs",
        "alter",
        *brokers,
        "--entity-default",
        "--add-config",
        "unclean.leader.election.enable=true",
    )
    assert r.code == 0, r.err
    assert cluster.store.get_entity_configs([("brokers", "<default>")])[("brokers", "<default>")] == {
        "unclean.leader.election.enable": "true"
    }
    r = run(capsys, "configs", "describe", *brokers, "--entity-default", "--json")
    assert r.code == 0 and r.json()["configs"] == {"unclean.leader.election.enable": "true"}, r.err
    r = run(
        capsys,
        "configs",
        "alter",
        *brokers,
        "--entity-default",
        "--delete-config",
        "unclean.leader.election.enable",
    )
    assert r.code == 0, r.err
    r = run(capsys, "configs", "describe", *brokers)
    assert r.code == 2 and "--entity-name ID or --entity-default" in r.error_line
