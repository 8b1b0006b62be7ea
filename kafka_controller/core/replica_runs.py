"""A list of replicas grouped the way the replica state machine moves them, walked once.

Kafka's ``handleStateChanges`` groups the replicas it moves by replica id (``groupBy``, each group
in order of first appearance) and treats each group on its own. A failover's OnlineReplica move
holds 240,000 replicas of 100,000 partitions at RF 3, and two things are built from it: the
LeaderAndIsr and UpdateMetadata states (``request_batch_states.online_replica_states``) and the
audit rows (``ReplicaTransitionRecorder.record_unchanged_replicas``). Both depend on the
partition, not on the replica, and the replicas of one partition come together (the assignments'
order). So the grouping is made here, once, as *runs*: a run is a stretch of consecutive replicas
of one partition, and each group lists the runs its replicas belong to. Each consumer then builds
one value per run and picks a group's values by position, in C (``hotpath.values_at``), instead
of walking the 240,000 replicas again.

What the groups hold is exactly Kafka's grouping: group *k* lists, in order, the run of each
replica with the *k*-th replica id to appear. A partition met again later (the replicas shuffled,
or an equal partition that is not the same object) starts a new run; its values are built again,
equal, so what a group's values say does not change.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kafka_controller.domain.values import PartitionAndReplica, TopicPartition

__all__ = ["ReplicaRuns", "replica_runs"]


@dataclass(frozen=True, slots=True)
class ReplicaRuns:
    """``replicas`` as runs and groups (module docs).

    ``partitions``: each run's partition. ``groups``: each replica id's runs, one entry per replica
    (so a replica listed twice is there twice), the ids in order of first appearance.
    ``runs_by_first_group``: each run's index under the first of the groups its replicas belong
    to, in run order: where a batch queues each partition's UpdateMetadata state, as the grouped
    calls would (the first group's partitions, then the second's not in the first, and so on).
    """

    replicas: Sequence[PartitionAndReplica]
    partitions: list[TopicPartition]
    groups: list[tuple[int, list[int]]]
    runs_by_first_group: list[list[int]]


def replica_runs(replicas: Sequence[PartitionAndReplica]) -> ReplicaRuns:
    """The one walk of ``replicas``: a few C-level steps per replica (see the module docs)."""
    rank_of: dict[int, int] = {}  # replica id -> its group's place (order of first appearance)
    ids: list[int] = []
    groups: list[list[int]] = []
    by_first: list[list[int]] = []
    partitions: list[TopicPartition] = []
    last_tp: TopicPartition | None = None
    run = -1
    first = 0  # the first group among the current run's replicas
    for tp, replica_id in replicas:
        # identity: the context's shared partitions; an equal partition that is not the same
        # object starts a new run (module docs)
        if tp is not last_tp:
            if run >= 0:
                by_first[first].append(run)
            last_tp = tp
            partitions.append(tp)
            run += 1
            first = len(ids)
        rank = rank_of.get(replica_id)
        if rank is None:
            rank = rank_of[replica_id] = len(ids)
            ids.append(replica_id)
            groups.append([])
            by_first.append([])
        groups[rank].append(run)
        if rank < first:
            first = rank
    if run >= 0:
        by_first[first].append(run)
    return ReplicaRuns(replicas, partitions, list(zip(ids, groups, strict=True)), by_first)
