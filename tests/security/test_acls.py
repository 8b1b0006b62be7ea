"""ACLs end to end on a three-broker cluster with the authorizer on: principals from client
certificates (mTLS, ``User:CN=...``), Kafka's own client (confluent-kafka) for the admin APIs,
Kafka-protocol frames for the APIs it lacks, and private-protocol frames from peers that must be
refused.

Brokers listen on ``SSL`` (client certificates required; the inter-broker listener) and on a
loopback ``PLAINTEXT`` listener (``User:ANONYMOUS``), with ``super.users`` = the brokers and an admin.
"""

from __future__ import annotations

import datetime
import io
import socket
import ssl
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kio.serial import entity_reader, entity_writer

from kafka_controller.broker import apis as A
from kafka_controller.broker.kafka_wire.header import (
    SUPPORTED,
    RequestHeader,
    decode_response_header,
    encode_request_header,
)
from kafka_controller.broker.kafka_wire.kio_api import request_schema, response_schema
from kafka_controller.broker.kafka_wire.kio_build import build, nested
from kafka_controller.broker.kafka_wire.primitives import Reader, Writer
from kafka_controller.broker.server import BrokerServer
from kafka_controller.domain.requests import UpdateMetadataRequest
from kafka_controller.dryrun.memory_store import InMemoryMetadataStore
from kafka_controller.dryrun.memory_zk import InMemoryZooKeeper
from kafka_controller.security import certs
from kafka_controller.security.authorizer import AclOperation as Op
from kafka_controller.security.authorizer import ResourcePattern
from kafka_controller.security.authorizer import ResourceType as RT
from kafka_controller.transport.client import TransportClient
from kafka_controller.transport.errors import RemoteError
from tests.broker.helpers import wait_until

BROKER_PRINCIPAL = "User:CN=broker,O=kafka-controller"
ADMIN = "User:CN=admin,O=org"
ALICE = "User:CN=alice,O=org"
PROPAGATION_S = 1.0  # every broker sees an ACL change within this


@dataclass(frozen=True)
class Client:
    cert: Path
    key: Path


@dataclass
class Cluster:
    tree: InMemoryZooKeeper
    zk: InMemoryMetadataStore
    brokers: dict[int, BrokerServer]
    ca: Path
    admin: Client
    alice: Client

    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{b.transport.ports['SSL']}" for b in self.brokers.values())

    def client(self, who: Client) -> AdminClient:
        return AdminClient(
            {
                "bootstrap.servers": self.bootstrap(),
                "security.protocol": "ssl",
                "ssl.ca.location": str(self.ca),
                "ssl.certificate.location": str(who.cert),
                "ssl.key.location": str(who.key),
                "socket.timeout.ms": 10000,
            }
        )

    def context(self, who: Client) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.ca))
        context.load_cert_chain(who.cert, who.key)
        return context

    def controller(self) -> BrokerServer:
        cid = self.zk.get_controller_id()
        assert cid is not None
        return self.brokers[cid]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    directory = tmp_path_factory.mktemp("acl-pki")
    ca = certs.make_ca("acl test CA")
    password = certs.new_password()
    keystore = certs.write_keystore(
        directory / "broker.pem", certs.issue(ca, "broker", organization="kafka-controller"), ca, password
    )
    truststore = certs.write_truststore(directory / "ca.pem", ca)
    admin = Client(
        *certs.write_client_files(directory, "admin", certs.issue(ca, "admin", organization="org"))
    )
    alice = Client(
        *certs.write_client_files(directory, "alice", certs.issue(ca, "alice", organization="org"))
    )
    settings = {
        "auto.leader.rebalance.enable": "false",
        "sim.fetch.interval.ms": "50",
        "listeners": "SSL://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
        "inter.broker.listener.name": "SSL",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(keystore),
        "ssl.key.password": password,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(truststore),
        "ssl.client.auth": "required",
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": f"{BROKER_PRINCIPAL};{ADMIN}",
        "controlled.shutdown.enable": "false",
        "auto.create.topics.enable": "true",
    }
    from kafka_controller.broker.config import BrokerConfig

    tree = InMemoryZooKeeper()
    brokers: dict[int, BrokerServer] = {}
    try:
        for b in (1, 2, 3):
            brokers[b] = BrokerServer(BrokerConfig.of(b, settings), InMemoryMetadataStore(tree)).startup()
        zk = InMemoryMetadataStore(tree)
        wait_until(
            lambda: zk.get_controller_id() is not None and len(zk.get_sorted_broker_list()) == 3,
            "a controller and three registered brokers",
        )
        yield Cluster(tree, zk, brokers, truststore, admin, alice)
        zk.close()
    finally:
        for server in brokers.values():
            server.crash()


