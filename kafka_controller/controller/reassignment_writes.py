"""The store writes of a reassignment, batched across partitions: the leader-epoch bump (phases A1
and B3) and the topic znode writes (U1 and B6).

Kafka makes these one partition at a time (``updateLeaderEpoch``, ``updateReplicaAssignmentForPartition``):
a read and a conditional write per bump, a whole topic znode write per partition. Here a bump is one
batched read and one batched conditional write for all the partitions given (those that meet
BADVERSION read again and retried, as Kafka retries one), and each topic znode is written once with
all its partitions, every topic in one fenced batch. Functions of what they use (the store, the
context, the audit), so that the phases that call them stay one partition-agnostic sequence.

Failures are per partition, in ``failed``; ``ControllerMovedError`` is raised (the controller
resigns).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kafka_controller.controller.auditing import ControllerAuditSink
from kafka_controller.controller.services import log
from kafka_controller.core.context import ControllerContext
from kafka_controller.domain.audit_records import OUTCOME_FAILED, OUTCOME_OK, PartitionTransition
from kafka_controller.domain.errors import (
    IllegalControllerStateError,
    MetadataStoreError,
    NoNodeError,
    StateChangeFailedError,
)
from kafka_controller.domain.states import PartitionState
from kafka_controller.domain.values import (
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
    TopicPartition,
)
from kafka_controller.ports import MetadataStore, PartitionStateRead, TopicIdReplicaAssignment

__all__ = ["is_reassignment_complete", "update_leader_epochs", "write_topic_assignments"]

#: The audit's strategy column for a reassignment's leader-epoch bump (no election takes place).
_EPOCH_BUMP = "ReassignmentLeaderEpochBump"


def is_reassignment_complete(
    assignment: ReplicaAssignment, state: LeaderIsrAndControllerEpoch | None
) -> bool:
    """Kafka's ``isReassignmentComplete``: nothing moving, or every target replica in the ISR (as
    read from the store, not the cache)."""
    if not assignment.is_being_reassigned:
        return True
    return state is not None and set(assignment.target_replicas) <= set(state.leader_and_isr.isr)


def update_leader_epochs(
    store: MetadataStore,
    ctx: ControllerContext,
    audit: ControllerAuditSink,
    partitions: Sequence[TopicPartition],
    failed: dict[TopicPartition, Exception],
    states: Mapping[TopicPartition, PartitionStateRead] | None = None,
) -> dict[TopicPartition, LeaderIsrAndControllerEpoch]:
    """Bump each partition's leader epoch (nothing else) so that brokers take the new assignment;
    ``states``: just read, used for the first attempt. Every bump is audited as an Online ->
    Online transition: it writes a leader epoch outside the partition state machine, and the
    audit must account for every leader epoch written (replaying it gives ZooKeeper's state)."""
    updated: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
    records: list[PartitionTransition] = []
    pending = list(partitions)
    reads: Mapping[TopicPartition, PartitionStateRead] | None = states
    try:
        while pending:
            if reads is None or any(tp not in reads for tp in pending):
                reads = store.get_partition_states(pending)
            bumps: dict[TopicPartition, LeaderAndIsr] = {}
            before: dict[TopicPartition, LeaderAndIsr] = {}
            for tp in pending:
                read = reads.get(tp)
                if isinstance(read, MetadataStoreError):
                    failed[tp] = read
                elif read is None:
                    failed[tp] = IllegalControllerStateError(
                        f"Cannot update leader epoch for partition {tp} as leaderAndIsr path is empty. "
                        "This could mean we somehow tried to reassign a partition that doesn't exist"
                    )
                elif read.controller_epoch > ctx.epoch:
                    failed[tp] = StateChangeFailedError(
                        f"Leader and isr path written by another controller (epoch "
                        f"{read.controller_epoch} > {ctx.epoch}). "
                        "Aborting state change by this controller"
                    )
                else:
                    before[tp] = read.leader_and_isr
                    bumps[tp] = read.leader_and_isr.new_epoch_and_zk_version()
            reads = None  # a retry reads again
            if not bumps:
                break
            result = store.update_leader_and_isr(bumps, ctx.epoch, ctx.epoch_zk_version)
            for tp, outcome in result.finished.items():
                if isinstance(outcome, Exception):
                    error = f"{type(outcome).__name__}: {outcome}"
                    records.append(_bump_record(tp, before[tp], None, error))
                    failed[tp] = outcome
                    continue
                records.append(_bump_record(tp, before[tp], outcome))
                leadership = LeaderIsrAndControllerEpoch(outcome, ctx.epoch)
                ctx.put_partition_leadership_info(tp, leadership)
                updated[tp] = leadership
            pending = list(result.to_retry)  # BADVERSION: read again and retry
    finally:
        if records and audit.enabled:
            audit.record(records)
    if updated:
        log.info("Updated leader epoch for %d reassigned partitions", len(updated))
    return updated


def write_topic_assignments(
    store: MetadataStore,
    ctx: ControllerContext,
    assignments: Mapping[TopicPartition, ReplicaAssignment],
    failed: dict[TopicPartition, Exception],
) -> list[TopicPartition]:
    """Write each topic znode once with its partitions' new RS/AR/RR, all topics in one fenced
    batch (the store's ``set_topic_ids`` writes whole topic znodes, ids and assignments);
    returns the partitions written."""
    if not assignments:
        return []
    by_topic: dict[str, list[TopicPartition]] = {}
    for tp in assignments:
        by_topic.setdefault(tp.topic, []).append(tp)
    writes: list[TopicIdReplicaAssignment] = []
    for topic, tps in by_topic.items():
        full = ctx.partition_full_replica_assignment_for_topic(topic)
        full.update((tp, assignments[tp]) for tp in tps)
        writes.append(TopicIdReplicaAssignment(topic, ctx.topic_ids.get(topic), full))
    results = store.set_topic_ids(writes, ctx.epoch_zk_version)
    written: list[TopicPartition] = []
    for topic, tps in by_topic.items():
        error = results.get(topic)
        if error is None:
            written += tps
            continue
        for tp in tps:
            failed[tp] = (
                IllegalControllerStateError(
                    f"Failed to update assignment for {tp} since the topic has no current assignment"
                )
                if isinstance(error, NoNodeError)
                else error
            )
        log.error("Failed to update the assignment of %d partitions of topic %s: %s", len(tps), topic, error)
    if written:
        log.info(
            "Successfully updated assignment of %d partitions in %d topics (first: %s to %s)",
            len(written),
            len(by_topic),
            written[0],
            assignments[written[0]],
        )
    return written


def _bump_record(
    tp: TopicPartition, before: LeaderAndIsr, after: LeaderAndIsr | None, error: str | None = None
) -> PartitionTransition:
    """The audit's row for one leader-epoch bump: Online -> Online, no election."""
    online = PartitionState.ONLINE_PARTITION.kafka_name
    return PartitionTransition(
        tp.topic,
        tp.partition,
        online,
        online,
        OUTCOME_OK if error is None else OUTCOME_FAILED,
        before.leader,
        after.leader if after is not None else None,
        before.isr,
        after.isr if after is not None else None,
        before.leader_epoch,
        after.leader_epoch if after is not None else None,
        _EPOCH_BUMP,
        error=error,
    )
