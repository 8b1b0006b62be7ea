"""ACLs for SASL principals: ``User:<name>`` from SCRAM and PLAIN, decided by the authorizer."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from kafka_controller.broker.server import BrokerServer
from kafka_controller.dryrun.memory_store import InMemoryMetadataStore
from kafka_controller.dryrun.memory_zk import InMemoryZooKeeper
from kafka_controller.security.scram import SCRAM_SHA_512
from tests.broker.helpers import wait_until
from tests.security.test_sasl import (
    ALICE_PASSWORD,
    BROKER_PASSWORD,
    PLAIN_PASSWORD,
    add_user,
    sasl_settings,
)

pytestmark = [pytest.mark.clients]


def _code(future: Any) -> int:
    try:
        future.result(timeout=30)
    except KafkaException as e:
        return int(e.args[0].code())
    return 0


def test_scram_and_plain_principals_are_authorized_by_their_acls(
    start_broker: Callable[..., BrokerServer],
) -> None:
    tree = InMemoryZooKeeper()
    store = InMemoryMetadataStore(tree)
    store.create_top_level_paths()
    add_user(store, "broker", BROKER_PASSWORD)
    add_user(store, "alice", ALICE_PASSWORD)
    settings = {
        **sasl_settings({"SASL_PLAINTEXT": "SASL_PLAINTEXT"}, "SASL_PLAINTEXT"),
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:broker",
    }
    server = start_broker(1, settings, tree)
    wait_until(lambda: server.controller.is_active, "broker 1 to become controller")

    def client(mechanism: str, user: str, password: str) -> AdminClient:
        return AdminClient(
            {
                "bootstrap.servers": f"127.0.0.1:{server.transport.ports['SASL_PLAINTEXT']}",
                "security.protocol": "sasl_plaintext",
                "sasl.mechanism": mechanism,
                "sasl.username": user,
                "sasl.password": password,
            }
        )

    admin = client(SCRAM_SHA_512, "broker", BROKER_PASSWORD)
    alice = client(SCRAM_SHA_512, "alice", ALICE_PASSWORD)
    carol = client("PLAIN", "carol", PLAIN_PASSWORD)
    for who in (alice, carol):
        (future,) = who.create_topics([NewTopic("sasl-acl", 1, 1)]).values()
        assert _code(future) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert "sasl-acl" not in store.get_all_topics()
    grant = AclBinding(
        ResourceType.TOPIC,
        "sasl-",
        ResourcePatternType.PREFIXED,
        "User:alice",
        "*",
        AclOperation.CREATE,
        AclPermissionType.ALLOW,
    )
    for future in admin.create_acls([grant]).values():
        future.result(timeout=30)
    (future,) = carol.create_topics([NewTopic("sasl-acl", 1, 1)]).values()
    assert _code(future) == KafkaError.TOPIC_AUTHORIZATION_FAILED  # the ACL names alice only
    (future,) = alice.create_topics([NewTopic("sasl-acl", 1, 1)]).values()
    assert _code(future) == 0
    assert "sasl-acl" in store.get_all_topics()