def code_of(future: Any) -> int:
    """The Kafka error code a confluent-kafka future fails with (0 when it succeeds)."""
    try:
        future.result(timeout=30)
    except KafkaException as e:
        return int(e.args[0].code())
    return 0


def one(futures: dict[Any, Any]) -> Any:
    (future,) = futures.values()
    return future


def grant(c: Cluster, *bindings: AclBinding) -> None:
    """Create ACLs as the admin (a super user) and wait until every broker's cache has them."""
    admin = c.client(c.admin)  # kept referenced until the futures are done
    for f in admin.create_acls(list(bindings)).values():
        f.result(timeout=30)
    wanted = {(b.restype, b.name, b.principal, b.operation) for b in bindings}

    def everywhere() -> bool:
        for broker in c.brokers.values():
            authz = broker.authorization.authorizer
            assert authz is not None
            have = {
                (b.pattern.resource_type, b.pattern.name, b.entry.principal, b.entry.operation)
                for b in authz.cache.bindings()
            }
            if not all((int(rt.value), n, p, int(op.value)) in have for rt, n, p, op in wanted):
                return False
        return True

    wait_until(everywhere, f"every broker to have {bindings}", timeout=PROPAGATION_S)


def allow(
    restype: ResourceType,
    name: str,
    op: AclOperation,
    principal: str = ALICE,
    pattern: ResourcePatternType = ResourcePatternType.LITERAL,
) -> AclBinding:
    return AclBinding(restype, name, pattern, principal, "*", op, AclPermissionType.ALLOW)


def _partitions(c: Cluster, topic: str) -> int:
    read = c.zk.get_replica_assignment_and_topic_ids([topic])[topic]
    assert not isinstance(read, Exception)
    return len(read.assignment)


def topics_in_zk(c: Cluster) -> set[str]:
    return set(c.zk.get_all_topics())


# -- the matrix --------------------------------------------------------------------------------------
def test_create_topics_needs_create(cluster: Cluster) -> None:
    alice = cluster.client(cluster.alice)
    assert (
        code_of(one(alice.create_topics([NewTopic("acl-t1", 2, 2)]))) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    )
    assert "acl-t1" not in topics_in_zk(cluster)
    grant(
        cluster, allow(ResourceType.TOPIC, "acl-", AclOperation.CREATE, pattern=ResourcePatternType.PREFIXED)
    )
    assert code_of(one(alice.create_topics([NewTopic("acl-t1", 2, 2)]))) == 0
    assert "acl-t1" in topics_in_zk(cluster)
    # outside the prefix: still refused, and the two are answered apart in one request
    results = alice.create_topics([NewTopic("other-t", 1, 1), NewTopic("acl-t2", 1, 1)])
    assert code_of(results["other-t"]) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert code_of(results["acl-t2"]) == 0
    assert "other-t" not in topics_in_zk(cluster)


def test_create_partitions_needs_alter(cluster: Cluster) -> None:
    admin, alice = cluster.client(cluster.admin), cluster.client(cluster.alice)
    assert code_of(one(admin.create_topics([NewTopic("parts", 1, 1)]))) == 0
    assert (
        code_of(one(alice.create_partitions([NewPartitions("parts", 3)])))
        == KafkaError.TOPIC_AUTHORIZATION_FAILED
    )
    assert _partitions(cluster, "parts") == 1
    grant(cluster, allow(ResourceType.TOPIC, "parts", AclOperation.ALTER))
    assert code_of(one(alice.create_partitions([NewPartitions("parts", 3)]))) == 0
    assert _partitions(cluster, "parts") == 3


