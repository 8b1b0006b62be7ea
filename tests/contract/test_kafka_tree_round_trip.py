"""A tree shaped like a real Kafka 2.8 cluster's, written with raw literal JSON, read through the
store, then written through the store and read back as Kafka's JSON.

Topic ids, controller epoch 7 (with a zkVersion > 1), leader epochs > 0, and topic znodes of
versions 1, 2 and 3 (one partition mid-reassignment).
"""

from __future__ import annotations

import orjson
import pytest

from kafka_controller.domain.values import (
    Broker,
    EndPoint,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
    TopicPartition,
)
from kafka_controller.ports import FeatureZNode, TopicIdReplicaAssignment

from .conftest import StoreEnv

TP = TopicPartition
ORDERS_ID = "p6NPbNU3RAqhQ2XdQz0OGg"


def broker_json(i: int, rack: str | None) -> bytes:
    doc = {
        "features": {},
        "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT", "INTERNAL": "SSL"},
        "endpoints": [f"PLAINTEXT://kafka-{i}:9092", f"INTERNAL://10.0.0.{i}:9093"],
        "jmx_port": 9999,
        "port": 9092,
        "host": f"kafka-{i}",
        "version": 5,
        "timestamp": "1605000000000",
    }
    if rack:
        doc["rack"] = rack
    return orjson.dumps(doc)


STATES = {
    TP("orders", 0): b'{"controller_epoch":7,"leader":1,"version":1,"leader_epoch":3,"isr":[1,2,3]}',
    TP("orders", 1): b'{"controller_epoch":5,"leader":2,"version":1,"leader_epoch":12,"isr":[2,3]}',
    TP("orders", 2): b'{"controller_epoch":7,"leader":1,"version":1,"leader_epoch":1,"isr":[1,2,3,4]}',
    TP("legacy", 0): b'{"controller_epoch":2,"leader":-1,"version":1,"leader_epoch":4,"isr":[2]}',
    TP("mid", 0): b'{"isr":[2,3],"leader_epoch":6,"version":1,"leader":2,"controller_epoch":6}',
    TP("mid", 1): b'{"controller_epoch":6,"leader":3,"version":1,"leader_epoch":2,"isr":[3,1]}',
}


def build_kafka_tree(env: StoreEnv) -> None:
    put = env.raw_put
    for epoch in (b"5", b"6", b"7"):  # created, then bumped twice: data version 2
        put("/controller_epoch", epoch)
    put("/controller", b'{"version":1,"brokerid":2,"timestamp":"1605000000123"}')
    for i, rack in ((1, "us-east-1a"), (2, "us-east-1b"), (3, None)):
        put(f"/brokers/ids/{i}", broker_json(i, rack))
    put("/brokers/seqid", None)
    put(
        "/brokers/topics/orders",
        b'{"version":3,"partitions":{"0":[1,2,3],"1":[2,3,1],"2":[4,1,2,3]},"topic_id":"'
        + ORDERS_ID.encode()
        + b'","adding_replicas":{"2":[4]},"removing_replicas":{"2":[3]}}',
    )
    put("/brokers/topics/legacy", b'{"version":1,"partitions":{"0":[2,1]}}')
    put(
        "/brokers/topics/mid",
        b'{"version":2,"partitions":{"0":[2,3],"1":[3,1]},"adding_replicas":{},"removing_replicas":{}}',
    )
    for tp, payload in STATES.items():
        put(f"/brokers/topics/{tp.topic}/partitions/{tp.partition}/state", payload)
    put("/brokers/topics/orders/partitions/1/state", STATES[TP("orders", 1)])  # zkVersion 1
    put("/config/topics/orders", b'{"version":1,"config":{"unclean.leader.election.enable":"true"}}')
    put("/config/topics/mid", b'{"version":1,"config":{}}')
    put("/config/changes/config_change_0000000000", b'{"version":2,"entity_path":"topics/orders"}')
    put("/admin/delete_topics/legacy", None)
    put(
        "/isr_change_notification/isr_change_0000000003",
        b'{"version":1,"partitions":[{"topic":"mid","partition":1}]}',
    )
    put("/cluster/id", b'{"version":"1","id":"Ny6xmTrFQ1SrdsQNHH4yfg"}')
    put("/feature", b'{"features":{},"version":1,"status":1}')


def kafka_endpoints(i: int) -> tuple[EndPoint, ...]:
    return (EndPoint(f"kafka-{i}", 9092), EndPoint(f"10.0.0.{i}", 9093, "INTERNAL", "SSL"))


