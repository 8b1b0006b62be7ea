"""``kafka-controller topics create|delete|alter --bootstrap-server`` and ``configs describe|alter``
against a running cluster, over Kafka's protocol (kafka-python's admin client), bootstrapping from
``--bootstrap-server`` or from the brokers registered in ZooKeeper; each outcome checked in ZooKeeper,
each mistake (the broker's error among them) one line."""

from __future__ import annotations

import pytest

from kafka_controller.cluster.local import LocalCluster
from kafka_controller.domain.values import TopicPartition
from tests.cli.clirun import run
from tests.integration.conftest import ClusterFactory
from tests.integration.helpers import TIMEOUT, state, wait_healthy, wait_state

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
        # Kafka's error name, and none of kafka-python's request and response reprs.
        assert "INVALID_PARTITIONS: " in r.error_line and "Request" not in r.error_line, r.err
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


def test_topics_create_over_kafka(cluster: LocalCluster, capsys: pytest.CaptureFixture[str]) -> None:
    """CreateTopics through kafka-python: the controller places and writes the topic and answers once
    every partition has a leader (so the state znodes are there when the command ends)."""
    boot = cluster.listener(cluster.broker_ids[1])  # not necessarily the controller: the client finds it
    base = ("topics", "create", "--bootstrap-server", boot)
    r = run(
        capsys, *base, "--topic", "made", "--partitions", "3", "--replication-factor", "2",
        "--config", "retention.ms=1000",
    )  # fmt: skip
    assert (r.code, r.out) == (0, "Created topic made.\n"), r.err
    read = cluster.store.get_replica_assignment_and_topic_ids(["made"])["made"]
    assert not isinstance(read, Exception)
    assert sorted(tp.partition for tp in read.assignment) == [0, 1, 2]
    assert all(len(set(ra.replicas)) == 2 for ra in read.assignment.values())
    assert cluster.store.get_topic_config("made") == {"retention.ms": "1000"}
    for p in range(3):
        assert state(cluster, "made", p)[1] in read.assignment[TopicPartition("made", p)].replicas

    b1, b2, b3 = cluster.broker_ids
    r = run(capsys, *base, "--topic", "placed", "--replica-assignment", f"{b1}:{b2},{b2}:{b3}", "--json")
    assert r.code == 0, r.err
    read = cluster.store.get_replica_assignment_and_topic_ids(["placed"])["placed"]
    assert not isinstance(read, Exception)
    assert {tp.partition: ra.replicas for tp, ra in read.assignment.items()} == {0: (b1, b2), 1: (b2, b3)}
    doc = r.json()
    assert doc == {
        "topic": "placed",
        "topic_id": str(read.topic_id),
        "num_partitions": 2,
        "replication_factor": 2,
        "config": {},
    }

    r = run(capsys, *base, "--topic", "made", "--partitions", "1")
    assert r.code == 1, r.err
    assert r.error_line == (
        "kafka-controller topics: error: cannot create topic made: TOPIC_ALREADY_EXISTS: "
        "Topic 'made' already exists."
    )
    r = run(capsys, *base, "--topic", "made", "--partitions", "1", "--if-not-exists")
    assert (r.code, r.out) == (0, "Topic made already exists.\n"), r.err
    assert len(cluster.store.get_replica_assignment_and_topic_ids(["made"])["made"].assignment) == 3  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("--partitions", "1", "--replication-factor", "4"), "INVALID_REPLICATION_FACTOR"),
        (("--partitions", "1", "--config", "retention.mss=1"), "INVALID_CONFIG"),
        (("--replica-assignment", "1:2", "--partitions", "1"), "cannot be combined with --partitions"),
        (("--partitions", "0"), "--partitions must be greater than 0"),
    ],
)
def test_topics_create_over_kafka_refused(
    cluster: LocalCluster, capsys: pytest.CaptureFixture[str], args: tuple[str, ...], words: str
) -> None:
    boot = cluster.listener(cluster.broker_ids[0])
    r = run(capsys, "topics", "create", "--bootstrap-server", boot, "--topic", "refused", *args)
    assert r.code == 1 and words in r.error_line, r.err
    assert not cluster.store.topic_exists("refused")


def test_topics_delete_over_kafka(cluster: LocalCluster, capsys: pytest.CaptureFixture[str]) -> None:
    ids = cluster.broker_ids
    cluster.create_topic("doomed", {0: [ids[0], ids[1]]})
    wait_state(cluster, "doomed", 0, leader=ids[0])
    boot = cluster.listener(ids[2])
    r = run(capsys, "topics", "delete", "--bootstrap-server", boot, "--topic", "doomed", "--json")
    assert r.code == 0, r.err
    assert r.json() == {"topic": "doomed", "marked_for_deletion": True, "in_metadata": False}
    cluster.waits.wait_until(
        lambda: not cluster.store.topic_exists("doomed"), TIMEOUT, "topic doomed to be deleted"
    )

    r = run(capsys, "topics", "delete", "--bootstrap-server", boot, "--topic", "doomed")
    assert r.code == 1, r.err
    assert r.error_line.startswith(
        "kafka-controller topics: error: cannot delete topic doomed: UNKNOWN_TOPIC_OR_PARTITION"
    )
    for extra, words in (
        (("--wait",), "--wait needs --zookeeper"),
        (("--zookeeper", zk(cluster)), "give --bootstrap-server or --zookeeper, not both"),
    ):
        r = run(capsys, "topics", "delete", "--bootstrap-server", boot, "--topic", "events", *extra)
        assert r.code == 2 and words in r.error_line, r.err
    assert cluster.store.topic_exists("events") and not cluster.store.is_topic_marked_for_deletion("events")
