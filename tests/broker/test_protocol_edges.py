"""Kafka 2.8.2's behaviour at the edges of its protocol, through the broker's Kafka handler: what a
handler failure answers, CreateTopics' reset fields, the topic-creation defaults, auto-creation by
Metadata, an illegal topic name, SUBTRACT on an unset list config."""

from __future__ import annotations

import datetime
import uuid
from types import SimpleNamespace
from typing import Any

import pytest
from kio.schema.errors import ErrorCode as E
from kio.static.primitive import i32, i32Timedelta

from kafka_controller.broker.config import BrokerConfig
from kafka_controller.broker.kafka_wire.admin_apis import admin_apis, auto_create_topics
from kafka_controller.broker.kafka_wire.handler import KafkaProtocolHandler
from kafka_controller.broker.kafka_wire.header import RequestHeader
from kafka_controller.broker.kafka_wire.kio_api import KioApi
from kafka_controller.broker.kafka_wire.topic_checks import ApiException
from tests.broker.admin_wire import Env, req_nested

CREATE, DELETE, PARTITIONS = 19, 20, 37
DESCRIBE_CONFIGS, ALTER_CONFIGS, INCREMENTAL = 32, 33, 44
ELECT, ALTER_REASSIGN, LIST_REASSIGN = 43, 45, 46
SASL_HANDSHAKE, SASL_AUTHENTICATE, DESCRIBE_SCRAM, ALTER_SCRAM = 17, 36, 50, 51
METADATA = 3


def ms(n: int) -> i32Timedelta:
    return i32Timedelta.parse(datetime.timedelta(milliseconds=n))


def with_auto_create(config: dict[str, str] | None = None, brokers: int = 3) -> Env:
    """An ``Env`` whose handler also auto-creates topics, as a broker's does."""
    env = Env(brokers, config=config)
    server = SimpleNamespace(
        store=env.store,
        metadata_cache=env.cache,
        controller=env.controller,
        config=BrokerConfig.of(1, config or {}),
    )
    env.handler = KafkaProtocolHandler(
        env.cache, lambda: "cluster", admin_apis(server), auto_create_topics(server)
    )
    return env


def metadata(env: Env, v: int, *names: str, allow: bool = True) -> dict[str, tuple[int, bool]]:
    topics = tuple(req_nested(METADATA, v, "MetadataRequestTopic", name=n, topic_id=None) for n in names)
    fields: dict[str, Any] = {"topics": topics, "allow_auto_topic_creation": allow}
    if v >= 8:
        fields["include_topic_authorized_operations"] = False
        fields["include_cluster_authorized_operations"] = False
    response = env.call(METADATA, v, **fields)
    return {t.name: (int(t.error_code), bool(getattr(t, "is_internal", False))) for t in response.topics}


# -- a handler failure ------------------------------------------------------------------------------------
def _requests(key: int, v: int) -> dict[str, Any]:
    """One request per API naming one item, for every API a broker answers through ``kio``."""
    n = lambda entity, **f: req_nested(key, v, entity, **f)  # noqa: E731
    if key == CREATE:
        topic = n(
            "CreatableTopic", name="a", num_partitions=1, replication_factor=1, assignments=(), configs=()
        )
        return {"topics": (topic,), "timeout": ms(0), "validate_only": False}
    if key == DELETE:
        if v >= 6:
            return {"topics": (n("DeleteTopicState", name="a", topic_id=uuid.UUID(int=0)),), "timeout": ms(0)}
        return {"topic_names": ("a",), "timeout": ms(0)}
    if key == PARTITIONS:
        topic = n("CreatePartitionsTopic", name="a", count=i32(2), assignments=None)
        return {"topics": (topic,), "timeout": ms(0), "validate_only": False}
    if key == DESCRIBE_CONFIGS:
        resource = n("DescribeConfigsResource", resource_type=2, resource_name="a", configuration_keys=None)
        return {"resources": (resource,), "include_synonyms": False, "include_documentation": False}
    if key in (ALTER_CONFIGS, INCREMENTAL):
        entry = (
            n("AlterableConfig", name="retention.ms", config_operation=0, value="1")
            if key == INCREMENTAL
            else n("AlterableConfig", name="retention.ms", value="1")
        )
        resource = n("AlterConfigsResource", resource_type=2, resource_name="a", configs=(entry,))
        return {"resources": (resource,), "validate_only": False}
    if key == ELECT:
        tps = n("TopicPartitions", topic="a", partitions=(i32(0),))
        return {"election_type": 0, "topic_partitions": (tps,), "timeout": ms(0)}
    if key == ALTER_REASSIGN:
        p = n("ReassignablePartition", partition_index=i32(0), replicas=(i32(1),))
        return {"timeout": ms(0), "topics": (n("ReassignableTopic", name="a", partitions=(p,)),)}
    if key == SASL_HANDSHAKE:
        return {"mechanism": "PLAIN"}
    if key == SASL_AUTHENTICATE:
        return {"auth_bytes": b"\x00u\x00p"}
    if key == DESCRIBE_SCRAM:
        return {"users": (n("UserName", name="alice"),)}
    if key == ALTER_SCRAM:
        return {"deletions": (n("ScramCredentialDeletion", name="bob", mechanism=1),), "upsertions": ()}
    assert key == LIST_REASSIGN
    t = n("ListPartitionReassignmentsTopics", name="a", partition_indexes=(i32(0),))
    return {"timeout": ms(0), "topics": (t,)}