def test_reads_a_kafka_tree(env: StoreEnv) -> None:
    build_kafka_tree(env)
    store = env.store()
    assert store.get_controller_epoch() == (7, 2)
    assert store.get_controller_id() == 2
    brokers = store.get_all_brokers_and_epochs()
    assert set(brokers) == {
        Broker(1, kafka_endpoints(1), "us-east-1a"),
        Broker(2, kafka_endpoints(2), "us-east-1b"),
        Broker(3, kafka_endpoints(3), None),
    }
    assert len(set(brokers.values())) == 3 and all(e > 0 for e in brokers.values())
    assert store.get_all_topics() == {"orders", "legacy", "mid"}
    topics = store.get_replica_assignment_and_topic_ids(["orders", "legacy", "mid"])
    assert topics["orders"] == TopicIdReplicaAssignment(
        "orders",
        ORDERS_ID,
        {
            TP("orders", 0): ReplicaAssignment((1, 2, 3)),
            TP("orders", 1): ReplicaAssignment((2, 3, 1)),
            TP("orders", 2): ReplicaAssignment((4, 1, 2, 3), (4,), (3,)),
        },
        0,
    )
    assert topics["legacy"] == TopicIdReplicaAssignment(
        "legacy", None, {TP("legacy", 0): ReplicaAssignment((2, 1))}
    )
    mid = topics["mid"]
    assert isinstance(mid, TopicIdReplicaAssignment) and mid.topic_id is None
    assert mid.assignment == {
        TP("mid", 0): ReplicaAssignment((2, 3)),
        TP("mid", 1): ReplicaAssignment((3, 1)),
    }
    states = store.get_partition_states(list(STATES))
    assert states[TP("orders", 0)] == LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 3, (1, 2, 3), 0), 7)
    assert states[TP("orders", 1)] == LeaderIsrAndControllerEpoch(LeaderAndIsr(2, 12, (2, 3), 1), 5)
    assert states[TP("legacy", 0)] == LeaderIsrAndControllerEpoch(LeaderAndIsr(-1, 4, (2,), 0), 2)
    assert states[TP("mid", 0)] == LeaderIsrAndControllerEpoch(LeaderAndIsr(2, 6, (2, 3), 0), 6)
    configs, failures = store.get_log_configs(
        ["orders", "mid", "legacy"], {"unclean.leader.election.enable": "false"}
    )
    assert failures == {}
    assert [configs[t]["unclean.leader.election.enable"] for t in ("orders", "mid", "legacy")] == [
        "true",
        "false",
        "false",
    ]
    assert store.get_topic_deletions() == ["legacy"]
    assert store.get_all_isr_change_notifications() == ["0000000003"]
    assert store.get_partitions_from_isr_change_notifications(["0000000003"]) == [TP("mid", 1)]
    assert store.get_cluster_id() == "Ny6xmTrFQ1SrdsQNHH4yfg"
    assert store.get_feature_znode() == (FeatureZNode(1, {}), 0)
    assert store.create_config_change_notification("topics/mid").endswith("config_change_0000000001")


def test_writes_back_what_kafka_reads(env: StoreEnv) -> None:
    build_kafka_tree(env)
    old, store = env.store(), env.store()
    with pytest.raises(Exception, match="moved"):
        store.register_controller_and_increment_controller_epoch(3)  # broker 2 is controller
    old.delete_controller(-1)
    epoch, zkv = store.register_controller_and_increment_controller_epoch(3)
    assert (epoch, zkv) == (8, 3)
    assert env.raw_get("/controller_epoch") == (b"8", 3)
    controller = orjson.loads(env.raw_get("/controller")[0])  # type: ignore[index]
    assert controller["version"] == 1 and controller["brokerid"] == 3 and controller["timestamp"].isdigit()

    read = store.get_partition_states([TP("orders", 1), TP("legacy", 0)])
    lais = {tp: v.leader_and_isr.new_leader_and_isr(3, (3,)) for tp, v in read.items()}  # type: ignore[union-attr]
    result = store.update_leader_and_isr(lais, epoch, zkv)
    assert result.to_retry == []
    assert orjson.loads(env.raw_get("/brokers/topics/orders/partitions/1/state")[0]) == {  # type: ignore[index]
        "controller_epoch": 8,
        "leader": 3,
        "version": 1,
        "leader_epoch": 13,
        "isr": [3],
    }
    assert env.raw_get("/brokers/topics/orders/partitions/1/state")[1] == 2  # type: ignore[index]

    topics = store.get_replica_assignment_and_topic_ids(["legacy", "mid"])
    with_ids = [
        TopicIdReplicaAssignment(t, f"{t[:1].upper()}AAAAAAAAAAAAAAAAAAAAA", a.assignment)
        for t, a in topics.items()
    ]  # type: ignore[union-attr]
    assert store.set_topic_ids(with_ids, zkv) == {"legacy": None, "mid": None}
    assert orjson.loads(env.raw_get("/brokers/topics/legacy")[0]) == {  # type: ignore[index]
        "version": 3,
        "partitions": {"0": [2, 1]},
        "topic_id": "LAAAAAAAAAAAAAAAAAAAAA",
        "adding_replicas": {},
        "removing_replicas": {},
    }
    store.delete_isr_change_notifications(None, zkv)
    store.delete_topic_recursively("legacy", zkv)
    store.delete_topic_configs(["legacy"], zkv)
    store.delete_topic_deletions(["legacy"], zkv)
    assert env.raw_get("/brokers/topics/legacy") is None and store.get_topic_deletions() == []
    assert store.get_all_isr_change_notifications() == []
    assert store.get_replica_assignment_and_topic_ids(["orders"])["orders"].topic_id == ORDERS_ID  # type: ignore[union-attr]
