"""Topic auto-creation as a Kafka client meets it: kafka-python asks a broker for a topic that does
not exist, the broker writes it with its ``num.partitions``/``default.replication.factor`` and
answers LEADER_NOT_AVAILABLE, the client retries, and the controller's UpdateMetadata then shows it
led; with ``auto.create.topics.enable=false`` the topic stays unknown. Two in-process brokers, real
sockets, an in-memory ZooKeeper tree."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kafka import KafkaProducer
from kafka.errors import KafkaTimeoutError

from kafka_controller.broker.config import BrokerConfig
from kafka_controller.broker.server import BrokerServer
from kafka_controller.dryrun.memory_store import InMemoryMetadataStore
from kafka_controller.dryrun.memory_zk import InMemoryZooKeeper
from tests.broker.helpers import wait_until

SETTINGS = {"auto.leader.rebalance.enable": "false", "sim.fetch.interval.ms": "50"}


class Brokers:
    def __init__(self, settings: dict[str, str]) -> None:
        self.tree = InMemoryZooKeeper()
        self.zk = InMemoryMetadataStore(self.tree)
        self.servers = [
            BrokerServer(
                BrokerConfig.of(b, {**SETTINGS, **settings}), InMemoryMetadataStore(self.tree)
            ).startup()
            for b in (1, 2)
        ]
        wait_until(
            lambda: self.zk.get_controller_id() is not None and len(self.zk.get_sorted_broker_list()) == 2,
            "a controller and two registered brokers",
        )
        wait_until(
            lambda: all(len(s.metadata_cache.alive_brokers()) == 2 for s in self.servers), "brokers' metadata"
        )

    def bootstrap(self) -> str:
        port = self.servers[1].transport.port  # not necessarily the controller: any broker creates
        return f"127.0.0.1:{port}"

    def close(self) -> None:
        for s in self.servers:
            s.crash()
        self.zk.close()


@pytest.fixture
def auto_on() -> Iterator[Brokers]:
    b = Brokers({"num.partitions": "3", "default.replication.factor": "2"})
    yield b
    b.close()


@pytest.fixture
def auto_off() -> Iterator[Brokers]:
    b = Brokers({"auto.create.topics.enable": "false"})
    yield b
    b.close()


def producer(bootstrap: str, max_block_ms: int) -> KafkaProducer:
    """A producer asks Metadata for exactly the topics it sends to, allowing auto-creation (v4+)."""
    return KafkaProducer(bootstrap_servers=bootstrap, request_timeout_ms=10_000, max_block_ms=max_block_ms)


def test_a_client_asking_for_an_unknown_topic_gets_it_created_with_the_broker_defaults(
    auto_on: Brokers,
) -> None:
    p = producer(auto_on.bootstrap(), 20_000)
    try:
        # LEADER_NOT_AVAILABLE first (written, not led yet): the client retries until it is led
        assert p.partitions_for("made-by-asking") == {0, 1, 2}
    finally:
        p.close()
    read = auto_on.zk.get_replica_assignment_and_topic_ids(["made-by-asking"])["made-by-asking"]
    assert not isinstance(read, Exception)
    assert sorted(tp.partition for tp in read.assignment) == [0, 1, 2]
    assert {len(ra.replicas) for ra in read.assignment.values()} == {2}


def test_with_auto_creation_off_the_topic_stays_unknown(auto_off: Brokers) -> None:
    p = producer(auto_off.bootstrap(), 2_000)
    try:
        with pytest.raises(KafkaTimeoutError):  # UNKNOWN_TOPIC_OR_PARTITION until it gives up
            p.partitions_for("stays-unknown")
    finally:
        p.close()
    assert auto_off.zk.get_all_topics() == set()
