"""Cluster views and in-memory clusters for the Airflow package's pure tests."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from kafka_controller.admin.describe import ClusterView, build_cluster_view
from kafka_controller.domain.values import (
    Broker,
    EndPoint,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
    TopicPartition,
)
from kafka_controller.ports import TopicIdReplicaAssignment

#: ``{"t-0": (replicas, leader, isr)}``
Layout = Mapping[str, tuple[tuple[int, ...], int, tuple[int, ...]]]


def tp(name: str) -> TopicPartition:
    topic, _, p = name.rpartition("-")
    return TopicPartition(topic, int(p))


def broker(b: int) -> Broker:
    return Broker(b, (EndPoint("localhost", 9000 + b),))


def view(live: Iterable[int], layout: Layout, controller: int | None = None) -> ClusterView:
    topics: dict[str, dict[TopicPartition, ReplicaAssignment]] = {}
    states = {}
    for name, (replicas, leader, isr) in layout.items():
        t = tp(name)
        topics.setdefault(t.topic, {})[t] = ReplicaAssignment.of(replicas)
        states[t] = LeaderIsrAndControllerEpoch(LeaderAndIsr(leader, 0, isr, 0), 1)
    return build_cluster_view(
        controller_id=controller,
        controller_epoch=(1, 0) if controller is not None else None,
        brokers={broker(b): 100 + b for b in live},
        topics={t: TopicIdReplicaAssignment(t, None, a) for t, a in topics.items()},
        states=states,
        configs={},
    )


def memory_cluster(
    live: Iterable[int], layout: Layout, configs: Mapping[str, Mapping[str, str]] | None = None
):
    """An in-memory ZooKeeper tree holding ``layout`` with ``live`` brokers registered (each with its
    own session, kept in the returned dict so the registrations stay)."""
    from kafka_controller.dryrun.memory_store import InMemoryMetadataStore
    from kafka_controller.dryrun.memory_zk import InMemoryZooKeeper

    tree = InMemoryZooKeeper()
    admin = InMemoryMetadataStore(tree)
    sessions = {}
    for b in live:
        s = InMemoryMetadataStore(tree, create_paths=False)
        s.register_broker(broker(b))
        sessions[b] = s
    by_topic: dict[str, dict[int, ReplicaAssignment]] = {}
    states = {}
    for name, (replicas, leader, isr) in layout.items():
        t = tp(name)
        by_topic.setdefault(t.topic, {})[t.partition] = ReplicaAssignment.of(replicas)
        states[t] = LeaderIsrAndControllerEpoch(LeaderAndIsr(leader, 3, isr, 0), 1)
    for topic, assignment in by_topic.items():
        admin.create_topic(topic, assignment, dict((configs or {}).get(topic, {})) or None)
    admin.create_partition_states(states, -1)
    return admin, sessions