def test_configs_need_alter_configs_and_describe_configs(cluster: Cluster) -> None:
    admin, alice = cluster.client(cluster.admin), cluster.client(cluster.alice)
    assert code_of(one(admin.create_topics([NewTopic("conf", 1, 1)]))) == 0
    resource = ConfigResource(ConfigResource.Type.TOPIC, "conf", set_config={"retention.ms": "1"})
    assert code_of(one(alice.alter_configs([resource]))) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    incremental = ConfigResource(
        ConfigResource.Type.TOPIC,
        "conf",
        incremental_configs=[ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.SET)],
    )
    assert (
        code_of(one(alice.incremental_alter_configs([incremental]))) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    )
    assert code_of(one(alice.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "conf")]))) == (
        KafkaError.TOPIC_AUTHORIZATION_FAILED
    )
    broker = ConfigResource(ConfigResource.Type.BROKER, "1")
    assert code_of(one(alice.describe_configs([broker]))) == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    assert "retention.ms" not in cluster.zk.get_entity_config("topics", "conf")
    grant(cluster, allow(ResourceType.TOPIC, "conf", AclOperation.ALTER_CONFIGS))
    assert code_of(one(alice.alter_configs([resource]))) == 0
    assert cluster.zk.get_entity_config("topics", "conf")["retention.ms"] == "1"
    incremental = ConfigResource(
        ConfigResource.Type.TOPIC,
        "conf",
        incremental_configs=[ConfigEntry("retention.ms", "2", incremental_operation=AlterConfigOpType.SET)],
    )
    assert code_of(one(alice.incremental_alter_configs([incremental]))) == 0
    assert cluster.zk.get_entity_config("topics", "conf")["retention.ms"] == "2"
    # ALTER_CONFIGS implies DESCRIBE_CONFIGS
    assert code_of(one(alice.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "conf")]))) == 0


def test_delete_topics_needs_delete(cluster: Cluster) -> None:
    admin, alice = cluster.client(cluster.admin), cluster.client(cluster.alice)
    assert code_of(one(admin.create_topics([NewTopic("doomed", 1, 1)]))) == 0
    assert code_of(one(alice.delete_topics(["doomed"]))) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert "doomed" in topics_in_zk(cluster) and not cluster.zk.get_topic_deletions()
    grant(cluster, allow(ResourceType.TOPIC, "doomed", AclOperation.DELETE))
    assert code_of(one(alice.delete_topics(["doomed"]))) == 0
    wait_until(lambda: "doomed" not in topics_in_zk(cluster), "the topic deleted")


def test_metadata_hides_what_alice_may_not_describe(cluster: Cluster) -> None:
    admin, alice = cluster.client(cluster.admin), cluster.client(cluster.alice)
    created = admin.create_topics([NewTopic("secret", 1, 1), NewTopic("visible", 1, 1)])
    assert [code_of(f) for f in created.values()] == [0, 0]
    assert {"secret", "visible"} <= set(admin.list_topics(timeout=20).topics)
    assert not {"secret", "visible"} & set(alice.list_topics(timeout=20).topics)
    named = alice.list_topics("secret", timeout=20).topics["secret"]
    assert named.error is not None and named.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    grant(cluster, allow(ResourceType.TOPIC, "visible", AclOperation.READ))  # READ implies DESCRIBE
    listed = set(alice.list_topics(timeout=20).topics)
    assert "visible" in listed and "secret" not in listed
    # authorized operations, asked for: READ and the DESCRIBE it implies, nothing else
    description = one(alice.describe_topics(_topics(["visible"]), include_authorized_operations=True)).result(
        30
    )
    assert set(description.authorized_operations) == {AclOperation.READ, AclOperation.DESCRIBE}
    # the cluster's: 0 for alice (no DESCRIBE on CLUSTER), every supported one for the admin
    assert not alice.describe_cluster(include_authorized_operations=True).result(30).authorized_operations
    ops = set(admin.describe_cluster(include_authorized_operations=True).result(30).authorized_operations)
    assert {AclOperation.ALTER, AclOperation.DESCRIBE, AclOperation.CLUSTER_ACTION} <= ops


def test_metadata_auto_creation_needs_create(cluster: Cluster) -> None:
    port = cluster.controller().transport.ports["SSL"]

    def ask(name: str) -> int:
        topic = _nested(3, 9, "MetadataRequestTopic", name=name)
        response = _kafka_call(
            port,
            cluster.context(cluster.alice),
            3,
            9,
            topics=(topic,),
            allow_auto_topic_creation=True,
            include_cluster_authorized_operations=False,
            include_topic_authorized_operations=False,
        )
        (answer,) = response.topics
        return int(answer.error_code)

    grant(
        cluster,
        allow(ResourceType.TOPIC, "auto-", AclOperation.DESCRIBE, pattern=ResourcePatternType.PREFIXED),
    )
    assert ask("auto-1") == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert "auto-1" not in topics_in_zk(cluster)
    grant(
        cluster, allow(ResourceType.TOPIC, "auto-", AclOperation.CREATE, pattern=ResourcePatternType.PREFIXED)
    )
    assert ask("auto-1") in (0, KafkaError.LEADER_NOT_AVAILABLE)
    assert "auto-1" in topics_in_zk(cluster)


def _topics(names: list[str]) -> Any:
    from confluent_kafka import TopicCollection

    return TopicCollection(names)


