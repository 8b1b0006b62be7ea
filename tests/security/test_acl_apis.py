"""CreateAcls / DescribeAcls / DeleteAcls through ``KafkaProtocolHandler`` (kio-encoded frames), with
and without an authorizer: Kafka's versions in ApiVersions, SECURITY_DISABLED when off, Kafka's
validation of creations, and what lands in ZooKeeper."""

from __future__ import annotations

from typing import Any

import orjson
from kio.serial import entity_reader

from kafka_controller.broker.authorization import BrokerAuthorization
from kafka_controller.broker.config import BrokerConfig
from kafka_controller.broker.kafka_wire.admin_apis import admin_apis
from kafka_controller.broker.kafka_wire.handler import KafkaProtocolHandler
from kafka_controller.broker.kafka_wire.header import decode_response_header
from kafka_controller.broker.kafka_wire.kio_api import response_schema
from kafka_controller.broker.kafka_wire.primitives import Reader
from kafka_controller.broker.metadata_cache import MetadataCache
from kafka_controller.dryrun.memory_store import InMemoryMetadataStore
from tests.broker.admin_wire import payload, req_nested

ON = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "super.users": "User:ANONYMOUS"}


class Broker:
    def __init__(self, settings: dict[str, str]) -> None:
        from types import SimpleNamespace

        from kafka_controller.domain.requests import UpdateMetadataRequest
        from kafka_controller.domain.values import Broker as Registered
        from kafka_controller.domain.values import EndPoint

        self.store = InMemoryMetadataStore()
        cache = MetadataCache(1)
        me = Registered(1, (EndPoint("127.0.0.1", 9092),))
        self.store.register_broker(me)
        cache.update_metadata(UpdateMetadataRequest(7, 1, 1, 1, (), (me,), {}))
        self.authorization = BrokerAuthorization(
            settings,
            self.store,
            cache,
            lambda: True,
            private_listeners=frozenset({"PLAINTEXT"}),
            listener_count=1,
        )
        self.tasks: list[Any] = []
        self.authorization.start(self.tasks.append)
        server = SimpleNamespace(
            store=self.store,
            metadata_cache=cache,
            controller=SimpleNamespace(is_active=True),
            config=BrokerConfig.of(1, {}),
        )
        apis = self.authorization.kafka_apis(admin_apis(server))  # type: ignore[arg-type]
        self.handler = KafkaProtocolHandler(cache, lambda: "c", apis, None, self.authorization.requests)

    def call(self, key: int, version: int, **fields: Any) -> Any:
        answer = self.handler.handle(bytearray(payload(self.handler, key, version, **fields)))
        assert answer is not None
        reader = Reader(answer)
        assert decode_response_header(reader, key, version, self.handler.table) == 11
        return entity_reader(response_schema(key, version))(reader.data, reader.pos)[0]


def creation(**fields: Any) -> Any:
    base = {
        "resource_type": 2,
        "resource_name": "orders",
        "resource_pattern_type": 3,
        "principal": "User:alice",
        "host": "*",
        "operation": 3,
        "permission_type": 3,
    }
    return req_nested(30, 2, "AclCreation", **{**base, **fields})


def test_versions_are_kafkas_and_without_an_authorizer_the_acl_apis_are_security_disabled() -> None:
    broker = Broker({})
    versions = broker.call(18, 3, client_software_name="t", client_software_version="1")
    ranges = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in versions.api_keys}
    assert ranges[29] == ranges[30] == ranges[31] == (0, 2)
    created = broker.call(30, 2, creations=(creation(),))
    assert [int(r.error_code) for r in created.results] == [54]
    described = broker.call(
        29,
        1,
        resource_type_filter=1,
        resource_name_filter=None,
        pattern_type_filter=1,
        principal_filter=None,
        host_filter=None,
        operation=1,
        permission_type=1,
    )
    assert int(described.error_code) == 54
    assert not broker.store.path_exists("/kafka-acl/Topic/orders")


