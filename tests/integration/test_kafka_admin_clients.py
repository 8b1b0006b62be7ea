"""Kafka's own admin clients change the cluster through the brokers' Kafka protocol: confluent-kafka's
``AdminClient`` and kafka-python's ``KafkaAdminClient`` create and delete topics, add partitions, list
topics, and describe, alter and incrementally alter topic configs; every outcome is checked in
ZooKeeper (topic znode, partitions, ``/config/topics/<t>``). Each client bootstraps from a broker that
is not the controller, so the controller-only requests must be routed by the Metadata answer."""

from __future__ import annotations

import pytest

from kafka_controller.cluster.local import LocalCluster
from tests.integration.conftest import ClusterFactory
from tests.integration.helpers import TIMEOUT, wait_healthy

pytestmark = [pytest.mark.integration, pytest.mark.zk, pytest.mark.clients]


@pytest.fixture(scope="module")
def cluster(make_cluster: ClusterFactory) -> LocalCluster:
    c = make_cluster(3, broker_config={"auto.leader.rebalance.enable": "false"})
    wait_healthy(c)
    return c


def bootstrap(cluster: LocalCluster) -> str:
    controller, _ = cluster.controller()
    other = next(b for b in cluster.running_broker_ids() if b != controller)
    return cluster.listener(other)


def zk_partitions(cluster: LocalCluster, topic: str) -> dict[int, tuple[int, ...]]:
    read = cluster.store.get_replica_assignment_and_topic_ids([topic]).get(topic)
    if read is None or isinstance(read, Exception):
        return {}
    return {tp.partition: ra.replicas for tp, ra in read.assignment.items()}


def wait_gone(cluster: LocalCluster, topic: str) -> None:
    cluster.waits.wait_until(
        lambda: not cluster.store.topic_exists(topic), TIMEOUT, f"topic {topic} to be deleted"
    )


def test_confluent_admin_client(cluster: LocalCluster) -> None:
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewPartitions,
        NewTopic,
    )

    admin = AdminClient({"bootstrap.servers": bootstrap(cluster)})
    futures = admin.create_topics(
        [NewTopic("cf-orders", 3, 2, config={"retention.ms": "3600000"})],
        operation_timeout=30,
        request_timeout=30,
    )
    futures["cf-orders"].result(timeout=60)
    placed = zk_partitions(cluster, "cf-orders")
    assert sorted(placed) == [0, 1, 2] and all(len(set(rs)) == 2 for rs in placed.values())
    assert cluster.store.get_topic_config("cf-orders") == {"retention.ms": "3600000"}
    assert "cf-orders" in admin.list_topics(timeout=10).topics

    with pytest.raises(KafkaException) as exists:
        admin.create_topics([NewTopic("cf-orders", 1, 1)], operation_timeout=30)["cf-orders"].result(
            timeout=60
        )

    admin.create_partitions([NewPartitions("cf-orders", 5)], operation_timeout=30)["cf-orders"].result(
        timeout=60
    )
    assert sorted(zk_partitions(cluster, "cf-orders")) == [0, 1, 2, 3, 4]
    assert exists.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS
    with pytest.raises(KafkaException) as fewer:
        admin.create_partitions([NewPartitions("cf-orders", 4)])["cf-orders"].result(timeout=60)
    assert fewer.value.args[0].code() == KafkaError.INVALID_PARTITIONS

    resource = ConfigResource("topic", "cf-orders")
    described = admin.describe_configs([resource])[resource].result(timeout=60)
    assert described["retention.ms"].value == "3600000" and not described["retention.ms"].is_default
    assert described["segment.bytes"].value == "1073741824" and described["segment.bytes"].is_default

    admin.alter_configs([ConfigResource("topic", "cf-orders", set_config={"min.insync.replicas": "2"})])[
        resource
    ].result(timeout=60)
    assert cluster.store.get_topic_config("cf-orders") == {"min.insync.replicas": "2"}

    inc = ConfigResource(
        "topic",
        "cf-orders",
        incremental_configs=[
            ConfigEntry("segment.ms", "60000", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("min.insync.replicas", None, incremental_operation=AlterConfigOpType.DELETE),
        ],
    )
    admin.incremental_alter_configs([inc])[inc].result(timeout=60)
    assert cluster.store.get_topic_config("cf-orders") == {"segment.ms": "60000"}

    admin.delete_topics(["cf-orders"], operation_timeout=30)["cf-orders"].result(timeout=60)
    wait_gone(cluster, "cf-orders")


def test_kafka_python_admin_client(cluster: LocalCluster) -> None:
    from kafka.admin import (
        AlterConfigOp,
        ConfigResource,
        ConfigResourceType,
        KafkaAdminClient,
        NewPartitions,
        NewTopic,
    )
    from kafka.errors import InvalidPartitionsError, TopicAlreadyExistsError

    admin = KafkaAdminClient(
        bootstrap_servers=bootstrap(cluster), request_timeout_ms=30_000, client_id="kc-admin"
    )
    try:
        admin.create_topics(
            [NewTopic("kp-orders", 2, 3, topic_configs={"cleanup.policy": "compact"})], timeout_ms=30_000
        )
        placed = zk_partitions(cluster, "kp-orders")
        assert sorted(placed) == [0, 1] and all(
            sorted(rs) == sorted(cluster.running_broker_ids()) for rs in placed.values()
        )
        assert cluster.store.get_topic_config("kp-orders") == {"cleanup.policy": "compact"}
        assert "kp-orders" in admin.list_topics()
        with pytest.raises(TopicAlreadyExistsError):
            admin.create_topics([NewTopic("kp-orders", 1, 1)], timeout_ms=30_000)

        admin.create_partitions({"kp-orders": NewPartitions(4)}, timeout_ms=30_000)
        assert sorted(zk_partitions(cluster, "kp-orders")) == [0, 1, 2, 3]
        with pytest.raises(InvalidPartitionsError):
            admin.create_partitions({"kp-orders": NewPartitions(4)}, timeout_ms=30_000)

        described = admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, "kp-orders")], config_filter="all"
        )
        configs = described["topic"]["kp-orders"]
        assert configs["cleanup.policy"]["value"] == "compact", configs["cleanup.policy"]
        assert configs["segment.bytes"]["value"] == "1073741824"
        modified = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "kp-orders")])
        assert set(modified["topic"]["kp-orders"]) == {"cleanup.policy"}  # only what the topic overrides

        admin.alter_configs(
            [ConfigResource(ConfigResourceType.TOPIC, "kp-orders", configs={"retention.ms": "1000"})],
            incremental=False,
            raise_on_unknown=False,
        )
        config = cluster.store.get_topic_config("kp-orders")
        assert config["retention.ms"] == "1000"
        admin.alter_configs(
            [
                ConfigResource(
                    ConfigResourceType.TOPIC,
                    "kp-orders",
                    configs={
                        "retention.ms": (AlterConfigOp.DELETE, None),
                        "segment.ms": (AlterConfigOp.SET, "60000"),
                    },
                )
            ],
            incremental=True,
            raise_on_unknown=False,
        )
        config = cluster.store.get_topic_config("kp-orders")
        assert "retention.ms" not in config and config["segment.ms"] == "60000"

        admin.delete_topics(["kp-orders"], timeout_ms=30_000)
        wait_gone(cluster, "kp-orders")
        assert "kp-orders" not in admin.list_topics()
    finally:
        admin.close()