def test_acl_apis_need_alter_and_describe_on_the_cluster(cluster: Cluster) -> None:
    alice = cluster.client(cluster.alice)
    binding = allow(ResourceType.TOPIC, "x", AclOperation.READ)
    assert code_of(alice.create_acls([binding])[binding]) == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    any_acl = AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY
    )
    # DescribeAcls: librdkafka's future does not surface a top-level error, so the frame is checked
    port = cluster.controller().transport.ports["SSL"]
    describe = {
        "resource_type_filter": 1,
        "resource_name_filter": None,
        "pattern_type_filter": 1,
        "principal_filter": None,
        "host_filter": None,
        "operation": 1,
        "permission_type": 1,
    }
    refused = _kafka_call(port, cluster.context(cluster.alice), 29, 1, **describe)
    assert int(refused.error_code) == KafkaError.CLUSTER_AUTHORIZATION_FAILED and not refused.resources
    listed = _kafka_call(port, cluster.context(cluster.admin), 29, 2, **describe)
    assert int(listed.error_code) == 0 and any(r.resource_name == "acl-" for r in listed.resources)
    admin = cluster.client(cluster.admin)
    assert any(b.name == "acl-" and b.principal == ALICE for b in admin.describe_acls(any_acl).result(30))
    assert code_of(alice.delete_acls([any_acl])[any_acl]) == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    assert not any(
        b.pattern.name == "x" for b in cluster.controller().authorization.authorizer.cache.bindings()
    )  # type: ignore[union-attr]


def test_elect_leaders_and_reassignments_need_the_cluster(cluster: Cluster) -> None:
    alice = cluster.client(cluster.alice)
    from confluent_kafka import ElectionType, TopicPartition

    future = alice.elect_leaders(ElectionType.PREFERRED, [TopicPartition("acl-t1", 0)])
    assert code_of(future) == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    controller = cluster.controller()
    port = controller.transport.ports["SSL"]
    before = cluster.zk.get_partition_reassignment()
    alter = _kafka_call(
        port,
        cluster.context(cluster.alice),
        45,
        0,
        timeout=_TIMEOUT,
        topics=(
            _nested(
                45,
                0,
                "ReassignableTopic",
                name="parts",
                partitions=(_nested(45, 0, "ReassignablePartition", partition_index=0, replicas=(1, 2, 3)),),
            ),
        ),
    )
    assert int(alter.error_code) == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    assert cluster.zk.get_partition_reassignment() == before
    listing = _kafka_call(port, cluster.context(cluster.alice), 46, 0, timeout=_TIMEOUT, topics=None)
    assert int(listing.error_code) == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    listing = _kafka_call(port, cluster.context(cluster.admin), 46, 0, timeout=_TIMEOUT, topics=None)
    assert int(listing.error_code) == 0


