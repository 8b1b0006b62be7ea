"""Three brokers whose only listener is SSL with client certificates required: the controller's
requests, the replica fetchers and AlterIsr all cross TLS (nothing else could reach a broker),
so a controller is elected, a new topic's partitions are led with a full ISR, and a controlled
shutdown moves leadership, as on a plaintext cluster."""

from __future__ import annotations

from collections.abc import Callable

from kafka_controller.broker.server import BrokerServer
from kafka_controller.domain.values import ReplicaAssignment, TopicPartition
from kafka_controller.dryrun.memory_store import InMemoryMetadataStore
from kafka_controller.dryrun.memory_zk import InMemoryZooKeeper
from tests.broker.helpers import wait_until
from tests.security.conftest import Pki

TOPIC = "secured"
TPS = [TopicPartition(TOPIC, p) for p in range(3)]


def _states(zk: InMemoryMetadataStore) -> dict[int, tuple[int, tuple[int, ...]]]:
    out = {}
    for tp, s in zk.get_partition_states(TPS).items():
        if s is not None and not isinstance(s, Exception):
            out[tp.partition] = (s.leader_and_isr.leader, tuple(sorted(s.leader_and_isr.isr)))
    return out


def test_a_cluster_on_an_ssl_inter_broker_listener_elects_leads_and_moves_leaders(
    pki: Pki, start_broker: Callable[..., BrokerServer]
) -> None:
    tree = InMemoryZooKeeper()
    zk = InMemoryMetadataStore(tree)
    settings = {
        "listeners": "SSL://127.0.0.1:0",
        "security.inter.broker.protocol": "SSL",
        "controlled.shutdown.retry.backoff.ms": "200",
        "replica.lag.time.max.ms": "2000",
        **pki.broker_tls(**{"ssl.client.auth": "required"}),
    }
    brokers = {b: start_broker(b, settings, tree) for b in (1, 2, 3)}
    try:
        wait_until(
            lambda: zk.get_controller_id() is not None and len(zk.get_sorted_broker_list()) == 3,
            "a controller and three registered brokers",
        )
        for broker in brokers.values():
            assert [ep.listener_name for ep in broker.broker_info.endpoints] == ["SSL"]  # type: ignore[union-attr]
        zk.create_topic(
            TOPIC, {p: ReplicaAssignment.of([p + 1, p % 3 + 2 if p < 2 else 1]) for p in range(3)}
        )
        wait_until(
            lambda: {p: len(isr) for p, (_, isr) in _states(zk).items()} == {0: 2, 1: 2, 2: 2},
            "every partition led with a full ISR (AlterIsr and fetches over TLS)",
        )
        assert {p: leader for p, (leader, _) in _states(zk).items()} == {0: 1, 1: 2, 2: 3}
        for b, broker in brokers.items():  # each leader learnt it from the controller, over TLS
            wait_until(
                lambda broker=broker, b=b: (
                    TopicPartition(TOPIC, b - 1) in broker.replica_manager.partitions_led()
                ),
                f"broker {b} to lead {TOPIC}-{b - 1}",
            )

        controller = zk.get_controller_id()
        other = next(b for b in brokers if b != controller)
        assert brokers[other].shutdown() is True  # controlled: the controller moved its leadership
        assert all(leader != other for leader, _ in _states(zk).values())
    finally:
        zk.close()


def test_the_controller_reaches_brokers_on_the_control_plane_listener(
    pki: Pki, start_broker: Callable[..., BrokerServer]
) -> None:
    tree = InMemoryZooKeeper()
    zk = InMemoryMetadataStore(tree)
    settings = {
        "listeners": "PLAINTEXT://127.0.0.1:0,CONTROL://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROL:SSL",
        "control.plane.listener.name": "CONTROL",
        **pki.broker_tls(**{"listener.name.control.ssl.client.auth": "required"}),
    }
    brokers = {b: start_broker(b, settings, tree) for b in (1, 2)}
    try:
        wait_until(
            lambda: zk.get_controller_id() is not None and len(zk.get_sorted_broker_list()) == 2,
            "a controller and two registered brokers",
        )
        other = brokers[3 - zk.get_controller_id()]  # type: ignore[operator]
        zk.create_topic(TOPIC, {0: ReplicaAssignment.of([other.broker_id])})
        wait_until(
            lambda: TopicPartition(TOPIC, 0) in other.replica_manager.partitions_led(),
            "the other broker to lead the new topic (a LeaderAndIsr over the control plane)",
        )
        assert other.transport.connections_by_listener["CONTROL"] >= 1
    finally:
        zk.close()
