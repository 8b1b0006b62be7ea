"""The cluster at a glance, from ZooKeeper alone: controller and epoch, brokers, and every partition's
leader, ISR and flags (offline, under-replicated, under min ISR, not on its preferred leader).

``read_cluster_view`` does a fixed number of batched reads whatever the cluster's size (brokers,
topics, configs, partition states: one multi-read each); ``build_cluster_view`` is the pure part
that computes the flags, so it is tested without ZooKeeper. The flags follow Kafka's
``TopicCommand``: a partition under reassignment counts its origin replicas as its replication
factor, and a leader that is -1 or not a registered broker makes a partition offline.

Two preferred-leader numbers, because operators mean two things: ``not_preferred_leader`` (flag
``not-preferred-leader``) is a partition with a leader (-1 is none) other than its preferred replica;
``preferred_replica_imbalance`` is Kafka's ``PreferredReplicaImbalanceCount`` exactly (the
controller's gauge): every partition with a state whose leader is not its preferred replica,
offline ones included, topics queued for deletion not, and a preferred replica still being added by
a reassignment counted only once it has joined the ISR (Kafka's ``ControllerContext.hasPreferredLeader``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from kafka_controller.core.context import has_preferred_leader
from kafka_controller.domain.config_keys import MIN_INSYNC_REPLICAS
from kafka_controller.domain.errors import MetadataStoreError
from kafka_controller.domain.values import (
    NO_LEADER,
    Broker,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
    TopicPartition,
)
from kafka_controller.ports import PartitionStateRead, TopicIdReplicaAssignment


class ClusterReader(Protocol):
    """The reads ``read_cluster_view`` needs (a subset of the ``MetadataStore`` port)."""

    def get_controller_id(self) -> int | None: ...
    def get_controller_epoch(self) -> tuple[int, int] | None: ...
    def get_all_brokers_and_epochs(self) -> dict[Broker, int]: ...
    def get_all_topics(self) -> set[str]: ...
    def get_topic_deletions(self) -> list[str]: ...
    def get_replica_assignment_and_topic_ids(
        self, topics: Collection[str]
    ) -> dict[str, TopicIdReplicaAssignment | MetadataStoreError]: ...
    def get_partition_states(
        self, partitions: list[TopicPartition]
    ) -> dict[TopicPartition, PartitionStateRead]: ...
    def get_log_configs(
        self, topics: Collection[str], broker_defaults: Mapping[str, str]
    ) -> tuple[dict[str, dict[str, str]], dict[str, MetadataStoreError]]: ...


@dataclass(frozen=True, slots=True)
class PartitionView:
    topic: str
    partition: int
    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    removing_replicas: tuple[int, ...]
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    zk_version: int
    offline: bool
    under_replicated: bool
    under_min_isr: bool
    not_preferred_leader: bool
    reassigning: bool
    error: str | None = None
    #: counted by Kafka's PreferredReplicaImbalanceCount (see the module docstring)
    preferred_replica_imbalance: bool = False

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    @property
    def flags(self) -> list[str]:
        names = ("offline", "under_replicated", "under_min_isr", "not_preferred_leader", "reassigning")
        return [n.replace("_", "-") for n in names if getattr(self, n)]


@dataclass(frozen=True, slots=True)
class BrokerSummary:
    id: int
    endpoints: tuple[str, ...]
    rack: str | None
    epoch: int
    leaders: int
    replicas: int
    preferred: int  # partitions whose preferred (first) replica is this broker


@dataclass(frozen=True, slots=True)
class TopicView:
    name: str
    topic_id: str | None
    partitions: int
    replication_factor: int
    config: dict[str, str]
    marked_for_deletion: bool
    error: str | None = None


@dataclass(frozen=True)
class ClusterView:
    controller_id: int | None
    controller_epoch: int | None
    controller_epoch_zk_version: int | None
    brokers: tuple[BrokerSummary, ...]
    topics: tuple[TopicView, ...]
    partitions: tuple[PartitionView, ...]
    summary: dict[str, Any] = field(default_factory=dict)

    def partition(self, topic: str, partition: int) -> PartitionView | None:
        for p in self.partitions:
            if p.topic == topic and p.partition == partition:
                return p
        return None

    def leaders_on(self, broker_id: int) -> list[TopicPartition]:
        return [p.topic_partition for p in self.partitions if p.leader == broker_id]

    def to_json(self) -> dict[str, Any]:
        out = {
            "controller": {
                "broker_id": self.controller_id,
                "epoch": self.controller_epoch,
                "epoch_zk_version": self.controller_epoch_zk_version,
            },
            "brokers": [asdict(b) for b in self.brokers],
            "topics": [asdict(t) for t in self.topics],
            "partitions": [{**asdict(p), "flags": p.flags} for p in self.partitions],
            "summary": dict(self.summary),
        }
        return out


def _partition_view(
    tp: TopicPartition,
    ra: ReplicaAssignment,
    read: PartitionStateRead,
    live: Collection[int],
    min_isr: int,
    deleting: bool = False,
) -> PartitionView:
    origin = ra.origin_replicas if ra.is_being_reassigned else ra.replicas
    if isinstance(read, LeaderIsrAndControllerEpoch):
        lai = read.leader_and_isr
        leader, epoch, isr, ce, zkv, error = (
            lai.leader,
            lai.leader_epoch,
            lai.isr,
            read.controller_epoch,
            lai.zk_version,
            None,
        )
    else:
        leader, epoch, isr, ce, zkv = NO_LEADER, -1, (), -1, -1
        error = "no state znode" if read is None else str(read)
    offline = leader == NO_LEADER or leader not in live
    return PartitionView(
        topic=tp.topic,
        partition=tp.partition,
        replicas=ra.replicas,
        adding_replicas=ra.adding_replicas,
        removing_replicas=ra.removing_replicas,
        leader=leader,
        leader_epoch=epoch,
        isr=isr,
        controller_epoch=ce,
        zk_version=zkv,
        offline=offline,
        under_replicated=len(isr) < len(origin),
        under_min_isr=len(isr) < min_isr,
        not_preferred_leader=bool(ra.replicas) and leader != NO_LEADER and leader != ra.replicas[0],
        reassigning=ra.is_being_reassigned,
        error=error,
        preferred_replica_imbalance=(
            isinstance(read, LeaderIsrAndControllerEpoch)
            and not deleting
            and not has_preferred_leader(ra, read)
        ),
    )


def build_cluster_view(
    *,
    controller_id: int | None,
    controller_epoch: tuple[int, int] | None,
    brokers: Mapping[Broker, int],
    topics: Mapping[str, TopicIdReplicaAssignment | MetadataStoreError],
    states: Mapping[TopicPartition, PartitionStateRead],
    configs: Mapping[str, Mapping[str, str]],
    deletions: Collection[str] = (),
) -> ClusterView:
    """Pure: the flags, per-broker counts and the summary from what ZooKeeper returned."""
    live = {b.id for b in brokers}
    partitions: list[PartitionView] = []
    topic_views: list[TopicView] = []
    for name in sorted(topics):
        t = topics[name]
        config = dict(configs.get(name, {}))
        if isinstance(t, MetadataStoreError):
            topic_views.append(TopicView(name, None, 0, 0, config, name in deletions, str(t)))
            continue
        min_isr = _min_isr(config)
        items = sorted(t.assignment.items(), key=lambda kv: kv[0].partition)
        for tp, ra in items:
            partitions.append(_partition_view(tp, ra, states.get(tp), live, min_isr, name in deletions))
        rf = len(items[0][1].origin_replicas) if items else 0
        topic_views.append(TopicView(name, t.topic_id, len(items), rf, config, name in deletions))
    leaders = Counter(p.leader for p in partitions if not p.offline)
    replicas = Counter(r for p in partitions for r in p.replicas)
    preferred = Counter(p.replicas[0] for p in partitions if p.replicas)
    broker_views = tuple(
        BrokerSummary(
            b.id,
            tuple(ep.connection_string() for ep in b.endpoints),
            b.rack,
            epoch,
            leaders[b.id],
            replicas[b.id],
            preferred[b.id],
        )
        for b, epoch in sorted(brokers.items(), key=lambda kv: kv[0].id)
    )
    ce = controller_epoch or (None, None)
    view = ClusterView(controller_id, ce[0], ce[1], broker_views, tuple(topic_views), tuple(partitions))
    view.summary.update(_summary(view))
    return view


def _min_isr(config: Mapping[str, str]) -> int:
    try:
        return max(1, int(config.get(MIN_INSYNC_REPLICAS, "1")))
    except ValueError:
        return 1


def _summary(view: ClusterView) -> dict[str, Any]:
    parts = view.partitions
    with_leader = [p for p in parts if not p.offline]
    on_preferred = sum(1 for p in with_leader if not p.not_preferred_leader)
    leader_counts = [b.leaders for b in view.brokers]
    return {
        "brokers": len(view.brokers),
        "topics": len(view.topics),
        "partitions": len(parts),
        "offline": sum(p.offline for p in parts),
        "under_replicated": sum(p.under_replicated for p in parts),
        "under_min_isr": sum(p.under_min_isr for p in parts),
        "not_preferred_leader": sum(p.not_preferred_leader for p in parts),
        "preferred_replica_imbalance": sum(p.preferred_replica_imbalance for p in parts),
        "reassigning": sum(p.reassigning for p in parts),
        "preferred_leader_share": round(on_preferred / len(parts), 4) if parts else 1.0,
        "leader_skew": (max(leader_counts) - min(leader_counts)) if leader_counts else 0,
    }


def read_cluster_view(reader: ClusterReader, topics: Collection[str] | None = None) -> ClusterView:
    """Read everything ``build_cluster_view`` needs with batched reads (a handful of round trips)."""
    controller_id = reader.get_controller_id()
    epoch = reader.get_controller_epoch()
    brokers = reader.get_all_brokers_and_epochs()
    names = sorted(reader.get_all_topics() if topics is None else set(topics))
    assignments = reader.get_replica_assignment_and_topic_ids(names)
    tps = [
        tp
        for t in assignments.values()
        if not isinstance(t, MetadataStoreError)
        for tp in sorted(t.assignment, key=lambda x: x.partition)
    ]
    states = reader.get_partition_states(tps) if tps else {}
    configs, _failures = reader.get_log_configs(list(assignments), {})
    deletions = set(reader.get_topic_deletions())
    return build_cluster_view(
        controller_id=controller_id,
        controller_epoch=epoch,
        brokers=brokers,
        topics=assignments,
        states=states,
        configs=configs,
        deletions=deletions,
    )
