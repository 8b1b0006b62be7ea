"""Partition reassignment, KIP-455 (spec §8.8, §11 item 24).

A reassignment is persisted in the topic znode as RS (all replicas), AR (adding) and RR
(removing) and then driven in phases, each re-entered from scratch when something changes (the
target joins the ISR, a broker comes back, the controller fails over):

* U — record the new RS/AR/RR in the store and the context; stop replicas a previous
  reassignment added that this one drops.
* A — not complete yet (TRS not all in the ISR): bump the leader epoch so that every replica
  learns the new RS (A1), and start the adding replicas (A2).
* B — complete: AR online (B1), RS := TRS (B2), move the leader if needed (B3), stop and delete
  RR (B4/B5), persist RS = TRS (B6), drop the request (B7), tell every broker (B8).

Requests arrive through ``/admin/reassign_partitions`` (not validated, as in Kafka) or the
AlterPartitionReassignments API (validated); the API wins over a pending ZooKeeper request.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence

from kafka_controller.controller.base import ControllerBase, log, partition_state_path
from kafka_controller.controller.events import (
    API_ERROR_NONE,
    AlterReassignmentsCallback,
    ApiError,
    ListReassignmentsCallback,
    ZkPartitionReassignment,
)
from kafka_controller.core.strategies import ReassignPartitionLeaderElectionStrategy
from kafka_controller.domain.audit_records import OUTCOME_FAILED, OUTCOME_OK, PartitionTransition
from kafka_controller.domain.errors import (
    ControllerMovedError,
    IllegalControllerStateError,
    MetadataStoreError,
    NoNodeError,
    StateChangeFailedError,
    ZNodeDecodeError,
)
from kafka_controller.domain.requests import Errors
from kafka_controller.domain.states import PartitionState, ReplicaState
from kafka_controller.domain.values import (
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    PartitionAndReplica,
    ReplicaAssignment,
    TopicPartition,
)

#: The audit's strategy column for a reassignment's leader-epoch bump (no election takes place).
_EPOCH_BUMP = "ReassignmentLeaderEpochBump"
_UNKNOWN_PARTITION = ApiError(Errors.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")


class Reassignments(ControllerBase):
    """Mixin: ZkPartitionReassignment, ApiPartitionReassignment, PartitionReassignmentIsrChange,
    ListPartitionReassignments."""

    # ------------------------------------------------------------------ entry points
    def process_zk_partition_reassignment(self) -> set[TopicPartition]:
        """Trigger what ``/admin/reassign_partitions`` asks for; returns the partitions started."""
        if not self.is_active or not self.store.watch_partition_reassignment(self._on_reassign_partitions):
            return set()
        results: dict[TopicPartition, ApiError] = {}
        to_reassign: dict[TopicPartition, ReplicaAssignment] = {}
        for tp, target in self._read_zk_reassignment().items():
            built = self.maybe_build_reassignment(tp, target)
            if built is None:
                results[tp] = ApiError(Errors.NO_REASSIGNMENT_IN_PROGRESS)
            else:
                to_reassign[tp] = built
        results.update(self.maybe_trigger_partition_reassignment(to_reassign))
        failed = {tp for tp, e in results.items() if not e.is_success}
        if failed:
            self.maybe_remove_from_zk_reassignment(lambda tp, _replicas: tp in failed)
        return {tp for tp, e in results.items() if e.is_success}

    def process_api_partition_reassignment(
        self,
        reassignments: Mapping[TopicPartition, Sequence[int] | None],
        callback: AlterReassignmentsCallback,
    ) -> None:
        if not self.is_active:
            callback(ApiError(Errors.NOT_CONTROLLER))
            return
        results: dict[TopicPartition, ApiError] = {}
        to_reassign: dict[TopicPartition, ReplicaAssignment] = {}
        for tp, target in reassignments.items():
            error = self.validate_replicas(tp, target) if target is not None else None
            if error is not None:
                results[tp] = error
                continue
            built = self.maybe_build_reassignment(tp, target)
            if built is None:
                results[tp] = ApiError(Errors.NO_REASSIGNMENT_IN_PROGRESS)
            else:
                to_reassign[tp] = built
        # The latest request wins: an API request overrides a pending ZooKeeper one.
        self.maybe_remove_from_zk_reassignment(lambda tp, _replicas: tp in to_reassign)
        results.update(self.maybe_trigger_partition_reassignment(to_reassign))
        callback(results)

    def process_partition_reassignment_isr_change(self, tp: TopicPartition) -> None:
        if self.is_active and tp in self.controller_context.partitions_being_reassigned:
            self.maybe_complete_reassignment(tp)

    def process_list_partition_reassignments(
        self, partitions: Collection[TopicPartition] | None, callback: ListReassignmentsCallback
    ) -> None:
        if not self.is_active:
            callback(ApiError(Errors.NOT_CONTROLLER))
            return
        ctx = self.controller_context
        wanted = list(ctx.partitions_being_reassigned) if partitions is None else partitions
        results: dict[TopicPartition, ReplicaAssignment] = {}
        for tp in wanted:
            assignment = ctx.partition_full_replica_assignment(tp)
            if assignment.is_being_reassigned:
                results[tp] = assignment
        callback(results)

    # ------------------------------------------------------------------ building and validating
    def validate_replicas(self, tp: TopicPartition, replicas: Sequence[int]) -> ApiError | None:
        if not replicas:
            return ApiError(
                Errors.INVALID_REPLICA_ASSIGNMENT, "Empty replica list specified in partition reassignment."
            )
        if len(set(replicas)) != len(replicas):
            return ApiError(
                Errors.INVALID_REPLICA_ASSIGNMENT,
                f"Duplicate replica ids in partition reassignment replica list: {list(replicas)}",
            )
        if any(r < 0 for r in replicas):
            return ApiError(
                Errors.INVALID_REPLICA_ASSIGNMENT, f"Invalid broker id in replica list: {list(replicas)}"
            )
        ctx = self.controller_context
        adding = ctx.partition_full_replica_assignment(tp).reassign_to(replicas).adding_replicas
        live = ctx.live_broker_ids
        if not set(adding) <= live:
            return ApiError(
                Errors.INVALID_REPLICA_ASSIGNMENT,
                f"Replica assignment has brokers that are not alive. Replica list: {list(adding)}, "
                f"live broker list: {sorted(live)}",
            )
        return None

    def maybe_build_reassignment(
        self, tp: TopicPartition, target: Sequence[int] | None
    ) -> ReplicaAssignment | None:
        """The new full assignment; None cancels an ongoing reassignment (back to the origin)."""
        current = self.controller_context.partition_full_replica_assignment(tp)
        if current.is_being_reassigned:
            return current.reassign_to(current.origin_replicas if target is None else target)
        return None if target is None else current.reassign_to(target)

    def maybe_trigger_partition_reassignment(
        self, reassignments: Mapping[TopicPartition, ReplicaAssignment]
    ) -> dict[TopicPartition, ApiError]:
        ctx = self.controller_context
        results: dict[TopicPartition, ApiError] = {}
        for tp, reassignment in reassignments.items():
            if self.topic_deletion_manager.is_topic_queued_up_for_deletion(tp.topic) or not (
                ctx.partition_replica_assignment(tp)
            ):
                results[tp] = _UNKNOWN_PARTITION
                continue
            try:
                self.on_partition_reassignment(tp, reassignment)
                results[tp] = API_ERROR_NONE
            except ControllerMovedError:
                log.error("Error completing reassignment of partition %s: the controller moved", tp)
                raise
            except Exception as e:
                log.exception("Error completing reassignment of partition %s", tp)
                results[tp] = ApiError(Errors.UNKNOWN_SERVER_ERROR, str(e) or None)
        return results

    # ------------------------------------------------------------------ the phases
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

    def initialize_partition_reassignments(self) -> None:
        """Failover: requests made through ZooKeeper meanwhile, then API reassignments in flight."""
        resumed = self.process_zk_partition_reassignment()
        self.maybe_resume_reassignments(lambda tp, _a: tp not in resumed)

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