def _errors(key: int, response: Any) -> tuple[int | None, list[tuple[int, str | None]]]:
    """(top-level error code or None, [(per-item code, message)])."""
    top = getattr(response, "error_code", None)
    if key == CREATE:
        items = [
            (t.error_code, t.error_message if hasattr(t, "error_message") else None) for t in response.topics
        ]
    elif key == DELETE:
        items = [(t.error_code, getattr(t, "error_message", None)) for t in response.responses]
    elif key == PARTITIONS:
        items = [(t.error_code, t.error_message) for t in response.results]
    elif key == DESCRIBE_CONFIGS:
        items = [(r.error_code, r.error_message) for r in response.results]
    elif key in (ALTER_CONFIGS, INCREMENTAL):
        items = [(r.error_code, r.error_message) for r in response.responses]
    elif key == ELECT:
        items = [
            (p.error_code, p.error_message)
            for t in response.replica_election_results
            for p in t.partition_result
        ]
    elif key == ALTER_REASSIGN:
        items = [(p.error_code, p.error_message) for t in response.responses for p in t.partitions]
    elif key == ALTER_SCRAM:
        items = [(r.error_code, r.error_message) for r in response.results]
    elif key in (SASL_HANDSHAKE, SASL_AUTHENTICATE, DESCRIBE_SCRAM):  # the top level only
        items = [(response.error_code, getattr(response, "error_message", None))]
    else:
        items = [(int(top), None) for t in response.topics for _ in t.partitions]
    return (None if top is None else int(top)), [(int(c), m) for c, m in items]


RANGES = {
    CREATE: (0, 7, 5),
    DELETE: (0, 6, 4),
    PARTITIONS: (0, 3, 2),
    DESCRIBE_CONFIGS: (0, 4, 4),
    ALTER_CONFIGS: (0, 2, 2),
    INCREMENTAL: (0, 1, 1),
    ELECT: (0, 2, 2),
    ALTER_REASSIGN: (0, 0, 0),
    LIST_REASSIGN: (0, 0, 0),
    SASL_HANDSHAKE: (0, 1, 9),
    SASL_AUTHENTICATE: (0, 2, 2),
    DESCRIBE_SCRAM: (0, 0, 0),
    ALTER_SCRAM: (0, 0, 0),
}


def _failing(header: RequestHeader, request: Any) -> Any:
    raise RuntimeError("secret internals: /var/lib/thing")


