"""Golden-file tests of the znode codecs against Kafka 2.8's literal payloads
(docs/controller-behaviour.md §7.1, docs/external-contract.md §1)."""

from __future__ import annotations

import base64
from pathlib import Path

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_controller.domain.errors import InvalidArgumentError, ZNodeDecodeError
from kafka_controller.domain.values import (
    Broker,
    EndPoint,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
    TopicPartition,
)
from kafka_controller.ports import FeatureZNode
from kafka_controller.zk import admin_codecs as A
from kafka_controller.zk import codecs as C

GOLDEN = Path(__file__).parent / "golden"


def golden(name: str) -> bytes:
    return (GOLDEN / name).read_bytes()


def same_json(a: bytes, b: bytes) -> bool:
    return orjson.loads(a) == orjson.loads(b)


# -- decoding the spec's payloads ------------------------------------------------------------------


def test_controller_versions_1_and_2() -> None:
    assert C.decode_controller(golden("controller_v1.json")) == 1
    assert C.decode_controller(golden("controller_v2.json")) == 3
    assert same_json(C.encode_controller(1, 1605000000000), golden("controller_v1.json"))


def test_controller_epoch_is_decimal_text() -> None:
    assert C.decode_controller_epoch(golden("controller_epoch.txt")) == 7
    assert C.encode_controller_epoch(7) == b"7"
    with pytest.raises(ZNodeDecodeError, match="/controller_epoch"):
        C.decode_controller_epoch(b"seven")


def test_partition_state_golden() -> None:
    path = "/brokers/topics/t/partitions/0/state"
    state = C.decode_partition_state(golden("partition_state.json"), 5, path)
    assert state == LeaderIsrAndControllerEpoch(LeaderAndIsr(2, 12, (2, 1, 3), 5), 7)
    assert C.encode_partition_state(state) == golden("partition_state.json")  # 2.13 key order
    # 3.x adds leader_recovery_state; a 2.8 reader ignores it.
    newer = C.decode_partition_state(golden("partition_state_3x.json"), 0, path)
    assert newer is not None and newer.leader_and_isr.isr == (1,)


def test_partition_state_empty_is_none() -> None:
    assert C.decode_partition_state(b"", 0, "/x") is None
    assert C.decode_partition_state(None, 0, "/x") is None


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (b'{"controller_epoch":1,"leader":1,"version":1,"isr":[1]}', "leader_epoch"),
        (b'{"controller_epoch":1,"leader":"1","version":1,"leader_epoch":0,"isr":[1]}', "integers"),
        (b'{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1,"2"]}', "isr"),
        (b'{"controller_epoch":1,"leader":true,"version":1,"leader_epoch":0,"isr":[1]}', "integers"),
        (b'{"controller_epoch":1,', "invalid JSON"),
        (b"[1,2]", "JSON object"),
    ],
)
def test_partition_state_corrupt_raises_naming_the_path(payload: bytes, reason: str) -> None:
    path = "/brokers/topics/t/partitions/3/state"
    with pytest.raises(ZNodeDecodeError) as info:
        C.decode_partition_state(payload, 0, path)
    assert path in str(info.value) and reason in str(info.value)
    assert info.value.path == path


def test_topic_v3_with_id() -> None:
    topic_id, assignment = C.decode_topic("t", golden("topic_v3.json"))
    assert topic_id == "p6NPbNU3RAqhQ2XdQz0OGg"
    assert assignment == {
        TopicPartition("t", 0): ReplicaAssignment((1, 2)),
        TopicPartition("t", 1): ReplicaAssignment((2, 3)),
    }
    assert same_json(C.encode_topic(assignment, topic_id), golden("topic_v3.json"))


def test_topic_v3_without_id_writes_no_topic_id_key() -> None:
    _, assignment = C.decode_topic("t", golden("topic_v3_no_id.json"))
    encoded = C.encode_topic(assignment)
    assert same_json(encoded, golden("topic_v3_no_id.json"))
    assert b"topic_id" not in encoded


def test_topic_v2_with_reassignment_and_v1() -> None:
    topic_id, assignment = C.decode_topic("t", golden("topic_v2.json"))
    assert topic_id is None
    assert assignment[TopicPartition("t", 0)] == ReplicaAssignment((3, 1, 2), (3,), (2,))
    assert assignment[TopicPartition("t", 1)] == ReplicaAssignment((2, 3))
    # v3 keeps only non-empty adding/removing entries
    doc = orjson.loads(C.encode_topic(assignment))
    assert doc["version"] == 3
    assert doc["adding_replicas"] == {"0": [3]} and doc["removing_replicas"] == {"0": [2]}
    _, v1 = C.decode_topic("t", golden("topic_v1.json"))
    assert v1 == {
        TopicPartition("t", 0): ReplicaAssignment((1, 2)),
        TopicPartition("t", 1): ReplicaAssignment((2, 1)),
    }


