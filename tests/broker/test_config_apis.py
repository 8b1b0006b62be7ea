"""DescribeConfigs v0-4, AlterConfigs v0-2 and IncrementalAlterConfigs v0-1 through the broker's Kafka
handler: topic and broker entities, Kafka's sources and synonyms, writes to ``/config/<type>/<name>``
with a ``/config/changes`` notification, and Kafka's error codes."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode as E

from kafka_controller.broker.kafka_wire.log_configs import (
    DEFAULT_CONFIG,
    DYNAMIC_BROKER_CONFIG,
    DYNAMIC_DEFAULT_BROKER_CONFIG,
    STATIC_BROKER_CONFIG,
    TOPIC_CONFIG,
    TOPIC_CONFIG_DEFS,
)
from tests.broker.admin_wire import Env, req_nested

DESCRIBE, ALTER, INCREMENTAL = 32, 33, 44
TOPIC, BROKER = 2, 4


@pytest.fixture
def env() -> Env:
    e = Env(config={"unclean.leader.election.enable": "true"})
    e.store.create_topic("orders", {0: [1, 2]}, {"retention.ms": "1000", "cleanup.policy": "compact"})
    e.sync()
    return e


def describe(
    env: Env, v: int, rtype: int, name: str, keys: tuple[str, ...] | None = None, synonyms: bool = True
):  # type: ignore[no-untyped-def]
    resource = req_nested(
        DESCRIBE,
        v,
        "DescribeConfigsResource",
        resource_type=rtype,
        resource_name=name,
        configuration_keys=keys,
    )
    (r,) = env.call(
        DESCRIBE, v, resources=(resource,), include_synonyms=synonyms, include_documentation=False
    ).results
    return r


@pytest.mark.parametrize("v", range(5))
def test_describe_topic_configs_at_every_version(env: Env, v: int) -> None:
    r = describe(env, v, TOPIC, "orders")
    assert (r.error_code, r.resource_name, r.resource_type) == (E.none, "orders", TOPIC)
    configs = {c.name: c for c in r.configs}
    assert set(configs) == set(TOPIC_CONFIG_DEFS)
    assert configs["retention.ms"].value == "1000" and configs["segment.bytes"].value == "1073741824"
    assert configs["unclean.leader.election.enable"].value == "true"  # the broker's static value
    if v == 0:
        assert not configs["retention.ms"].is_default and configs["segment.bytes"].is_default
        return
    assert configs["retention.ms"].config_source == TOPIC_CONFIG
    assert configs["segment.bytes"].config_source == DEFAULT_CONFIG
    assert configs["unclean.leader.election.enable"].config_source == STATIC_BROKER_CONFIG
    assert [(s.name, s.value, s.source) for s in configs["cleanup.policy"].synonyms] == [
        ("cleanup.policy", "compact", TOPIC_CONFIG),
        ("log.cleanup.policy", "delete", DEFAULT_CONFIG),
    ]
    if v >= 3:
        assert configs["cleanup.policy"].config_type == 7 and configs["retention.ms"].config_type == 5


def test_describe_selects_keys_and_reports_errors(env: Env) -> None:
    r = describe(env, 2, TOPIC, "orders", keys=("retention.ms", "nope"), synonyms=False)
    assert [(c.name, c.value, c.synonyms) for c in r.configs] == [("retention.ms", "1000", ())]
    assert describe(env, 2, TOPIC, "missing").error_code == E.unknown_topic_or_partition
    assert describe(env, 2, TOPIC, "bad/name").error_code == E.invalid_topic_exception
    other = describe(env, 2, BROKER, "2")
    assert other.error_code == E.invalid_request
    assert other.error_message == "Unexpected broker id, expected 1 or empty string, but received 2"
    assert describe(env, 2, BROKER, "x").error_code == E.invalid_request
    assert describe(env, 2, 8, "1").error_code == E.invalid_request


def test_describe_broker_levels(env: Env) -> None:
    env.store.set_or_create_entity_config("brokers", "<default>", {"auto.leader.rebalance.enable": "false"})
    env.store.set_or_create_entity_config("brokers", "1", {"leader.replication.throttled.rate": "100"})
    own = {c.name: c for c in describe(env, 4, BROKER, "1").configs}
    assert (own["auto.leader.rebalance.enable"].value, own["auto.leader.rebalance.enable"].config_source) == (
        "false",
        DYNAMIC_DEFAULT_BROKER_CONFIG,
    )
    assert own["leader.replication.throttled.rate"].config_source == DYNAMIC_BROKER_CONFIG
    assert own["unclean.leader.election.enable"].config_source == STATIC_BROKER_CONFIG
    assert own["delete.topic.enable"].value == "true" and own["delete.topic.enable"].read_only
    assert not own["unclean.leader.election.enable"].read_only
    default = describe(env, 4, BROKER, "").configs
    assert [(c.name, c.value, c.config_source) for c in default] == [
        ("auto.leader.rebalance.enable", "false", DYNAMIC_DEFAULT_BROKER_CONFIG)
    ]


def alter(
    env: Env, v: int, rtype: int, name: str, configs: dict[str, str | None], validate_only: bool = False
):  # type: ignore[no-untyped-def]
    entries = tuple(req_nested(ALTER, v, "AlterableConfig", name=k, value=x) for k, x in configs.items())
    resource = req_nested(
        ALTER, v, "AlterConfigsResource", resource_type=rtype, resource_name=name, configs=entries
    )
    (r,) = env.call(ALTER, v, resources=(resource,), validate_only=validate_only).responses
    return r


def notifications(env: Env) -> list[str | None]:
    names = env.store.watch_children("/config/changes", lambda _e: None)
    return [
        p for p in env.store.get_config_change_entity_paths(sorted(names)) if isinstance(p, str) or p is None
    ]


@pytest.mark.parametrize("v", range(3))
def test_alter_configs_replaces_the_entity_config(env: Env, v: int) -> None:
    before = len(notifications(env))
    r = alter(env, v, TOPIC, "orders", {"min.insync.replicas": "2"})
    assert (r.error_code, r.resource_name) == (E.none, "orders")
    assert env.store.get_topic_config("orders") == {"min.insync.replicas": "2"}
    assert notifications(env)[before:] == ["topics/orders"]
    assert alter(env, v, BROKER, "", {"unclean.leader.election.enable": "true"}).error_code == E.none
    assert env.store.get_entity_configs([("brokers", "<default>")])[("brokers", "<default>")] == {
        "unclean.leader.election.enable": "true"
    }
    assert notifications(env)[-1] == "brokers/<default>"


def test_alter_configs_errors_write_nothing(env: Env) -> None:
    cases = [
        (TOPIC, "orders", {"retention.mss": "1"}, E.invalid_config),
        (TOPIC, "orders", {"retention.ms": "soon"}, E.invalid_request),
        (TOPIC, "orders", {"retention.ms": None}, E.invalid_request),
        (TOPIC, "missing", {"retention.ms": "1"}, E.unknown_topic_or_partition),
        (BROKER, "1", {"delete.topic.enable": "false"}, E.invalid_request),
        (BROKER, "1", {"unclean.leader.election.enable": "maybe"}, E.invalid_request),
        (BROKER, "2", {"unclean.leader.election.enable": "true"}, E.invalid_request),
        (1, "x", {"a": "b"}, E.invalid_request),
    ]
    for rtype, name, configs, code in cases:
        assert alter(env, 1, rtype, name, configs).error_code == code, (rtype, name, configs)
    assert alter(env, 1, TOPIC, "orders", {"retention.ms": "5"}, validate_only=True).error_code == E.none
    assert env.store.get_topic_config("orders") == {"retention.ms": "1000", "cleanup.policy": "compact"}
    r = alter(env, 1, BROKER, "1", {"delete.topic.enable": "false"})
    assert "Cannot update these configs dynamically" in (r.error_message or "")
    assert env.store.get_entity_configs([("brokers", "1")])[("brokers", "1")] == {}


def incremental(
    env: Env,
    v: int,
    rtype: int,
    name: str,
    ops: list[tuple[str, int, str | None]],
    validate_only: bool = False,
):  # type: ignore[no-untyped-def]
    entries = tuple(
        req_nested(INCREMENTAL, v, "AlterableConfig", name=k, config_operation=op, value=x)
        for k, op, x in ops
    )
    resource = req_nested(
        INCREMENTAL, v, "AlterConfigsResource", resource_type=rtype, resource_name=name, configs=entries
    )
    (r,) = env.call(INCREMENTAL, v, resources=(resource,), validate_only=validate_only).responses
    return r


@pytest.mark.parametrize("v", range(2))
def test_incremental_alter_configs_set_delete_append_subtract(env: Env, v: int) -> None:
    r = incremental(
        env,
        v,
        TOPIC,
        "orders",
        [("retention.ms", 1, None), ("segment.ms", 0, "60000"), ("cleanup.policy", 2, "delete")],
    )
    assert r.error_code == E.none
    assert env.store.get_topic_config("orders") == {"segment.ms": "60000", "cleanup.policy": "compact,delete"}
    assert incremental(env, v, TOPIC, "orders", [("cleanup.policy", 3, "compact")]).error_code == E.none
    assert env.store.get_topic_config("orders")["cleanup.policy"] == "delete"
    assert incremental(env, v, TOPIC, "orders", [("segment.ms", 2, "1")]).error_code == E.invalid_request
    assert (
        incremental(env, v, TOPIC, "orders", [("a", 0, "1"), ("a", 1, None)]).error_code == E.invalid_request
    )
    assert incremental(env, v, TOPIC, "orders", [("nope.ms", 2, "1")]).error_code == E.invalid_config
    r = incremental(env, v, BROKER, "1", [("leader.replication.throttled.rate", 0, "1000")])
    assert r.error_code == E.none
    assert env.store.get_entity_configs([("brokers", "1")])[("brokers", "1")] == {
        "leader.replication.throttled.rate": "1000"
    }
    assert notifications(env)[-1] == "brokers/1"