def test_creations_are_validated_as_kafka_does_and_written_in_kafkas_format() -> None:
    broker = Broker(ON)
    bad = [
        creation(resource_type=4, resource_name="other"),  # CLUSTER must be kafka-cluster
        creation(resource_name=""),
        creation(resource_pattern_type=1),  # ANY is a filter's, not an ACL's
        creation(operation=1),
        creation(permission_type=1),
        creation(principal="alice"),
    ]
    created = broker.call(
        30, 2, creations=(*bad, creation(), creation(resource_pattern_type=4, resource_name="ord"))
    )
    assert [int(r.error_code) for r in created.results] == [42] * len(bad) + [0, 0]
    assert "kafka-cluster" in created.results[0].error_message
    (code, data, _), (code2, data2, _) = broker.store.read_raw(
        ["/kafka-acl/Topic/orders", "/kafka-acl-extended/prefixed/Topic/ord"]
    )
    assert code == code2 == 0
    assert orjson.loads(data) == {
        "version": 1,
        "acls": [{"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"}],
    }
    assert data2 is not None
    notices = broker.store.read_raw(["/kafka-acl-changes"])
    assert notices[0][0] == 0
    # v0 knows LITERAL only: the pattern field is not on the wire and the ACL is literal
    v0 = broker.call(
        30, 0, creations=(req_nested(30, 0, "AclCreation", **{**_fields(), "resource_name": "v0"}),)
    )
    assert [int(r.error_code) for r in v0.results] == [0]
    assert broker.store.path_exists("/kafka-acl/Topic/v0")
    # DeleteAcls with a MATCH filter finds literal and prefixed ACLs that apply to a name
    deleted = broker.call(
        31,
        2,
        filters=(
            req_nested(
                31,
                2,
                "DeleteAclsFilter",
                resource_type_filter=2,
                resource_name_filter="orders",
                pattern_type_filter=2,
                principal_filter=None,
                host_filter=None,
                operation=1,
                permission_type=1,
            ),
        ),
    )
    (result,) = deleted.filter_results
    assert int(result.error_code) == 0
    assert sorted((m.resource_name, int(m.pattern_type)) for m in result.matching_acls) == [
        ("ord", 4),
        ("orders", 3),
    ]
    assert not broker.store.path_exists("/kafka-acl/Topic/orders")
    assert not broker.store.path_exists("/kafka-acl-extended/prefixed/Topic/ord")
    assert broker.store.path_exists("/kafka-acl/Topic/v0")


def _fields() -> dict[str, Any]:
    return {
        "resource_type": 2,
        "principal": "User:bob",
        "host": "*",
        "operation": 4,
        "permission_type": 3,
    }


def test_without_alter_on_the_cluster_nothing_is_written() -> None:
    broker = Broker({**ON, "super.users": "User:admin"})
    created = broker.call(30, 2, creations=(creation(),))
    assert [int(r.error_code) for r in created.results] == [31]
    assert not broker.store.path_exists("/kafka-acl/Topic/orders")


def test_created_topics_configs_are_hidden_without_describe_configs() -> None:
    from kafka_controller.security.authorizer import (
        AccessControlEntry,
        AclOperation,
        AclPermissionType,
        PatternType,
        ResourcePattern,
        ResourceType,
    )

    broker = Broker({**ON, "super.users": "User:admin"})
    authorizer, store = broker.authorization.authorizer, broker.authorization.acl_store
    assert authorizer is not None and store is not None

    def grant(op: AclOperation) -> None:
        pattern = ResourcePattern(ResourceType.TOPIC, "new-", PatternType.PREFIXED)
        entry = AccessControlEntry("User:ANONYMOUS", "*", op, AclPermissionType.ALLOW)
        authorizer.cache.update(pattern, store.update(pattern, lambda cur: cur | {entry}))

    def create() -> Any:
        topic = req_nested(
            19,
            5,
            "CreatableTopic",
            name="new-1",
            num_partitions=1,
            replication_factor=1,
            assignments=(),
            configs=(),
        )
        (result,) = broker.call(19, 5, topics=(topic,), timeout=_seconds(5), validate_only=True).topics
        return result

    assert int(create().error_code) == 29
    grant(AclOperation.CREATE)
    created = create()
    assert int(created.error_code) == 0 and int(created.topic_config_error_code) == 29 and not created.configs
    grant(AclOperation.DESCRIBE_CONFIGS)
    created = create()
    assert int(created.error_code) == 0 and int(created.topic_config_error_code) == 0 and created.configs


def _seconds(n: int) -> Any:
    import datetime

    return datetime.timedelta(seconds=n)


def test_scram_credential_apis_need_alter_and_describe_on_the_cluster() -> None:
    upsert = req_nested(
        51,
        0,
        "ScramCredentialUpsertion",
        name="bob",
        mechanism=2,
        iterations=8192,
        salt=b"s" * 16,
        salted_password=b"p" * 64,
    )
    stranger = Broker({**ON, "super.users": "User:admin"})  # the caller is User:ANONYMOUS
    assert int(stranger.call(50, 0, users=None).error_code) == 31
    refused = stranger.call(51, 0, deletions=(), upsertions=(upsert,))
    assert [(r.user, int(r.error_code)) for r in refused.results] == [("bob", 31)]
    assert stranger.store.get_entity_config("users", "bob") == {}
    admin = Broker(ON)  # the caller is a super user
    done = admin.call(51, 0, deletions=(), upsertions=(upsert,))
    assert [(r.user, int(r.error_code)) for r in done.results] == [("bob", 0)]
    assert "SCRAM-SHA-512" in admin.store.get_entity_config("users", "bob")
    assert int(admin.call(50, 0, users=None).error_code) == 0