@pytest.mark.parametrize(
    "payload",
    [
        b'{"version":3,"partitions":{"x":[1]}}',
        b'{"version":3,"partitions":{"0":[1,"2"]}}',
        b'{"version":3,"partitions":{"0":[1]},"topic_id":"not-a-uuid"}',
        b'{"version":3,"partitions":[1,2]}',
    ],
)
def test_topic_corrupt(payload: bytes) -> None:
    with pytest.raises(ZNodeDecodeError, match="/brokers/topics/t"):
        C.decode_topic("t", payload)


def test_topic_without_partitions_is_tolerated_like_kafka() -> None:
    assert C.decode_topic("t", b'{"version":1}') == (None, {})


def test_broker_v5_golden_and_epoch_independent() -> None:
    broker = C.decode_broker(1, golden("broker_v5.json"))
    assert broker == Broker(
        1,
        (EndPoint("broker1", 9092, "PLAINTEXT", "PLAINTEXT"), EndPoint("broker1", 9093, "SSL", "SSL")),
        "rack-a",
        (),
    )
    assert same_json(C.encode_broker(broker, 1605000000000), golden("broker_v5.json"))


def test_broker_older_versions() -> None:
    v4 = C.decode_broker(7, golden("broker_v4.json"))
    assert v4.endpoints == (EndPoint("10.0.0.7", 9094, "INTERNAL", "SASL_SSL"),)
    assert v4.rack is None
    v1 = C.decode_broker(2, golden("broker_v1.json"))
    assert v1.endpoints == (EndPoint("old-broker", 9092),)


def test_broker_features_and_no_plaintext_listener() -> None:
    broker = Broker(4, (EndPoint("h", 9093, "SSL", "SSL"),), None, (("f", 1, 2),))
    doc = orjson.loads(C.encode_broker(broker, 1, jmx_port=9999))
    assert doc["host"] is None and doc["port"] == -1 and doc["version"] == 5
    assert doc["features"] == {"f": {"min_version": 1, "max_version": 2}}
    assert "rack" not in doc and doc["jmx_port"] == 9999
    assert C.decode_broker(4, C.encode_broker(broker, 1)) == broker


def test_broker_corrupt() -> None:
    with pytest.raises(ZNodeDecodeError, match="/brokers/ids/1"):
        C.decode_broker(1, b'{"version":5,"endpoints":["nonsense"]}')
    with pytest.raises(ZNodeDecodeError, match="version"):
        C.decode_broker(1, b'{"endpoints":[]}')


# -- admin and notification znodes --------------------------------------------------------------------


def test_reassignment_literal_and_strict() -> None:
    literal = golden("reassign_partitions.json")
    assert A.encode_reassignment({TopicPartition("foo", 0): [1, 2]}) == literal
    assert A.decode_reassignment(literal) == {TopicPartition("foo", 0): (1, 2)}
    with pytest.raises(ZNodeDecodeError, match="log_dirs"):
        A.decode_reassignment(golden("reassign_partitions_log_dirs.json"))
    with pytest.raises(ZNodeDecodeError, match="missing key 'replicas'"):
        A.decode_reassignment(b'{"version":1,"partitions":[{"topic":"foo","partition":0}]}')
    with pytest.raises(ZNodeDecodeError, match="invalid JSON"):
        A.decode_reassignment(b'{"version":1,')


@pytest.mark.parametrize("replicas", [[1, 1], [-1, 2], []])
def test_reassignment_encoder_rejects_bad_replicas(replicas: list[int]) -> None:
    if not replicas:
        assert A.encode_reassignment({TopicPartition("foo", 0): replicas})  # Kafka allows it on ZK
        return
    with pytest.raises(InvalidArgumentError, match="foo-0"):
        A.encode_reassignment({TopicPartition("foo", 0): replicas})


def test_preferred_replica_election() -> None:
    data = golden("preferred_replica_election.json")
    parts = A.decode_preferred_replica_election(data)
    assert parts == {TopicPartition("t", 0), TopicPartition("t", 1)}
    assert A.encode_preferred_replica_election([TopicPartition("t", 0), TopicPartition("t", 1)]) == data
    assert A.decode_preferred_replica_election(b'{"version":1}') == set()


def test_isr_change_notification_literal() -> None:
    data = golden("isr_change_notification.json")
    parts = [TopicPartition("topic-a", 0), TopicPartition("topic-b", 0)]
    assert A.encode_isr_change_notification(parts) == data
    assert A.decode_isr_change_notification(data, "/isr_change_notification/isr_change_0000000000") == parts
    with pytest.raises(ZNodeDecodeError, match="isr_change_0000000001"):
        A.decode_isr_change_notification(b'{"version":1}', "/isr_change_notification/isr_change_0000000001")


