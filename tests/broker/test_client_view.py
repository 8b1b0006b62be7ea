"""``cluster.client_view``: kafka-python reads a broker's Kafka-protocol answers and every
difference from ZooKeeper is reported, partition by partition (the demo's proof that a client sees
what ZooKeeper holds)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kafka_controller.broker.kafka_wire.handler import KafkaProtocolHandler
from kafka_controller.broker.metadata_cache import MetadataCache
from kafka_controller.cluster.client_view import kafka_client_view
from kafka_controller.domain.requests import UpdateMetadataPartitionState, UpdateMetadataRequest
from kafka_controller.domain.values import (
    Broker,
    EndPoint,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
    TopicPartition,
)
from kafka_controller.dryrun.memory_store import InMemoryMetadataStore
from kafka_controller.transport.server import TransportServer

ZK_STATES = {0: (1, (1, 2)), 1: (2, (2, 1)), 2: (1, (1,))}  # partition -> (leader, isr)
REPLICAS = {0: (1, 2), 1: (2, 1), 2: (1, 2)}


@pytest.fixture
def served() -> Iterator[tuple[MetadataCache, str]]:
    cache = MetadataCache(1)
    server = TransportServer(
        "127.0.0.1", 0, lambda api, body: None, raw_handler=KafkaProtocolHandler(cache, lambda: "c").handle
    ).start()
    try:
        yield cache, f"127.0.0.1:{server.port}"
    finally:
        server.stop()


def store_with_topic() -> InMemoryMetadataStore:
    store = InMemoryMetadataStore()
    store.create_topic("orders", {p: ReplicaAssignment(r) for p, r in REPLICAS.items()})
    states = {
        TopicPartition("orders", p): LeaderIsrAndControllerEpoch(LeaderAndIsr(leader, 3, isr, 0), 1)
        for p, (leader, isr) in ZK_STATES.items()
    }
    store.create_partition_states(states, -1)
    return store


def fill(cache: MetadataCache, port: int, states: dict[int, tuple[int, tuple[int, ...]]]) -> None:
    brokers = tuple(Broker(b, (EndPoint("127.0.0.1", port),)) for b in (1, 2))
    cache.update_metadata(
        UpdateMetadataRequest(
            7,
            1,
            1,
            -1,
            tuple(
                UpdateMetadataPartitionState("orders", p, 1, leader, 3, isr, 0, REPLICAS[p], ())
                for p, (leader, isr) in states.items()
            ),
            brokers,
        )
    )


def test_a_client_that_reads_what_zookeeper_holds_finds_no_mismatch(
    served: tuple[MetadataCache, str],
) -> None:
    cache, bootstrap = served
    fill(cache, int(bootstrap.rsplit(":", 1)[1]), ZK_STATES)
    view = kafka_client_view(bootstrap, ["orders"], store_with_topic())
    assert view.client.startswith("kafka-python ")
    assert view.partitions == {"orders": 3} and view.leaders == {1: 2, 2: 1}
    assert view.mismatches == []


def test_every_difference_is_named(served: tuple[MetadataCache, str]) -> None:
    cache, bootstrap = served
    stale = {0: (2, (2,)), 1: ZK_STATES[1]}  # partition 0 differs, partition 2 missing
    fill(cache, int(bootstrap.rsplit(":", 1)[1]), stale)
    view = kafka_client_view(bootstrap, ["orders"], store_with_topic())
    assert len(view.mismatches) == 2
    assert view.mismatches[0].startswith("orders-0: client (2, [2], [1, 2]), ZooKeeper (1, [1, 2], [1, 2])")
    assert view.mismatches[1] == "orders-2: not in the client's metadata"
