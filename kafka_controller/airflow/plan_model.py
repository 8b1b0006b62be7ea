"""What a dry run starts from and what it returns: the live metadata (``ClusterSnapshot``, read in a
fixed number of batched reads) and one action's planned change (``PlannedChange``). The dry run
itself is ``planner.DryRun``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kafka_controller.admin.describe import ClusterView, build_cluster_view
from kafka_controller.domain.audit_records import AuditRecord, PartitionTransition, ReplicaTransition
from kafka_controller.domain.errors import MetadataStoreError
from kafka_controller.domain.values import Broker, LeaderIsrAndControllerEpoch, TopicPartition
from kafka_controller.ports import MetadataStore, TopicIdReplicaAssignment


@dataclass(frozen=True)
class ClusterSnapshot:
    """The live metadata a dry run starts from; ``view`` is it as ``describe`` shows it."""

    controller_id: int | None
    controller_epoch: tuple[int, int] | None
    brokers: Mapping[Broker, int]
    topics: Mapping[str, TopicIdReplicaAssignment]
    states: Mapping[TopicPartition, LeaderIsrAndControllerEpoch]
    configs: Mapping[str, Mapping[str, str]]
    deletions: tuple[str, ...] = ()
    legacy_reassignment: Mapping[TopicPartition, tuple[int, ...]] = field(default_factory=dict)

    @staticmethod
    def read(store: MetadataStore) -> ClusterSnapshot:
        """A fixed number of batched reads, whatever the cluster's size."""
        assignments = store.get_replica_assignment_and_topic_ids(sorted(store.get_all_topics()))
        topics = {t: a for t, a in assignments.items() if not isinstance(a, MetadataStoreError)}
        tps = [tp for a in topics.values() for tp in a.assignment]
        reads = store.get_partition_states(tps) if tps else {}
        configs, _ = store.get_log_configs(list(topics), {})
        return ClusterSnapshot(
            controller_id=store.get_controller_id(),
            controller_epoch=store.get_controller_epoch(),
            brokers=store.get_all_brokers_and_epochs(),
            topics=topics,
            states={tp: r for tp, r in reads.items() if isinstance(r, LeaderIsrAndControllerEpoch)},
            configs=configs,
            deletions=tuple(store.get_topic_deletions()),
            legacy_reassignment=store.get_partition_reassignment(),
        )

    def view(self) -> ClusterView:
        return build_cluster_view(
            controller_id=self.controller_id,
            controller_epoch=self.controller_epoch,
            brokers=self.brokers,
            topics=self.topics,
            states=self.states,
            configs=self.configs,
            deletions=self.deletions,
        )


@dataclass
class PlannedChange:
    """What an action would do. ``transitions`` carry the operation id; everything else is JSON-ready."""

    action: str
    answer: Any
    transitions: list[AuditRecord]
    leaders_moved: dict[str, tuple[int, int]]
    offline_after: list[str]
    unclean_needed: dict[str, list[int]]
    unclean_elected: list[str]

    def summary(self) -> dict[str, Any]:
        parts = sum(isinstance(r, PartitionTransition) for r in self.transitions)
        return {
            "action": self.action,
            "answer": self.answer,
            "partition_transitions": parts,
            "replica_transitions": sum(isinstance(r, ReplicaTransition) for r in self.transitions),
            "leaders_moved": {tp: list(m) for tp, m in sorted(self.leaders_moved.items())},
            "offline_after": self.offline_after,
            "unclean_needed": self.unclean_needed,
            "unclean_elected": self.unclean_elected,
        }