def test_log_dir_event_literal() -> None:
    assert A.encode_log_dir_event(3) == golden("log_dir_event.json")
    assert A.decode_log_dir_event(golden("log_dir_event.json"), "/log_dir_event_notification/x") == 3


def test_configs_and_change_notifications() -> None:
    cfg = A.decode_entity_config(golden("topic_config.json"), "/config/topics/t")
    assert cfg == {"unclean.leader.election.enable": "true"}
    assert A.encode_entity_config(cfg) == golden("topic_config.json")
    assert A.encode_entity_config({}) == golden("topic_config_empty.json")
    assert A.decode_entity_config(None, "/config/topics/t") == {}
    with pytest.raises(ZNodeDecodeError, match="must be a string"):
        A.decode_entity_config(b'{"version":1,"config":{"retention.ms":5}}', "/config/topics/t")
    with pytest.raises(InvalidArgumentError):
        A.encode_entity_config({"retention.ms": 5})  # type: ignore[dict-item]
    assert A.encode_config_change_notification("topics/orders") == golden("config_change.json")
    assert A.decode_config_change_notification(golden("config_change.json"), "/c") == "topics/orders"


def test_cluster_id_version_is_a_string() -> None:
    data = golden("cluster_id.json")
    assert A.decode_cluster_id(data) == "Ny6xmTrFQ1SrdsQNHH4yfg"
    assert orjson.loads(A.encode_cluster_id("Ny6xmTrFQ1SrdsQNHH4yfg"))["version"] == "1"
    assert same_json(A.encode_cluster_id("Ny6xmTrFQ1SrdsQNHH4yfg"), data)


def test_feature_znode() -> None:
    assert A.decode_feature(golden("feature_enabled_empty.json")) == FeatureZNode(1, {}, 1)
    feature = A.decode_feature(golden("feature_v1.json"))
    assert feature.features == {"metadata.version": (1, 4)} and feature.enabled
    assert same_json(A.encode_feature(feature), golden("feature_v1.json"))
    with pytest.raises(ZNodeDecodeError, match="status"):
        A.decode_feature(b'{"features":{},"version":1,"status":7}')


def test_topic_ids_are_kafka_uuids() -> None:
    ids = {C.new_topic_id() for _ in range(200)}
    assert len(ids) == 200
    for text in ids:
        assert len(text) == 22 and C.is_topic_id(text) and not text.startswith("-")
        assert len(base64.urlsafe_b64decode(text + "==")) == 16
    assert not C.is_topic_id("AAAA") and not C.is_topic_id(12)


# -- properties ----------------------------------------------------------------------------------------

ints = st.integers(min_value=-2, max_value=2**31 - 1)


@given(
    leader=ints, epoch=ints, isr=st.lists(st.integers(0, 10_000), max_size=8), ce=ints, v=st.integers(0, 99)
)
def test_partition_state_round_trip(leader: int, epoch: int, isr: list[int], ce: int, v: int) -> None:
    state = LeaderIsrAndControllerEpoch(LeaderAndIsr(leader, epoch, tuple(isr), v), ce)
    assert C.decode_partition_state(C.encode_partition_state(state), v, "/s") == state


replica_lists = st.lists(st.integers(0, 1000), min_size=1, max_size=5, unique=True)


@given(
    parts=st.lists(
        st.tuples(replica_lists, st.lists(st.integers(0, 1000), max_size=2)), min_size=1, max_size=20
    ),
    with_id=st.booleans(),
)
def test_topic_round_trip(parts: list[tuple[list[int], list[int]]], with_id: bool) -> None:
    assignment = {
        TopicPartition("t", p): ReplicaAssignment(tuple(rs), tuple(add), ())
        for p, (rs, add) in enumerate(parts)
    }
    topic_id = C.new_topic_id() if with_id else None
    assert C.decode_topic("t", C.encode_topic(assignment, topic_id)) == (topic_id, assignment)


@given(leader=ints, epoch=ints, isr=st.lists(st.integers(-1, 2**31 - 1), max_size=8), ce=ints)
def test_partition_state_bytes_are_kafkas_json(leader: int, epoch: int, isr: list[int], ce: int) -> None:
    """The formatted encoding is byte for byte the JSON document in Kafka's key order."""
    state = LeaderIsrAndControllerEpoch(LeaderAndIsr(leader, epoch, tuple(isr), 0), ce)
    doc = {"controller_epoch": ce, "leader": leader, "version": 1, "leader_epoch": epoch, "isr": isr}
    assert C.encode_partition_state(state) == orjson.dumps(doc)


def test_partition_state_isr_cache_is_bounded() -> None:
    for i in range(C._ISR_TEXT_MAX + 10):
        state = LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 1, (i, i + 1), 0), 1)
        assert C.encode_partition_state(state).endswith(b'"isr":[%d,%d]}' % (i, i + 1))
    assert len(C._ISR_TEXT) <= C._ISR_TEXT_MAX
