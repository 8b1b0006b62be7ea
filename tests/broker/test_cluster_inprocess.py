"""Three ``BrokerServer``s in one process: real controllers, real sockets, an in-memory ZooKeeper tree.

The same flows as the multi-process suite, seconds instead of tens of seconds: election, topic
creation, controlled shutdown, a crash and a restart that rejoins the ISR, session expiry (a new
broker epoch), and admin requests that find the controller.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kafka_controller.broker.admin_client import AdminClient
from kafka_controller.broker.config import BrokerConfig
from kafka_controller.broker.server import BrokerServer
from kafka_controller.domain.values import ReplicaAssignment, TopicPartition
from kafka_controller.dryrun.memory_store import InMemoryMetadataStore
from kafka_controller.dryrun.memory_zk import InMemoryZooKeeper
from tests.broker.helpers import wait_until

SETTINGS = {
    "controlled.shutdown.retry.backoff.ms": "200",
    "replica.lag.time.max.ms": "2000",
    "auto.leader.rebalance.enable": "false",
    "sim.fetch.interval.ms": "50",
    "sim.produce.rate.per.sec": "200",
}
TOPIC = "events"
TPS = [TopicPartition(TOPIC, p) for p in range(6)]


class Cluster:
    def __init__(self) -> None:
        self.tree = InMemoryZooKeeper()
        self.zk = InMemoryMetadataStore(self.tree)  # the test's own session, for reads and admin writes
        self.brokers: dict[int, BrokerServer] = {}

    def start(self, broker_id: int) -> BrokerServer:
        server = BrokerServer(BrokerConfig.of(broker_id, SETTINGS), InMemoryMetadataStore(self.tree))
        self.brokers[broker_id] = server.startup()
        return server

    def states(self) -> dict[int, tuple[int, int, tuple[int, ...]]]:
        out = {}
        for tp, s in self.zk.get_partition_states(TPS).items():
            if s is not None and not isinstance(s, Exception):
                lai = s.leader_and_isr
                out[tp.partition] = (lai.leader, lai.leader_epoch, lai.isr)
        return out

    def led_by(self, broker_id: int) -> list[int]:
        return [p for p, (leader, _, _) in self.states().items() if leader == broker_id]

    def create_topic(self) -> None:
        self.zk.create_topic(
            TOPIC, {p: ReplicaAssignment.of([p % 3 + 1, (p + 1) % 3 + 1, (p + 2) % 3 + 1]) for p in range(6)}
        )
        wait_until(
            lambda: len(self.states()) == 6 and all(len(isr) == 3 for _, _, isr in self.states().values()),
            "every partition led with a full ISR",
        )

    def close(self) -> None:
        for server in self.brokers.values():
            server.crash()
        self.zk.close()


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    c = Cluster()
    for b in (1, 2, 3):
        c.start(b)
    wait_until(
        lambda: c.zk.get_controller_id() is not None and len(c.zk.get_sorted_broker_list()) == 3,
        "a controller and three registered brokers",
    )
    yield c
    c.close()


def test_controller_elected_and_new_topic_led_as_zookeeper_says(cluster: Cluster) -> None:
    cluster.create_topic()
    for p, (leader, epoch, isr) in cluster.states().items():
        assert (leader, epoch) == (p % 3 + 1, 0)  # the first replica of each assignment
        assert set(isr) == {1, 2, 3}
    for b, server in cluster.brokers.items():
        expected = {TopicPartition(TOPIC, p) for p in cluster.led_by(b)}
        wait_until(
            lambda s=server, e=expected: s.replica_manager.partitions_led() == e, f"broker {b} leading"
        )
        wait_until(lambda s=server: len(s.metadata_cache.alive_brokers()) == 3, f"broker {b} metadata")
        assert server.metadata_cache.controller_id == cluster.zk.get_controller_id()
    first = cluster.brokers[1].replica_manager.get(TopicPartition(TOPIC, 0))
    assert first is not None
    start = first.high_watermark(cluster.brokers[1].clock.time_ms())
    wait_until(
        lambda: first.high_watermark(cluster.brokers[1].clock.time_ms()) > start + 20, "the HW advancing"
    )


def test_controlled_shutdown_moves_every_leadership_away_then_deregisters(cluster: Cluster) -> None:
    cluster.create_topic()
    victim = cluster.brokers[2]
    assert cluster.led_by(2)
    assert victim.shutdown() is True
    assert cluster.led_by(2) == []
    assert 2 not in cluster.zk.get_sorted_broker_list()
    for p, (_, _, isr) in cluster.states().items():
        assert 2 not in isr, f"partition {p} still has broker 2 in its ISR"


def test_crash_then_restart_rejoins_the_isr_and_preferred_election_restores_leadership(
    cluster: Cluster,
) -> None:
    cluster.create_topic()
    led_before = cluster.led_by(3)
    cluster.brokers[3].crash()
    wait_until(
        lambda: all(leader in (1, 2) and 3 not in isr for leader, _, isr in cluster.states().values()),
        "new leaders for broker 3's partitions, and broker 3 out of every ISR",
    )
    restarted = cluster.start(3)
    wait_until(lambda: all(3 in isr for _, _, isr in cluster.states().values()), "broker 3 back in every ISR")
    rm = restarted.replica_manager
    follower = rm.get(TopicPartition(TOPIC, led_before[0]))
    assert follower is not None and not follower.is_leader
    hw = follower.high_watermark(0)
    wait_until(lambda: follower.high_watermark(0) > hw + 20, "the restarted follower's HW advancing")
    with AdminClient(cluster.zk) as admin:
        response = admin.elect_leaders("preferred", [TopicPartition(TOPIC, p) for p in led_before])
    assert {tp.partition: r.leader for tp, r in response.results.items()} == dict.fromkeys(led_before, 3)
    assert sorted(cluster.led_by(3)) == sorted(led_before)


def test_session_expiry_reregisters_with_a_larger_broker_epoch(cluster: Cluster) -> None:
    cluster.create_topic()
    server = cluster.brokers[1]
    old_epoch = server.broker_epoch
    assert isinstance(server.store, InMemoryMetadataStore)
    server.store.expire_session()
    wait_until(lambda: server.broker_epoch > old_epoch, "a new broker epoch")
    wait_until(lambda: 1 in cluster.zk.get_sorted_broker_list(), "broker 1 registered again")
    assert cluster.zk.get_all_brokers_and_epochs()[server.broker_info] == server.broker_epoch  # type: ignore[index]
    # The bounced broker is a member again: everyone is back in every ISR, and it can stop cleanly.
    wait_until(lambda: all(set(isr) == {1, 2, 3} for _, _, isr in cluster.states().values()), "full ISRs")
    assert server.shutdown() is True and cluster.led_by(1) == []


def test_admin_requests_find_the_controller_from_any_broker(cluster: Cluster) -> None:
    cluster.create_topic()
    controller_id = cluster.zk.get_controller_id()
    other = next(b for b in cluster.brokers if b != controller_id)
    asked: list[int] = []

    def locate(fresh: bool) -> tuple[int, str, int]:
        target = controller_id if fresh else other  # start at a broker that is not the controller
        asked.append(target)  # type: ignore[arg-type]
        return target, "127.0.0.1", cluster.brokers[target].port  # type: ignore[index,return-value]

    with AdminClient(cluster.zk, locator=locate, retry_backoff_s=0.01) as admin:
        assert admin.list_partition_reassignments().reassignments == {}
        elected = admin.elect_leaders("preferred", TPS[:2])
        described = admin.describe_replicas(other)
    assert asked[:2] == [other, controller_id]
    assert {r.error for r in elected.results.values()} == {"ELECTION_NOT_NEEDED"}
    assert {(r.topic, r.partition) for r in described.replicas} == {(TOPIC, p) for p in range(6)}
    assert described.broker_id == other and described.broker_epoch == cluster.brokers[other].broker_epoch
