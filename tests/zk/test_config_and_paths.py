"""Connect strings, chroots, ACL choice, TLS pass-through, topic-name validation."""

from __future__ import annotations

from typing import Any

import pytest

from kafka_controller.domain.errors import InvalidArgumentError, StoreUnavailableError
from kafka_controller.domain.values import TopicPartition
from kafka_controller.zk import paths as P
from kafka_controller.zk.security import (
    CREATOR_ALL_ACL,
    OPEN_ACL_UNSAFE,
    READ_ACL_UNSAFE,
    ZK_DIGEST_ENV,
    ZkClientConfig,
    digest_from_env,
)


def test_split_chroot() -> None:
    assert P.split_chroot("h1:2181,h2:2181/kafka/prod") == ("h1:2181,h2:2181", "/kafka/prod")
    assert P.split_chroot("h1:2181") == ("h1:2181", "")
    assert P.split_chroot("h1:2181/") == ("h1:2181", "")
    for bad in ("", "   ", "/only/chroot", "h:1/a//b", "h:1/a/../b"):
        with pytest.raises(InvalidArgumentError):
            P.split_chroot(bad)


def test_paths_are_kafkas() -> None:
    tp = TopicPartition("orders", 3)
    assert P.topic_partition_state_path(tp) == "/brokers/topics/orders/partitions/3/state"
    assert P.isr_change_notification_path("0000000007") == "/isr_change_notification/isr_change_0000000007"
    assert P.sequence_number("log_dir_event_0000000001", P.LOG_DIR_EVENT_NOTIFICATION_PREFIX) == "0000000001"
    assert P.ancestors("/a/b/c") == ["/a", "/a/b"]
    assert "/config/topics" in P.TOP_LEVEL_PATHS and "/brokers/seqid" in P.TOP_LEVEL_PATHS


@pytest.mark.parametrize("name", ["", ".", "..", "a" * 250, "bad name", "ü"])
def test_topic_names_rejected(name: str) -> None:
    with pytest.raises(InvalidArgumentError):
        P.validate_topic_name(name)


def test_acls_follow_kafka_set_acl() -> None:
    open_cfg = ZkClientConfig("h:1")
    assert open_cfg.acl_triples("/brokers/ids/1") == OPEN_ACL_UNSAFE
    secure = ZkClientConfig("h:1", digest=("kafka", "secret"))
    assert secure.acl_enabled
    assert secure.acl_triples("/brokers/ids/1") == CREATOR_ALL_ACL + READ_ACL_UNSAFE
    assert secure.acl_triples("/config/users/alice") == CREATOR_ALL_ACL  # sensitive: no world read
    assert secure.auth_data() == [("digest", "kafka:secret")]
    assert not ZkClientConfig("h:1", digest=("kafka", "secret"), set_acl=False).acl_enabled


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"connect_string": ""}, "empty"),
        ({"connect_string": "h:1", "digest": ("a:b", "p")}, "digest user"),
        ({"connect_string": "h:1", "digest": ("a", "")}, "password"),
        ({"connect_string": "h:1", "set_acl": True}, "zookeeper.set.acl needs an authenticated"),
        ({"connect_string": "h:1", "certfile": "c.pem"}, "together"),
        ({"connect_string": "h:1", "ca": "ca.pem"}, "use_ssl"),
        ({"connect_string": "h:1", "session_timeout_ms": 10}, "session timeout"),
        ({"connect_string": "h:1", "read_chunk": 0}, "read_chunk"),
    ],
)
def test_bad_config_is_one_clear_error(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidArgumentError, match=message) as info:
        ZkClientConfig(**kwargs)
    assert "\n" not in str(info.value)


class FakeKazooClient:
    """Records what the adapter passes to ``KazooClient``; never connects."""

    created: list[dict[str, Any]] = []

    def __init__(self, **kwargs: Any) -> None:
        FakeKazooClient.created.append(kwargs)

    def add_listener(self, listener: Any) -> None:
        pass

    def start(self, timeout: float) -> None:
        raise TimeoutError("no server in this test")


def test_tls_and_auth_options_reach_kazoo() -> None:
    from kafka_controller.zk.kazoo_backend import KazooBackend

    FakeKazooClient.created.clear()
    cfg = ZkClientConfig(
        "zk1:2182/kafka",
        use_ssl=True,
        certfile="/etc/c.pem",
        keyfile="/etc/k.pem",
        keyfile_password="pw",
        ca="/etc/ca.pem",
        verify_certs=False,
        digest=("kafka", "secret"),
        create_paths=False,
        session_timeout_ms=6000,
    )
    with pytest.raises(StoreUnavailableError, match="zk1:2182"):
        KazooBackend(cfg, client_factory=FakeKazooClient)
    (kwargs,) = FakeKazooClient.created
    assert kwargs["hosts"] == "zk1:2182/kafka" and kwargs["timeout"] == 6.0
    assert kwargs["use_ssl"] is True and kwargs["verify_certs"] is False
    assert (kwargs["certfile"], kwargs["keyfile"], kwargs["keyfile_password"], kwargs["ca"]) == (
        "/etc/c.pem",
        "/etc/k.pem",
        "pw",
        "/etc/ca.pem",
    )
    assert kwargs["auth_data"] == [("digest", "kafka:secret")]


def test_chroot_is_created_with_a_root_client_first() -> None:
    from kafka_controller.zk.kazoo_backend import KazooBackend

    FakeKazooClient.created.clear()
    with pytest.raises(StoreUnavailableError):
        KazooBackend(ZkClientConfig("zk1:2181/a/b"), client_factory=FakeKazooClient)
    assert FakeKazooClient.created[0]["hosts"] == "zk1:2181"  # the root client, without chroot


@pytest.mark.parametrize(
    "value, expected",
    [("", None), ("kafka:s3cret", ("kafka", "s3cret")), ("kafka:with:colons", ("kafka", "with:colons"))],
)
def test_digest_credentials_come_from_the_environment(value: str, expected: object) -> None:
    assert digest_from_env({ZK_DIGEST_ENV: value}) == expected
    assert digest_from_env({}) is None


@pytest.mark.parametrize("value", ["kafka", ":s3cret", "kafka:"])
def test_malformed_digest_credentials_are_one_line_without_the_secret(value: str) -> None:
    with pytest.raises(InvalidArgumentError, match=r"KAFKA_CONTROLLER_ZK_DIGEST must be USER:PASSWORD") as e:
        digest_from_env({ZK_DIGEST_ENV: value})
    assert "s3cret" not in str(e.value)


def test_secrets_stay_out_of_the_configs_repr() -> None:
    config = ZkClientConfig("h:2181", digest=("kafka", "s3cret"), use_ssl=True, keyfile_password="k3y")
    assert "s3cret" not in repr(config) and "k3y" not in repr(config)
