"""ACLs through a real ZooKeeper: three brokers (each its own session), an ACL made through one
broker's CreateAcls reaches every broker's authorizer within a second, lands in Kafka's znodes, and
DeleteAcls through another broker takes it away everywhere within a second."""

from __future__ import annotations

import time
from collections.abc import Iterator

import orjson
import pytest
from kafka.admin import (
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    KafkaAdminClient,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from kazoo.client import KazooClient

from kafka_controller.broker.config import BrokerConfig
from kafka_controller.broker.server import BrokerServer
from kafka_controller.security.authorizer import AclOperation, PatternType
from kafka_controller.security.authorizer import ResourcePattern as Pattern
from kafka_controller.security.authorizer import ResourceType as RT
from tests.broker.helpers import wait_until

PROPAGATION_S = 1.0
SETTINGS = {
    "auto.leader.rebalance.enable": "false",
    "sim.fetch.interval.ms": "100",
    "listeners": "PLAINTEXT://127.0.0.1:0",
    "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
    "super.users": "User:ANONYMOUS",  # these clients connect over PLAINTEXT
    "controlled.shutdown.enable": "false",
}


@pytest.fixture
def brokers(zk_connect: str) -> Iterator[dict[int, BrokerServer]]:
    started: dict[int, BrokerServer] = {}
    try:
        for b in (1, 2, 3):
            started[b] = BrokerServer(BrokerConfig.of(b, SETTINGS), zk_connect).startup()
        yield started
    finally:
        for server in started.values():
            server.crash()


def admin_of(broker: BrokerServer) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{broker.port}", request_timeout_ms=20000)


def everywhere(brokers: dict[int, BrokerServer], pattern: Pattern, present: bool) -> bool:
    for b in brokers.values():
        authz = b.authorization.authorizer
        assert authz is not None
        if (pattern in authz.cache.snapshot()) != present:
            return False
    return True


def test_acls_reach_every_broker_through_zookeeper_within_a_second(
    brokers: dict[int, BrokerServer], zk_connect: str, zk_admin_client: KazooClient
) -> None:
    chroot = zk_connect[zk_connect.index("/") :]
    resource = ResourcePattern(ResourceType.TOPIC, "orders", ACLResourcePatternType.PREFIXED)
    acl = ACL("User:alice", "*", ACLOperation.READ, ACLPermissionType.ALLOW, resource)
    pattern = Pattern(RT.TOPIC, "orders", PatternType.PREFIXED)
    first = admin_of(brokers[1])
    try:
        started = time.monotonic()
        assert first.create_acls([acl])["failed"] == []
        wait_until(lambda: everywhere(brokers, pattern, True), "every broker to see the ACL", PROPAGATION_S)
        added_s = time.monotonic() - started
    finally:
        first.close()
    data, _ = zk_admin_client.get(f"{chroot}/kafka-acl-extended/prefixed/Topic/orders")
    assert orjson.loads(data) == {
        "version": 1,
        "acls": [{"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"}],
    }
    notices = zk_admin_client.get_children(f"{chroot}/kafka-acl-extended-changes")
    assert notices and all(n.startswith("acl_changes_") for n in notices)
    for b in brokers.values():  # the decision itself, on each broker
        authz = b.authorization.authorizer
        assert authz is not None and authz.authorize(
            "User:alice", "10.1.1.1", AclOperation.DESCRIBE, RT.TOPIC, "orders-1"
        )

    second = admin_of(brokers[2])
    try:
        flt = ACLFilter(
            "User:alice",
            None,
            ACLOperation.ANY,
            ACLPermissionType.ANY,
            ResourcePatternFilter(ResourceType.TOPIC, "orders", ACLResourcePatternType.PREFIXED),
        )
        started = time.monotonic()
        ((_, matching, _),) = second.delete_acls([flt])
        assert [m.principal for m in matching] == ["User:alice"]
        wait_until(lambda: everywhere(brokers, pattern, False), "every broker to drop the ACL", PROPAGATION_S)
        removed_s = time.monotonic() - started
    finally:
        second.close()
    assert not zk_admin_client.exists(f"{chroot}/kafka-acl-extended/prefixed/Topic/orders")
    print(f"ACL propagation through ZooKeeper: add {added_s * 1000:.0f} ms, delete {removed_s * 1000:.0f} ms")
