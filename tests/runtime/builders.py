"""Builders of control requests for the transport tests and the benchmark."""

from __future__ import annotations

import uuid

from kafka_controller.domain.requests import (
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    StopReplicaPartitionState,
    StopReplicaRequest,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
)
from kafka_controller.domain.values import Broker, EndPoint, TopicPartition


def broker(broker_id: int, port: int = 9092, rack: str | None = None) -> Broker:
    return Broker(
        broker_id,
        (EndPoint("127.0.0.1", port), EndPoint("localhost", port + 1, "INTERNAL", "SASL_PLAINTEXT")),
        rack,
        (("metadata.version", 1, 7),),
    )


def leader_and_isr(
    topics: int, partitions_per_topic: int, replication: int = 3, brokers: int = 5, epoch: int = 7
) -> LeaderAndIsrRequest:
    """A LeaderAndIsr for ``topics * partitions_per_topic`` partitions, Kafka 1.1's benchmark shape."""
    states = []
    for t in range(topics):
        topic = f"topic-{t:05d}"
        for p in range(partitions_per_topic):
            replicas = tuple((t + p + i) % brokers for i in range(replication))
            states.append(
                LeaderAndIsrPartitionState(
                    topic, p, epoch, replicas[0], 3 + p % 4, replicas, 5 + p % 3, replicas, (), (), p % 7 == 0
                )
            )
    ids = {f"topic-{t:05d}": str(uuid.UUID(int=t + 1)) for t in range(topics)}
    return LeaderAndIsrRequest(5, 1, epoch, 100, tuple(states), ids, tuple(broker(b) for b in range(brokers)))


def update_metadata(partitions: int = 6) -> UpdateMetadataRequest:
    states = tuple(
        UpdateMetadataPartitionState(
            "bar" if i % 3 == 0 else "foo",
            i,
            4,
            -2 if i == 1 else i % 3,
            0,
            (1, 2),
            3,
            (1, 2, 3),
            (3,) * (i % 2),
        )
        for i in range(partitions)
    )
    return UpdateMetadataRequest(7, 1, 4, 55, states, (broker(1, rack="r1"), broker(2)), {"foo": "id-foo"})


def stop_replica() -> StopReplicaRequest:
    states = {
        TopicPartition("foo", 0): StopReplicaPartitionState(0, -2, True),
        TopicPartition("bar", 1): StopReplicaPartitionState(1, 5, False),
        TopicPartition("foo", 1): StopReplicaPartitionState(1, -2, True),
    }
    return StopReplicaRequest(3, 1, 4, 55, False, states)
