"""The phases of a KIP-455 reassignment (spec §8.8): Kafka's ``onPartitionReassignment`` and the
steps it calls (U, A1-A2, B1-B8; see ``controller.reassignment`` for what each phase does), plus
completion and resumption. ``Reassignments`` (the entry points) inherits these."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from kafka_controller.controller.base import ControllerBase, log, partition_state_path
from kafka_controller.controller.events import (
    ZkPartitionReassignment,
)
from kafka_controller.core.strategies import ReassignPartitionLeaderElectionStrategy
from kafka_controller.domain.audit_records import OUTCOME_FAILED, OUTCOME_OK, PartitionTransition
from kafka_controller.domain.errors import (
    IllegalControllerStateError,
    MetadataStoreError,
    NoNodeError,
    StateChangeFailedError,
    ZNodeDecodeError,
)
from kafka_controller.domain.states import PartitionState, ReplicaState
from kafka_controller.domain.values import (
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    PartitionAndReplica,
    ReplicaAssignment,
    TopicPartition,
)

__all__ = ["ReassignmentPhases"]

#: The audit's strategy column for a reassignment's leader-epoch bump (no election takes place).
_EPOCH_BUMP = "ReassignmentLeaderEpochBump"


class ReassignmentPhases(ControllerBase):
    """Mixin: driving one partition's reassignment through its phases."""

    def on_partition_reassignment(self, tp: TopicPartition, reassignment: ReplicaAssignment) -> None:
        ctx = self.controller_context
        self.topic_deletion_manager.mark_topic_ineligible_for_deletion(
            {tp.topic}, "topic reassignment in progress"
        )
        self.update_current_reassignment(tp, reassignment)
        adding = reassignment.adding_replicas
        removing = reassignment.removing_replicas
        rsm = self.replica_state_machine
        if not self.is_reassignment_complete(tp, reassignment):
            self.update_leader_epoch_and_send_request(tp, reassignment)  # A1
            for replica in adding:  # A2: one call per replica, as Kafka
                rsm.handle_state_changes([PartitionAndReplica(tp, replica)], ReplicaState.NEW_REPLICA)
            return
        rsm.handle_state_changes(
            [PartitionAndReplica(tp, r) for r in adding], ReplicaState.ONLINE_REPLICA
        )  # B1
        completed = ReplicaAssignment(reassignment.target_replicas)
        ctx.update_partition_full_replica_assignment(tp, completed)  # B2
        self.move_reassigned_partition_leader_if_required(tp, completed)  # B3
        self.stop_removed_replicas_of_reassigned_partition(tp, removing)  # B4, B5
        self.update_replica_assignment_for_partition(tp, completed)  # B6
        self.remove_partition_from_reassigning_partitions(tp, completed)  # B7
        self.send_update_metadata_request(sorted(ctx.live_or_shutting_down_broker_ids), {tp})  # B8
        self.topic_deletion_manager.resume_deletion_for_topics({tp.topic})

    def update_current_reassignment(self, tp: TopicPartition, reassignment: ReplicaAssignment) -> None:
        ctx = self.controller_context
        current = ctx.partition_full_replica_assignment(tp)
        if current != reassignment:
            self.update_replica_assignment_for_partition(tp, reassignment)  # U1
            ctx.update_partition_full_replica_assignment(tp, reassignment)  # U2
            dropped = [r for r in current.replicas if r not in reassignment.replicas]  # U3
            if dropped:
                self.stop_removed_replicas_of_reassigned_partition(tp, dropped)
        if not self.config.is_alter_isr_enabled:
            self.store.watch_node(partition_state_path(tp), self._on_partition_state)
        ctx.partitions_being_reassigned.add(tp)

    def is_reassignment_complete(self, tp: TopicPartition, assignment: ReplicaAssignment) -> bool:
        """Complete when every target replica is in the ISR, read from the store (not the cache)."""
        if not assignment.is_being_reassigned:
            return True
        read = self._read_state(tp)
        return read is not None and set(assignment.target_replicas) <= set(read.leader_and_isr.isr)

    def update_leader_epoch_and_send_request(self, tp: TopicPartition, assignment: ReplicaAssignment) -> None:
        updated = self.update_leader_epoch(tp)
        if updated is None:
            log.error("Failed to send LeaderAndIsr for reassigned partition %s: leader epoch not updated", tp)
            return
        batch = self.broker_request_batch
        try:
            batch.new_batch()
            batch.add_leader_and_isr_request_for_brokers(
                assignment.origin_replicas, tp, updated, assignment, False
            )
            batch.add_leader_and_isr_request_for_brokers(
                assignment.adding_replicas, tp, updated, assignment, True
            )
            batch.send_requests_to_brokers(self.controller_context.epoch)
        except IllegalControllerStateError as e:
            self.handle_illegal_state(e)
        log.info(
            "Sent LeaderAndIsr %s for reassigned partition %s with assignment %s", updated, tp, assignment
        )

    def update_leader_epoch(self, tp: TopicPartition) -> LeaderIsrAndControllerEpoch | None:
        """Bump the leader epoch (nothing else) so that brokers take the new assignment; retried
        on BADVERSION, after a fresh read."""
        ctx = self.controller_context
        while True:
            read = self._read_state(tp)
            if read is None:
                raise IllegalControllerStateError(
                    f"Cannot update leader epoch for partition {tp} as leaderAndIsr path is empty. This "
                    "could mean we somehow tried to reassign a partition that doesn't exist"
                )
            if read.controller_epoch > ctx.epoch:
                raise StateChangeFailedError(
                    f"Leader and isr path written by another controller (epoch {read.controller_epoch} > "
                    f"{ctx.epoch}). Aborting state change by this controller"
                )
            new = read.leader_and_isr.new_epoch_and_zk_version()
            result = self.store.update_leader_and_isr({tp: new}, ctx.epoch, ctx.epoch_zk_version)
            outcome = result.finished.get(tp)
            if outcome is None:
                continue  # BADVERSION: re-read and retry
            if isinstance(outcome, Exception):
                self._audit_epoch_bump(tp, read.leader_and_isr, None, f"{type(outcome).__name__}: {outcome}")
                raise outcome
            self._audit_epoch_bump(tp, read.leader_and_isr, outcome)
            leadership = LeaderIsrAndControllerEpoch(outcome, ctx.epoch)
            ctx.put_partition_leadership_info(tp, leadership)
            log.info("Updated leader epoch for partition %s to %d", tp, outcome.leader_epoch)
            return leadership

    def _audit_epoch_bump(
        self, tp: TopicPartition, before: LeaderAndIsr, after: LeaderAndIsr | None, error: str | None = None
    ) -> None:
        """Record the bump as an Online -> Online transition: it writes a new leader epoch to
        ZooKeeper outside the partition state machine, and the audit log must account for every
        leader epoch written (replaying it gives ZooKeeper's state)."""
        if not self.audit.enabled:
            return
        online = PartitionState.ONLINE_PARTITION.kafka_name
        self.audit.record(
            [
                PartitionTransition(
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
            ]
        )

    def move_reassigned_partition_leader_if_required(
        self, tp: TopicPartition, assignment: ReplicaAssignment
    ) -> None:
        ctx = self.controller_context
        info = ctx.partition_leadership_info(tp)
        leader = info.leader_and_isr.leader if info is not None else -1
        if leader in assignment.replicas and ctx.is_replica_online(leader, tp):
            self.update_leader_epoch_and_send_request(tp, assignment)
        else:
            self.partition_state_machine.handle_state_changes(
                [tp], PartitionState.ONLINE_PARTITION, ReassignPartitionLeaderElectionStrategy()
            )

    def stop_removed_replicas_of_reassigned_partition(
        self, tp: TopicPartition, removed: Sequence[int]
    ) -> None:
        """Four separate RSM calls, as Kafka: offline, deletion started, successful, gone. The
        deletion's success is not awaited."""
        replicas = [PartitionAndReplica(tp, r) for r in removed]
        rsm = self.replica_state_machine
        for target in (
            ReplicaState.OFFLINE_REPLICA,
            ReplicaState.REPLICA_DELETION_STARTED,
            ReplicaState.REPLICA_DELETION_SUCCESSFUL,
            ReplicaState.NON_EXISTENT_REPLICA,
        ):
            rsm.handle_state_changes(replicas, target)

    def update_replica_assignment_for_partition(
        self, tp: TopicPartition, assignment: ReplicaAssignment
    ) -> None:
        """Write the topic znode with this partition's new RS/AR/RR (fenced)."""
        ctx = self.controller_context
        topic_assignment = ctx.partition_full_replica_assignment_for_topic(tp.topic)
        topic_assignment[tp] = assignment
        try:
            self.store.set_topic_assignment(
                tp.topic, ctx.topic_ids.get(tp.topic), topic_assignment, ctx.epoch_zk_version
            )
        except NoNodeError:
            raise IllegalControllerStateError(
                f"Failed to update assignment for {tp} since the topic has no current assignment"
            ) from None
        log.info("Successfully updated assignment of partition %s to %s", tp, assignment)

    def remove_partition_from_reassigning_partitions(
        self, tp: TopicPartition, assignment: ReplicaAssignment
    ) -> None:
        ctx = self.controller_context
        if tp not in ctx.partitions_being_reassigned:
            raise IllegalControllerStateError(
                f"Cannot remove a reassigning partition {tp} because it is not present in memory"
            )
        if not self.config.is_alter_isr_enabled:
            self.store.unwatch(partition_state_path(tp))
        target = assignment.replicas
        self.maybe_remove_from_zk_reassignment(lambda p, replicas: p == tp and tuple(replicas) == target)
        ctx.partitions_being_reassigned.discard(tp)

    def maybe_remove_from_zk_reassignment(
        self, should_remove: Callable[[TopicPartition, Sequence[int]], bool]
    ) -> None:
        """Drop matching entries from ``/admin/reassign_partitions``; delete it when it empties
        (and re-arm its creation watch by enqueueing ZkPartitionReassignment)."""
        if not self.store.reassign_partitions_in_progress():
            return
        ctx = self.controller_context
        pending = self._read_zk_reassignment()
        remaining = {tp: r for tp, r in pending.items() if not should_remove(tp, r)}
        log.info(
            "Removing partitions %s from the list of reassigned partitions in zookeeper",
            sorted(pending.keys() - remaining.keys()),
        )
        if not remaining:
            log.info("No more partitions need to be reassigned. Deleting zk path /admin/reassign_partitions")
            self.store.delete_partition_reassignment(ctx.epoch_zk_version)
            self.enqueue(ZkPartitionReassignment())
        else:
            self.store.set_or_create_partition_reassignment(remaining, ctx.epoch_zk_version)

    def maybe_complete_reassignment(self, tp: TopicPartition) -> None:
        reassignment = self.controller_context.partition_full_replica_assignment(tp)
        if self.is_reassignment_complete(tp, reassignment):
            log.info(
                "Target replicas %s have all caught up with the leader for reassigning partition %s",
                reassignment.target_replicas,
                tp,
            )
            self.on_partition_reassignment(tp, reassignment)

    def maybe_resume_reassignments(
        self, should_resume: Callable[[TopicPartition, ReplicaAssignment], bool]
    ) -> None:
        ctx = self.controller_context
        for tp in list(ctx.partitions_being_reassigned):
            assignment = ctx.partition_full_replica_assignment(tp)
            if should_resume(tp, assignment):
                self.on_partition_reassignment(tp, assignment)

    # ------------------------------------------------------------------ helpers
    def _read_zk_reassignment(self) -> dict[TopicPartition, tuple[int, ...]]:
        try:
            return self.store.get_partition_reassignment()
        except ZNodeDecodeError as e:
            log.error("Ignoring /admin/reassign_partitions: %s", e)
            return {}

    def _read_state(self, tp: TopicPartition) -> LeaderIsrAndControllerEpoch | None:
        read = self.store.get_partition_states([tp]).get(tp)
        if isinstance(read, MetadataStoreError):
            raise read
        return read
