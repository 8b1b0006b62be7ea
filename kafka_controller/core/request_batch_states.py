"""The per-partition request states of ``ControllerBrokerRequestBatch``, built for large batches.

A failover builds 100,000 LeaderAndIsr and 100,000 UpdateMetadata states in one call; these
functions build them positionally (``domain.requests``' hot-path constructors), unpacking the
leadership tuples rather than reading their fields one by one.
"""

from __future__ import annotations

from collections.abc import Mapping

from kafka_controller.core.context import ControllerContext
from kafka_controller.domain.requests import (
    LeaderAndIsrPartitionState,
    UpdateMetadataPartitionState,
    build_leader_and_isr_partition_state,
    build_update_metadata_partition_state,
)
from kafka_controller.domain.values import (
    LEADER_DURING_DELETE,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
    TopicPartition,
)

__all__ = ["OfflineReplicas", "leader_and_isr_state", "update_metadata_states_like"]


class OfflineReplicas:
    """A partition's offline replicas (dead broker, or its log dir offline) for UpdateMetadata,
    from ``ctx`` as it is now: with no offline log dir, computed once per distinct replica list
    (a few at 100,000 partitions), since the partition then does not matter."""

    def __init__(self, ctx: ControllerContext) -> None:
        self._live = ctx.live_broker_ids
        self._offline_dirs = ctx.replicas_on_offline_dirs
        self._by_replicas: dict[tuple[int, ...], tuple[int, ...]] = {}

    def __call__(self, tp: TopicPartition, replicas: tuple[int, ...]) -> tuple[int, ...]:
        live, offline_dirs = self._live, self._offline_dirs
        if offline_dirs:
            return tuple([r for r in replicas if r not in live or tp in offline_dirs.get(r, ())])
        cached = self._by_replicas.get(replicas)
        if cached is None:
            cached = self._by_replicas[replicas] = tuple([r for r in replicas if r not in live])
        return cached


def leader_and_isr_state(
    tp: TopicPartition,
    leader_isr_and_controller_epoch: LeaderIsrAndControllerEpoch,
    assignment: ReplicaAssignment,
    is_new: bool,
) -> LeaderAndIsrPartitionState:
    topic, partition = tp
    (leader, leader_epoch, isr, zk_version), controller_epoch = leader_isr_and_controller_epoch
    return build_leader_and_isr_partition_state(
        topic,
        partition,
        controller_epoch,
        leader,
        leader_epoch,
        isr,
        zk_version,
        assignment.replicas,
        assignment.adding_replicas,
        assignment.removing_replicas,
        is_new,
    )


def update_metadata_states_like(
    ctx: ControllerContext,
    states: Mapping[TopicPartition, LeaderAndIsrPartitionState],
    queued: dict[TopicPartition, UpdateMetadataPartitionState],
) -> None:
    """Queue in ``queued`` the UpdateMetadata states of partitions whose LeaderAndIsr ``states``
    were just built from ``ctx``'s leadership and assignment, as the batch builds them from
    ``ctx``: the first eight fields (topic to replicas) are the same, so only the offline
    replicas and the deletion marker are left to find."""
    deleting = ctx.topics_to_be_deleted
    offline_replicas = OfflineReplicas(ctx)
    for tp, state in states.items():
        replicas = state.replicas
        offline = offline_replicas(tp, replicas)
        if state.topic in deleting:  # LeaderAndIsr.duringDelete(isr): leader -2, epoch 0, version 0
            topic, partition, controller_epoch, _, _, isr, _, _ = state[:8]
            queued[tp] = build_update_metadata_partition_state(
                topic, partition, controller_epoch, LEADER_DURING_DELETE, 0, isr, 0, replicas, offline
            )
        else:
            queued[tp] = build_update_metadata_partition_state(*state[:8], offline)
