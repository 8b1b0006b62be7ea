"""The phases of a KIP-455 reassignment: Kafka's ``onPartitionReassignment`` and the steps it calls
(U, A1-A2, B1-B8; see ``controller.reassignment`` for what each phase does), plus completion and
resumption, for many partitions at a time (the store writes are in ``reassignment_writes``).
``Reassignments`` (the entry points) inherits these."""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence

from kafka_controller.controller.events import (
    ZkPartitionReassignment,
)
from kafka_controller.controller.metadata_updates import UpdateMetadataSender
from kafka_controller.controller.reassignment_writes import (
    is_reassignment_complete,
    update_leader_epochs,
    write_topic_assignments,
)
from kafka_controller.controller.resignation import ControllerResignation
from kafka_controller.controller.services import ControllerServices, log, partition_state_path
from kafka_controller.core.strategies import ReassignPartitionLeaderElectionStrategy
from kafka_controller.domain.errors import (
    IllegalControllerStateError,
    MetadataStoreError,
    ZNodeDecodeError,
)
from kafka_controller.domain.states import PartitionState, ReplicaState
from kafka_controller.domain.values import (
    LeaderIsrAndControllerEpoch,
    PartitionAndReplica,
    ReplicaAssignment,
    TopicPartition,
)
from kafka_controller.ports import PartitionStateRead

__all__ = ["ReassignmentPhases"]