@pytest.mark.parametrize(
    ("key", "v"), [(k, v) for k, (lo, hi, _) in RANGES.items() for v in sorted({lo, hi, (lo + hi) // 2})]
)
def test_a_failing_handler_answers_unknown_server_error_per_item_and_keeps_the_connection(
    key: int, v: int
) -> None:
    """Kafka's ``KafkaApis.handle`` catches the failure and answers ``getErrorResponse``: each topic,
    resource or partition asked about gets UNKNOWN_SERVER_ERROR (and the top level, where there is
    one), without the exception's text; the connection stays open (an answer, not None)."""
    env = Env()
    apis = {k: KioApi(k, lo, hi, flex, _failing) for k, (lo, hi, flex) in RANGES.items()}
    env.handler = KafkaProtocolHandler(env.cache, lambda: "cluster", apis)
    response = env.call(key, v, **_requests(key, v))
    top, items = _errors(key, response)
    assert len(items) == 1  # the one item asked about (ListPartitionReassignments echoes it)
    for code, message in items:
        assert code == E.unknown_server_error
        assert message is None or "secret" not in message
    if key == DESCRIBE_CONFIGS:  # Kafka puts the error's generic text here
        assert items[0][1] == "The server experienced an unexpected error when processing the request."
    if top is not None:
        assert top == E.unknown_server_error
    if key == CREATE and v >= 5:
        (t,) = response.topics
        assert (t.num_partitions, t.replication_factor, t.configs) == (-1, -1, ())


def test_a_failing_metadata_request_answers_each_topic_with_unknown_server_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    env = Env()

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("cache broke")

    monkeypatch.setattr(env.cache, "topic_partition_states", broken)
    for v in (0, 4, 9, 11):
        answer = metadata(env, v, "a", "b")
        assert answer == {
            "a": (int(E.unknown_server_error), False),
            "b": (int(E.unknown_server_error), False),
        }


# -- CreateTopics -----------------------------------------------------------------------------------------
def topic(v: int, name: str, n: int = -1, rf: int = -1, configs: dict[str, str] | None = None) -> Any:
    return req_nested(
        CREATE,
        v,
        "CreatableTopic",
        name=name,
        num_partitions=n,
        replication_factor=rf,
        assignments=(),
        configs=tuple(
            req_nested(CREATE, v, "CreatableTopicConfig", name=k, value=x) for k, x in (configs or {}).items()
        ),
    )


@pytest.mark.parametrize("v", [5, 6, 7])
def test_create_topics_resets_counts_and_configs_on_request_timed_out(v: int) -> None:
    """Kafka's ``handleCreateTopicsResults``: any error, REQUEST_TIMED_OUT too, answers -1/-1 and no
    configs, though the topic was written (timeout 0 never waits for its leaders)."""
    env = Env()
    (r,) = env.call(
        CREATE, v, topics=(topic(v, "t", 4, 2, {"retention.ms": "5"}),), timeout=ms(0), validate_only=False
    ).topics
    assert r.error_code == E.request_timed_out
    assert (r.num_partitions, r.replication_factor, r.configs) == (-1, -1, ())
    assert len(env.assignment("t")) == 4  # written all the same
    if v >= 7:
        assert r.topic_id is not None  # the id Kafka populated before the reset stays
    (ok,) = env.call(CREATE, v, topics=(topic(v, "u", 3, 1),), timeout=ms(0), validate_only=True).topics
    assert (ok.error_code, ok.num_partitions, ok.replication_factor) == (E.none, 3, 1)


@pytest.mark.parametrize("v", [4, 7])
def test_create_topics_minus_one_takes_num_partitions_and_default_replication_factor(v: int) -> None:
    env = Env(config={"num.partitions": "5", "default.replication.factor": "2"})
    (r,) = env.call(CREATE, v, topics=(topic(v, "d"),), timeout=ms(0), validate_only=False).topics
    assert r.error_code == E.request_timed_out
    placed = env.assignment("d")
    assert len(placed) == 5 and {len(rs) for rs in placed.values()} == {2}
    (bad,) = (
        Env(config={"default.replication.factor": "4"})
        .call(CREATE, v, topics=(topic(v, "e"),), timeout=ms(0), validate_only=False)
        .topics
    )
    assert bad.error_code == E.invalid_replication_factor  # 4 replicas, 3 brokers


# -- Metadata: auto-creation and illegal names --------------------------------------------------------------
@pytest.mark.parametrize("v", [1, 4, 9, 11])
def test_metadata_auto_creates_an_unknown_topic_with_the_broker_defaults(v: int) -> None:
    env = with_auto_create({"num.partitions": "3", "default.replication.factor": "2"})
    assert metadata(env, v, "fresh") == {"fresh": (int(E.leader_not_available), False)}
    placed = env.assignment("fresh")
    assert len(placed) == 3 and {len(rs) for rs in placed.values()} == {2}
    env.sync()  # the controller's UpdateMetadata: now it is an ordinary topic
    assert metadata(env, v, "fresh") == {"fresh": (int(E.none), False)}


def test_metadata_does_not_create_when_the_request_or_the_broker_says_no() -> None:
    env = with_auto_create()
    assert metadata(env, 4, "kept-out", allow=False) == {
        "kept-out": (int(E.unknown_topic_or_partition), False)
    }
    off = with_auto_create({"auto.create.topics.enable": "false"})
    assert metadata(off, 11, "kept-out") == {"kept-out": (int(E.unknown_topic_or_partition), False)}
    assert env.store.get_all_topics() == set() == off.store.get_all_topics()
    everything = env.call(METADATA, 4, topics=None, allow_auto_topic_creation=True)
    assert everything.topics == () and env.store.get_all_topics() == set()


def test_a_failed_auto_creation_answers_its_error() -> None:
    env = with_auto_create({"default.replication.factor": "5"})
    assert metadata(env, 4, "wide") == {"wide": (int(E.invalid_replication_factor), False)}
    # Kafka's offsets topic: 50 partitions of 3 replicas, compacted, internal
    assert metadata(env, 4, "__consumer_offsets") == {
        "__consumer_offsets": (int(E.leader_not_available), True)
    }
    assert len(env.assignment("__consumer_offsets")) == 50
    assert (
        env.store.get_entity_configs([("topics", "__consumer_offsets")])[("topics", "__consumer_offsets")][
            "cleanup.policy"
        ]
        == "compact"
    )


@pytest.mark.parametrize("allow", [True, False])
def test_an_illegal_topic_name_in_metadata_is_invalid_topic_exception(allow: bool) -> None:
    env = with_auto_create()
    names = ("bad name", "x" * 250, "..", "ok/no")
    answer = metadata(env, 9, *names, allow=allow)
    assert answer == dict.fromkeys(names, (int(E.invalid_topic_exception), False))
    assert env.store.get_all_topics() == set()


# -- IncrementalAlterConfigs ------------------------------------------------------------------------------
def incremental(env: Env, rtype: int, name: str, *ops: tuple[str, int, str | None]) -> tuple[int, str | None]:
    configs = tuple(
        req_nested(INCREMENTAL, 1, "AlterableConfig", name=k, config_operation=op, value=val)
        for k, op, val in ops
    )
    resource = req_nested(
        INCREMENTAL, 1, "AlterConfigsResource", resource_type=rtype, resource_name=name, configs=configs
    )
    (r,) = env.call(INCREMENTAL, 1, resources=(resource,), validate_only=False).responses
    return int(r.error_code), r.error_message


def test_subtract_on_an_unset_list_config_starts_from_its_default() -> None:
    """Kafka's ``prepareIncrementalConfigs``: SUBTRACT, like APPEND, starts from the config's default
    list when the entity does not set it (``cleanup.policy`` defaults to ``delete``)."""
    env = Env()
    env.store.create_topic("t", {0: [1]})
    env.sync()
    assert incremental(env, 2, "t", ("cleanup.policy", 3, "compact")) == (0, None)
    assert env.store.get_entity_configs([("topics", "t")])[("topics", "t")] == {"cleanup.policy": "delete"}
    # and each item given removes one occurrence, as Scala's List.diff
    assert incremental(env, 2, "t", ("cleanup.policy", 0, "compact,delete,compact")) == (0, None)
    assert incremental(env, 2, "t", ("cleanup.policy", 3, "compact")) == (0, None)
    assert env.store.get_entity_configs([("topics", "t")])[("topics", "t")] == {
        "cleanup.policy": "delete,compact"
    }
    # the broker's list config starts from its own default too
    assert incremental(env, 4, "", ("log.cleanup.policy", 2, "compact")) == (0, None)
    assert env.store.get_entity_configs([("brokers", "<default>")])[("brokers", "<default>")] == {
        "log.cleanup.policy": "delete,compact"
    }


@pytest.mark.parametrize("key", [CREATE, DESCRIBE_CONFIGS, ELECT, ALTER_REASSIGN, ALTER_SCRAM])
def test_a_handler_raising_kafkas_api_exception_answers_its_code(key: int) -> None:
    """Kafka's ``handleError`` answers ``Errors.forException(e)``: an authorization failure thrown
    by a handler is CLUSTER_AUTHORIZATION_FAILED wherever the API has an error, with its message."""

    def refuse(header: RequestHeader, request: Any) -> Any:
        raise ApiException(E.cluster_authorization_failed, "Request was not authorized")

    env = Env()
    apis = {k: KioApi(k, lo, hi, flex, refuse) for k, (lo, hi, flex) in RANGES.items()}
    env.handler = KafkaProtocolHandler(env.cache, lambda: "cluster", apis)
    v = RANGES[key][1]
    top, items = _errors(key, env.call(key, v, **_requests(key, v)))
    assert items == [(int(E.cluster_authorization_failed), "Request was not authorized")]
    assert top in (None, int(E.cluster_authorization_failed))
