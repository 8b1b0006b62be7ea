"""The same controller on a real ZooKeeper (the embedded server, through the kazoo store): the
controller works with any ``MetadataStore``. Watches arrive on kazoo's threads here, so every wait
is for what the store shows, with a deadline."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from kafka_controller.domain.values import LeaderAndIsr, ReplicaAssignment, TopicPartition
from tests.controller.cluster import Answer, Cluster, wait_until

pytestmark = pytest.mark.zk

TP = TopicPartition("t", 0)
DEADLINE_S = 30.0


@pytest.fixture
def cluster(zk_connect: str) -> Iterator[Cluster]:
    from kafka_controller.zk.kazoo_backend import KazooMetadataStore
    from kafka_controller.zk.security import ZkClientConfig

    def store() -> Any:
        return KazooMetadataStore(
            ZkClientConfig(zk_connect, session_timeout_ms=6000, connection_timeout_ms=20000)
        )

    c = Cluster(store_factory=store)
    yield c
    c.close()


def _state(cluster: Cluster, leader: int, leader_epoch: int, controller_epoch: int) -> bool:
    s = cluster.state(TP)
    return s is not None and (s.leader_and_isr.leader, s.leader_and_isr.leader_epoch, s.controller_epoch) == (
        leader,
        leader_epoch,
        controller_epoch,
    )


def test_election_creation_failover_and_controlled_shutdown(cluster: Cluster) -> None:
    for b in (0, 1, 2):
        cluster.start(b, launch=False)
    for b in (0, 1, 2):
        cluster.launch(b)
    wait_until(lambda: cluster.admin.get_controller_id() in (0, 1, 2), "a controller", DEADLINE_S)
    first = cluster.admin.get_controller_id()
    assert cluster.controller_epoch() == (1, 1)
    cluster.admin.create_topic("t", {0: _ra([0, 1, 2])})
    wait_until(lambda: _state(cluster, 0, 0, 1), "t-0 created with leader 0", DEADLINE_S)

    # Controlled shutdown of the leader moves leadership to 1 and shrinks the ISR.
    wait_until(lambda: cluster.brokers[first].controller.is_active, "the controller is active", DEADLINE_S)
    answer = Answer()
    cluster.brokers[first].controller.controlled_shutdown(0, cluster.brokers[0].epoch, answer)
    assert answer.get(DEADLINE_S) == set()
    state = cluster.state(TP)
    assert state is not None and (state.leader_and_isr.leader, state.leader_and_isr.isr) == (1, (1, 2))

    # The controller dies: another takes over with epoch 2 and the partition keeps a leader.
    cluster.stop(first)
    wait_until(
        lambda: cluster.admin.get_controller_id() not in (None, first) and cluster.controller_epoch()[0] == 2,
        "a new controller with epoch 2",
        DEADLINE_S,
    )
    second = cluster.admin.get_controller_id()
    assert second is not None
    wait_until(
        lambda: cluster.brokers[second].controller.is_active, "the new controller is active", DEADLINE_S
    )
    wait_until(
        lambda: (s := cluster.state(TP)) is not None and s.leader_and_isr.leader not in (-1, first),
        "t-0 is led by a live broker",
        DEADLINE_S,
    )


def test_reassignment_on_zookeeper(cluster: Cluster) -> None:
    for b in (0, 1):
        cluster.start(b, launch=False)
    for b in (0, 1):
        cluster.launch(b)
    wait_until(lambda: cluster.admin.get_controller_id() in (0, 1), "a controller", DEADLINE_S)
    cluster.admin.create_topic("t", {0: _ra([0])})
    wait_until(lambda: _state(cluster, 0, 0, 1), "t-0 created", DEADLINE_S)
    cluster.admin.create_partition_reassignment({TP: [1]})
    wait_until(lambda: _state(cluster, 0, 1, 1), "reassignment started (A1)", DEADLINE_S)
    controller = cluster.brokers[cluster.admin.get_controller_id() or 0].controller
    current = cluster.state(TP)
    assert current is not None
    answer = Answer()
    lai = current.leader_and_isr
    controller.alter_isr(
        0, cluster.brokers[0].epoch, {TP: LeaderAndIsr(0, lai.leader_epoch, (0, 1), lai.zk_version)}, answer
    )
    assert isinstance(answer.get(DEADLINE_S), dict)
    wait_until(lambda: _state(cluster, 1, 3, 1), "reassignment completed at leader epoch 3", DEADLINE_S)
    wait_until(
        lambda: not cluster.admin.reassign_partitions_in_progress(), "the znode was removed", DEADLINE_S
    )


def _ra(replicas: list[int]) -> ReplicaAssignment:
    return ReplicaAssignment.of(replicas)