def test_delete_acls_takes_it_away_on_every_broker_within_a_second(cluster: Cluster) -> None:
    admin, alice = cluster.client(cluster.admin), cluster.client(cluster.alice)
    grant(
        cluster,
        allow(ResourceType.TOPIC, "revoked-", AclOperation.CREATE, pattern=ResourcePatternType.PREFIXED),
    )
    assert code_of(one(alice.create_topics([NewTopic("revoked-1", 1, 1)]))) == 0
    flt = AclBindingFilter(
        ResourceType.TOPIC,
        "revoked-",
        ResourcePatternType.PREFIXED,
        ALICE,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    started = time.monotonic()
    deleted = admin.delete_acls([flt])[flt].result(timeout=30)
    assert [(b.name, b.principal, b.operation) for b in deleted] == [("revoked-", ALICE, AclOperation.CREATE)]
    pattern = ResourcePattern(RT.TOPIC, "revoked-", _prefixed())

    def gone_everywhere() -> bool:
        return all(
            pattern not in b.authorization.authorizer.cache.snapshot() for b in cluster.brokers.values()
        )  # type: ignore[union-attr]

    wait_until(gone_everywhere, "the ACL gone from every broker", timeout=PROPAGATION_S)
    assert time.monotonic() - started < 30  # the deletion itself answered
    assert (
        code_of(one(alice.create_topics([NewTopic("revoked-2", 1, 1)])))
        == KafkaError.TOPIC_AUTHORIZATION_FAILED
    )
    assert "revoked-2" not in topics_in_zk(cluster)
    for broker in cluster.brokers.values():  # each broker refuses alice itself
        authz = broker.authorization.authorizer
        assert authz is not None and not authz.authorize(ALICE, "127.0.0.1", Op.CREATE, RT.TOPIC, "revoked-3")


def _prefixed() -> Any:
    from kafka_controller.security.authorizer import PatternType

    return PatternType.PREFIXED


# -- the private protocol -----------------------------------------------------------------------------
def test_an_anonymous_peer_cannot_stop_a_broker_forge_control_requests_or_read_controller_state(
    cluster: Cluster,
) -> None:
    victim = next(b for b in cluster.brokers.values() if b is not cluster.controller())
    plain = victim.transport.ports["PLAINTEXT"]
    live_before = {b.id for b in victim.metadata_cache.alive_brokers()}
    with TransportClient("127.0.0.1", plain, timeout_s=10) as client:
        with pytest.raises(RemoteError, match="CLUSTER_AUTHORIZATION_FAILED"):
            client.request(A.SHUTDOWN_BROKER, A.ShutdownBrokerRequest(None))
        forged = UpdateMetadataRequest(7, victim.broker_id, 2**31 - 1, -1, (), ())
        with pytest.raises(RemoteError, match="CLUSTER_AUTHORIZATION_FAILED"):
            client.request("UpdateMetadata", forged)
        with pytest.raises(RemoteError, match="CLUSTER_AUTHORIZATION_FAILED"):
            client.request(A.DESCRIBE_CONTROLLER_CONTEXT, A.DescribeControllerContextRequest(1000))
    assert not victim.shutdown_requested.is_set()
    assert {b.id for b in victim.metadata_cache.alive_brokers()} == live_before == {1, 2, 3}
    # alice, authenticated on the inter-broker listener, is no broker either
    ssl_port = cluster.controller().transport.ports["SSL"]
    with TransportClient(
        "127.0.0.1", ssl_port, timeout_s=10, ssl_context=cluster.context(cluster.alice)
    ) as client:
        with pytest.raises(RemoteError, match="CLUSTER_AUTHORIZATION_FAILED"):
            client.request(A.DESCRIBE_CONTROLLER_CONTEXT, A.DescribeControllerContextRequest(1000))
        with pytest.raises(RemoteError, match="CLUSTER_AUTHORIZATION_FAILED"):
            client.request(A.SHUTDOWN_BROKER, A.ShutdownBrokerRequest(None))
    # the admin (a super user) reads it; ClusterAction granted to ANONYMOUS still does not open
    # the PLAINTEXT listener, which is not the inter-broker one
    with TransportClient(
        "127.0.0.1", ssl_port, timeout_s=10, ssl_context=cluster.context(cluster.admin)
    ) as client:
        assert (
            client.request(A.DESCRIBE_CONTROLLER_CONTEXT, A.DescribeControllerContextRequest(1000)).error
            == "NONE"
        )
    grant(
        cluster,
        allow(ResourceType.BROKER, "kafka-cluster", AclOperation.CLUSTER_ACTION, principal="User:ANONYMOUS"),
    )
    with (
        TransportClient(
            "127.0.0.1", cluster.controller().transport.ports["PLAINTEXT"], timeout_s=10
        ) as client,
        pytest.raises(RemoteError, match="inter-broker listener"),
    ):
        client.request(A.DESCRIBE_CONTROLLER_CONTEXT, A.DescribeControllerContextRequest(1000))
    assert not victim.shutdown_requested.is_set()


# -- helpers: Kafka-protocol frames over TLS ----------------------------------------------------------
_TABLE = {**SUPPORTED, 29: (0, 2, 2), 45: (0, 0, 0), 46: (0, 0, 0)}


_TIMEOUT = datetime.timedelta(seconds=30)


def _nested(key: int, version: int, entity: str, /, **fields: Any) -> Any:
    return build(nested(request_schema(key, version), entity), **fields)


def _kafka_call(port: int, context: ssl.SSLContext, key: int, version: int, **fields: Any) -> Any:
    w = Writer()
    encode_request_header(w, RequestHeader(key, version, 7, "acl-test"), _TABLE)
    body = io.BytesIO()
    entity_writer(request_schema(key, version))(body, build(request_schema(key, version), **fields))
    payload = w.getvalue() + body.getvalue()
    with (
        socket.create_connection(("127.0.0.1", port), timeout=30) as raw,
        context.wrap_socket(raw, server_hostname="localhost") as sock,
    ):
        sock.sendall(len(payload).to_bytes(4, "big") + payload)
        size = int.from_bytes(_read(sock, 4), "big")
        answer = _read(sock, size)
    reader = Reader(answer)
    assert decode_response_header(reader, key, version, _TABLE) == 7
    response, _ = entity_reader(response_schema(key, version))(reader.data, reader.pos)
    return response


def _read(sock: ssl.SSLSocket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise AssertionError("connection closed")
        out += chunk
    return out