class ReassignmentPhases:
    """Driving reassignments through their phases, many partitions at a time.

    Kafka runs ``onPartitionReassignment`` once per partition, and each run does its own store
    round trips: a topic znode write (U1, B6), a state read and a write (the leader-epoch bump), a
    request batch sent (A1, A2, B8) and four replica state machine calls (B4/B5). For a plan of
    20,000 partitions that is over 100,000 round trips in one event, during which nothing else is
    served. Here every phase runs for all the partitions of a request at once: one batched state
    read, one batched conditional write, one topic znode write per topic, one request batch per
    phase. Each partition goes through Kafka's phases in Kafka's order; only the interleaving of
    partitions differs, and partitions do not depend on each other (those of one topic share the
    topic znode, which is written once with all of them).

    Failures are per partition, as when Kafka's loop catches one partition's exception: a failed
    partition stops where it failed and is reported; the others go on. ``ControllerMovedError``
    ends the whole call (the controller resigns).
    """

    def __init__(
        self,
        services: ControllerServices,
        metadata: UpdateMetadataSender,
        resignation: ControllerResignation,
    ) -> None:
        self._s = services
        self._metadata = metadata
        self._resignation = resignation

    def on_partition_reassignment(self, tp: TopicPartition, reassignment: ReplicaAssignment) -> None:
        """Kafka's ``onPartitionReassignment`` for one partition; raises what failed it."""
        failed = self.on_partition_reassignments({tp: reassignment})
        if tp in failed:
            raise failed[tp]

    def on_partition_reassignments(
        self,
        reassignments: Mapping[TopicPartition, ReplicaAssignment],
        states: Mapping[TopicPartition, PartitionStateRead] | None = None,
    ) -> dict[TopicPartition, Exception]:
        """Every phase for all of ``reassignments``; returns the partitions that failed and why.
        ``states``: partition states just read (the completion check's), not read again."""
        failed: dict[TopicPartition, Exception] = {}
        if not reassignments:
            return failed
        self._s.topic_deletion_manager.mark_topic_ineligible_for_deletion(
            {tp.topic for tp in reassignments}, "topic reassignment in progress"
        )
        self.update_current_reassignments(reassignments, failed)
        going = {tp: ra for tp, ra in reassignments.items() if tp not in failed}
        reads = self._read_states(going, failed, states)
        going = {tp: ra for tp, ra in going.items() if tp not in failed}
        incomplete = {tp: ra for tp, ra in going.items() if not is_reassignment_complete(ra, reads.get(tp))}
        if incomplete:
            self.update_leader_epoch_and_send_requests(incomplete, failed, reads)  # A1
            adding = [
                PartitionAndReplica(tp, r)
                for tp, ra in incomplete.items()
                if tp not in failed
                for r in ra.adding_replicas
            ]
            self._s.replica_state_machine.handle_state_changes(adding, ReplicaState.NEW_REPLICA)  # A2
        complete = {tp: ra for tp, ra in going.items() if tp not in incomplete}
        if complete:
            self._complete_reassignments(complete, failed)
        return failed

    def _complete_reassignments(
        self,
        reassignments: Mapping[TopicPartition, ReplicaAssignment],
        failed: dict[TopicPartition, Exception],
    ) -> None:
        """Phase B for partitions whose targets are all in the ISR."""
        ctx = self._s.controller_context
        self._s.replica_state_machine.handle_state_changes(
            [PartitionAndReplica(tp, r) for tp, ra in reassignments.items() for r in ra.adding_replicas],
            ReplicaState.ONLINE_REPLICA,
        )  # B1
        completed = {tp: ReplicaAssignment(ra.target_replicas) for tp, ra in reassignments.items()}
        for tp, ra in completed.items():
            ctx.update_partition_full_replica_assignment(tp, ra)  # B2
        self.move_reassigned_partition_leaders_if_required(completed, failed)  # B3
        removing = [
            PartitionAndReplica(tp, r)
            for tp, ra in reassignments.items()
            if tp not in failed
            for r in ra.removing_replicas
        ]
        self.stop_removed_replicas_of_reassigned_partitions(removing)  # B4, B5
        self.update_replica_assignments(
            {tp: ra for tp, ra in completed.items() if tp not in failed}, failed
        )  # B6
        done = {tp: ra for tp, ra in completed.items() if tp not in failed}
        self.remove_partitions_from_reassigning_partitions(done)  # B7
        if done:
            self._metadata.send_update_metadata_request(
                sorted(ctx.live_or_shutting_down_broker_ids), set(done)
            )  # B8
            self._s.topic_deletion_manager.resume_deletion_for_topics({tp.topic for tp in done})

    def update_current_reassignments(
        self,
        reassignments: Mapping[TopicPartition, ReplicaAssignment],
        failed: dict[TopicPartition, Exception],
    ) -> None:
        """Phase U: record the new RS/AR/RR (store, then context), stop the replicas an earlier
        reassignment added that this one drops, and mark the partitions as being reassigned."""
        ctx = self._s.controller_context
        previous = {tp: ctx.partition_full_replica_assignment(tp) for tp in reassignments}
        changed = {tp: ra for tp, ra in reassignments.items() if previous[tp] != ra}
        written = self.update_replica_assignments(changed, failed)  # U1
        dropped: list[PartitionAndReplica] = []
        for tp in written:
            ra = changed[tp]
            ctx.update_partition_full_replica_assignment(tp, ra)  # U2
            dropped += [PartitionAndReplica(tp, r) for r in previous[tp].replicas if r not in ra.replicas]
        if dropped:
            self.stop_removed_replicas_of_reassigned_partitions(dropped)  # U3
        for tp in reassignments:
            if tp in failed:
                continue
            if not self._s.config.is_alter_isr_enabled:
                self._s.store.watch_node(partition_state_path(tp), self._s.watches.on_partition_state)
            ctx.partitions_being_reassigned.add(tp)

    def update_leader_epoch_and_send_requests(
        self,
        assignments: Mapping[TopicPartition, ReplicaAssignment],
        failed: dict[TopicPartition, Exception],
        states: Mapping[TopicPartition, PartitionStateRead] | None = None,
    ) -> None:
        """Bump the leader epochs (one batched write), then one LeaderAndIsr batch: the origin
        replicas as they were, the adding ones as new replicas."""
        updated = self.update_leader_epochs(list(assignments), failed, states)
        if not updated:
            return
        batch = self._s.broker_request_batch
        try:
            batch.new_batch()
            origin = [
                (assignments[tp].origin_replicas, tp, info, assignments[tp]) for tp, info in updated.items()
            ]
            batch.add_leader_and_isr_requests(origin, False)
            adding = [
                (assignments[tp].adding_replicas, tp, info, assignments[tp])
                for tp, info in updated.items()
                if assignments[tp].adding_replicas
            ]
            batch.add_leader_and_isr_requests(adding, True)
            batch.send_requests_to_brokers(self._s.controller_context.epoch)
        except IllegalControllerStateError as e:
            self._resignation.handle_illegal_state(e)
        if log.isEnabledFor(logging.DEBUG):
            for tp, leadership in updated.items():
                log.debug(
                    "Sent LeaderAndIsr %s for reassigned partition %s with assignment %s",
                    leadership,
                    tp,
                    assignments[tp],
                )
        first = next(iter(updated))
        log.info(
            "Sent LeaderAndIsr for %d reassigned partitions (first: %s with assignment %s)",
            len(updated),
            first,
            assignments[first],
        )

    def update_leader_epochs(
        self,
        partitions: Sequence[TopicPartition],
        failed: dict[TopicPartition, Exception],
        states: Mapping[TopicPartition, PartitionStateRead] | None = None,
    ) -> dict[TopicPartition, LeaderIsrAndControllerEpoch]:
        return update_leader_epochs(
            self._s.store, self._s.controller_context, self._s.audit, partitions, failed, states
        )

    def move_reassigned_partition_leaders_if_required(
        self, assignments: Mapping[TopicPartition, ReplicaAssignment], failed: dict[TopicPartition, Exception]
    ) -> None:
        """B3: a leader that stays (and is online) gets an epoch bump; the others are elected
        among the new replicas."""
        ctx = self._s.controller_context
        bump: dict[TopicPartition, ReplicaAssignment] = {}
        elect: list[TopicPartition] = []
        for tp, assignment in assignments.items():
            info = ctx.partition_leadership_info(tp)
            leader = info.leader_and_isr.leader if info is not None else -1
            if leader in assignment.replicas and ctx.is_replica_online(leader, tp):
                bump[tp] = assignment
            else:
                elect.append(tp)
        if bump:
            self.update_leader_epoch_and_send_requests(bump, failed)
        if elect:
            self._s.partition_state_machine.handle_state_changes(
                elect, PartitionState.ONLINE_PARTITION, ReassignPartitionLeaderElectionStrategy()
            )

    def stop_removed_replicas_of_reassigned_partitions(self, replicas: Sequence[PartitionAndReplica]) -> None:
        """Four replica state machine calls, as Kafka makes for one partition: offline, deletion
        started, successful, gone. The deletion's success is not awaited."""
        if not replicas:
            return
        rsm = self._s.replica_state_machine
        for target in (
            ReplicaState.OFFLINE_REPLICA,
            ReplicaState.REPLICA_DELETION_STARTED,
            ReplicaState.REPLICA_DELETION_SUCCESSFUL,
            ReplicaState.NON_EXISTENT_REPLICA,
        ):
            rsm.handle_state_changes(replicas, target)

    def update_replica_assignments(
        self, assignments: Mapping[TopicPartition, ReplicaAssignment], failed: dict[TopicPartition, Exception]
    ) -> list[TopicPartition]:
        return write_topic_assignments(self._s.store, self._s.controller_context, assignments, failed)

    def remove_partitions_from_reassigning_partitions(
        self, assignments: Mapping[TopicPartition, ReplicaAssignment]
    ) -> None:
        """B7: forget the completed reassignments, and drop them from ``/admin/reassign_partitions``
        when they are there with the same target (one read and one write for all)."""
        if not assignments:
            return
        ctx = self._s.controller_context
        missing = [tp for tp in assignments if tp not in ctx.partitions_being_reassigned]
        if missing:
            raise IllegalControllerStateError(
                f"Cannot remove a reassigning partition {missing[0]} because it is not present in memory"
            )
        if not self._s.config.is_alter_isr_enabled:
            for tp in assignments:
                self._s.store.unwatch(partition_state_path(tp))
        self.maybe_remove_from_zk_reassignment(
            lambda p, replicas: (ra := assignments.get(p)) is not None and tuple(replicas) == ra.replicas
        )
        ctx.partitions_being_reassigned.difference_update(assignments)

    def maybe_remove_from_zk_reassignment(
        self, should_remove: Callable[[TopicPartition, Sequence[int]], bool]
    ) -> None:
        """Drop matching entries from ``/admin/reassign_partitions``; delete it when it empties
        (and re-arm its creation watch by enqueueing ZkPartitionReassignment)."""
        if not self._s.store.reassign_partitions_in_progress():
            return
        ctx = self._s.controller_context
        pending = self.read_zk_reassignment()
        remaining = {tp: r for tp, r in pending.items() if not should_remove(tp, r)}
        log.info(
            "Removing partitions %s from the list of reassigned partitions in zookeeper",
            sorted(pending.keys() - remaining.keys()),
        )
        if not remaining:
            log.info("No more partitions need to be reassigned. Deleting zk path /admin/reassign_partitions")
            self._s.store.delete_partition_reassignment(ctx.epoch_zk_version)
            self._s.enqueue(ZkPartitionReassignment())
        else:
            self._s.store.set_or_create_partition_reassignment(remaining, ctx.epoch_zk_version)

    def maybe_complete_reassignment(self, tp: TopicPartition) -> None:
        self.maybe_complete_reassignments([tp])

    def maybe_complete_reassignments(self, partitions: Iterable[TopicPartition]) -> None:
        """Complete those of ``partitions`` being reassigned whose targets have all joined the ISR
        (one batched state read, then phase B for all of them)."""
        ctx = self._s.controller_context
        tps = [tp for tp in dict.fromkeys(partitions) if tp in ctx.partitions_being_reassigned]
        if not tps:
            return
        assignments = {tp: ctx.partition_full_replica_assignment(tp) for tp in tps}
        failed: dict[TopicPartition, Exception] = {}
        reads = self._read_states(assignments, failed)
        complete = {
            tp: ra
            for tp, ra in assignments.items()
            if tp not in failed and is_reassignment_complete(ra, reads.get(tp))
        }
        if complete:
            log.info(
                "Target replicas have all caught up with the leader for %d reassigning partitions "
                "(first: %s, target %s)",
                len(complete),
                next(iter(complete)),
                next(iter(complete.values())).target_replicas,
            )
            failed.update(self.on_partition_reassignments(complete, reads))
        for tp, e in failed.items():
            log.error("Error completing reassignment of partition %s: %s", tp, e)

    def maybe_resume_reassignments(
        self, should_resume: Callable[[TopicPartition, ReplicaAssignment], bool]
    ) -> None:
        ctx = self._s.controller_context
        resume = {
            tp: ra
            for tp in list(ctx.partitions_being_reassigned)
            if should_resume(tp, ra := ctx.partition_full_replica_assignment(tp))
        }
        for tp, e in self.on_partition_reassignments(resume).items():
            log.error("Error resuming reassignment of partition %s: %s", tp, e)

    # ------------------------------------------------------------------ helpers
    def read_zk_reassignment(self) -> dict[TopicPartition, tuple[int, ...]]:
        try:
            return self._s.store.get_partition_reassignment()
        except ZNodeDecodeError as e:
            log.error("Ignoring /admin/reassign_partitions: %s", e)
            return {}

    def _read_states(
        self,
        partitions: Collection[TopicPartition],
        failed: dict[TopicPartition, Exception],
        states: Mapping[TopicPartition, PartitionStateRead] | None = None,
    ) -> dict[TopicPartition, LeaderIsrAndControllerEpoch | None]:
        """The partitions' states (``states`` where given, the rest in one batched read); a
        partition whose state cannot be read fails."""
        given = states or {}
        unread = [tp for tp in partitions if tp not in given]
        fresh = self._s.store.get_partition_states(unread) if unread else {}
        out: dict[TopicPartition, LeaderIsrAndControllerEpoch | None] = {}
        for tp in partitions:
            read = given[tp] if tp in given else fresh.get(tp)
            if isinstance(read, MetadataStoreError):
                failed[tp] = read
            else:
                out[tp] = read
        return out
