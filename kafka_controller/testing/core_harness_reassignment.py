"""``CoreHarness``'s KIP-455 reassignment flow (docs/controller-behaviour.md §8.8: U/A/B phases for
one partition) and its sends, written out step by step as the controller runs them (see
``core_harness``): ``HarnessReassignment`` and ``HarnessSender``, which the harness builds and
hands what they use."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence

from kafka_controller.core import strategies
from kafka_controller.core.context import ControllerContext
from kafka_controller.core.partition_state_machine import PartitionStateMachine
from kafka_controller.core.replica_state_machine import ReplicaStateMachine
from kafka_controller.core.request_batch import ControllerBrokerRequestBatch
from kafka_controller.domain.errors import (
    IllegalControllerStateError,
    InvalidArgumentError,
    StateChangeFailedError,
)
from kafka_controller.domain.states import PartitionState, ReplicaState
from kafka_controller.domain.values import (
    NO_LEADER,
    LeaderIsrAndControllerEpoch,
    PartitionAndReplica,
    ReplicaAssignment,
    TopicPartition,
    seq_diff,
)
from kafka_controller.dryrun.memory_store import InMemoryMetadataStore

__all__ = ["HarnessReassignment", "HarnessSender", "known_partition"]

_ONLINE = PartitionState.ONLINE_PARTITION
_PR = PartitionAndReplica
_REASSIGN = strategies.ReassignPartitionLeaderElectionStrategy()


def known_partition(context: ControllerContext, tp: TopicPartition) -> None:
    """Refuse, before anything happens, a partition the controller does not know."""
    if not isinstance(tp, TopicPartition) or not context.partition_replica_assignment(tp):
        raise InvalidArgumentError(f"unknown partition {tp}")


class HarnessSender:
    """The controller's own request batch, sent as ``KafkaController`` sends it: new batch, queue,
    send, and a failed send clears the batch."""

    def __init__(self, context: ControllerContext, batch: ControllerBrokerRequestBatch) -> None:
        self.context = context
        self.batch = batch

    def send_update_metadata(self, broker_ids: Sequence[int], partitions: Collection[TopicPartition]) -> None:
        """Kafka's ``sendUpdateMetadataRequest`` on the controller's own batch."""
        self.send(lambda: self.batch.add_update_metadata_request_for_brokers(broker_ids, partitions))

    def send(self, queue: Callable[[], object]) -> None:
        """new batch, queue, send; a failed send clears the batch and re-raises (handleIllegalState)."""
        self.batch.new_batch()
        try:
            queue()
            self.batch.send_requests_to_brokers(self.context.epoch)
        except Exception:
            self.batch.clear()
            raise


class HarnessReassignment:
    """Kafka's ``KafkaController.onPartitionReassignment`` for one partition at a time over the
    harness's context, store and state machines (built anew with them:
    ``CoreHarness.build_state_machines``), its sends through ``sender``."""

    def __init__(
        self,
        context: ControllerContext,
        store: InMemoryMetadataStore,
        psm: PartitionStateMachine,
        rsm: ReplicaStateMachine,
        sender: HarnessSender,
    ) -> None:
        self.context = context
        self.store = store
        self.psm = psm
        self.rsm = rsm
        self._sender = sender

    def reassign(
        self, tp: TopicPartition, target: Sequence[int], *, from_zk: bool = False
    ) -> ReplicaAssignment:
        """KIP-455 (docs/controller-behaviour.md §8.8): validate, then ``on_partition_reassignment``;
        returns the new assignment.

        The API path refuses adding replicas that are not live brokers; ``from_zk`` is the
        ``/admin/reassign_partitions`` path, which does not check them (Kafka validates nothing there).
        """
        ctx = self.context
        known_partition(ctx, tp)
        replicas = tuple(target)
        if not replicas or len(_ids(replicas)) != len(replicas):
            raise InvalidArgumentError(f"invalid target replicas {list(replicas)} for {tp}")
        if ctx.partition_leadership_info(tp) is None:
            raise InvalidArgumentError(f"partition {tp} has no leader and ISR yet: not reassigned")
        reassignment = ctx.partition_full_replica_assignment(tp).reassign_to(replicas)
        not_live = set(reassignment.adding_replicas) - ctx.live_broker_ids
        if not_live and not from_zk:
            raise InvalidArgumentError(f"adding replicas {sorted(not_live)} of {tp} are not live brokers")
        self.on_partition_reassignment(tp, reassignment)
        return ctx.partition_full_replica_assignment(tp)

    def maybe_complete_reassignment(self, tp: TopicPartition) -> None:
        assignment = self.context.partition_full_replica_assignment(tp)
        if self.is_reassignment_complete(tp, assignment):
            self.on_partition_reassignment(tp, assignment)

    def is_reassignment_complete(self, tp: TopicPartition, assignment: ReplicaAssignment) -> bool:
        """Not being reassigned, or TRS ⊆ ISR as read from the store (not the cache)."""
        if not assignment.is_being_reassigned:
            return True
        read = self.store.get_partition_states([tp]).get(tp)
        if not isinstance(read, LeaderIsrAndControllerEpoch):
            return False
        return set(assignment.target_replicas) <= set(read.leader_and_isr.isr)

    def on_partition_reassignment(self, tp: TopicPartition, reassignment: ReplicaAssignment) -> None:
        """Phase U, then A (targets not yet in the ISR) or B (complete), in the spec's order."""
        ctx = self.context
        current = ctx.partition_full_replica_assignment(tp)
        if current != reassignment:
            self._write_assignment(tp, reassignment)  # U1
            ctx.update_partition_full_replica_assignment(tp, reassignment)  # U2
            unneeded = seq_diff(current.replicas, reassignment.replicas)  # U3
            if unneeded:
                self._stop_removed_replicas(tp, unneeded)
        ctx.partitions_being_reassigned.add(tp)
        if not self.is_reassignment_complete(tp, reassignment):
            self._update_leader_epoch_and_send_request(tp, reassignment)  # A1
            for r in reassignment.adding_replicas:  # A2: one call per replica, as Kafka
                self.rsm.handle_state_changes([_PR(tp, r)], ReplicaState.NEW_REPLICA)
            return
        adding = [_PR(tp, r) for r in reassignment.adding_replicas]
        self.rsm.handle_state_changes(adding, ReplicaState.ONLINE_REPLICA)  # B1
        final = ReplicaAssignment(reassignment.target_replicas)
        ctx.update_partition_full_replica_assignment(tp, final)  # B2
        info = ctx.partition_leadership_info(tp)  # B3
        leader = NO_LEADER if info is None else info.leader_and_isr.leader
        if leader in final.replicas and ctx.is_replica_online(leader, tp):
            self._update_leader_epoch_and_send_request(tp, final)
        else:
            self.psm.handle_state_changes([tp], _ONLINE, _REASSIGN)
        self._stop_removed_replicas(tp, reassignment.removing_replicas)  # B4, B5
        self._write_assignment(tp, final)  # B6
        ctx.partitions_being_reassigned.discard(tp)  # B7 (no /admin/reassign_partitions here)
        self._sender.send_update_metadata(sorted(ctx.live_or_shutting_down_broker_ids), [tp])  # B8

    def _write_assignment(self, tp: TopicPartition, assignment: ReplicaAssignment) -> None:
        """The whole topic znode with this partition's new RS/AR/RR, fenced."""
        ctx = self.context
        topic = {p: a for p, a in ctx.partition_assignments.get(tp.topic, {}).items()}
        topic[tp.partition] = assignment
        self.store.set_topic_assignment(tp.topic, ctx.topic_ids.get(tp.topic), topic, ctx.epoch_zk_version)

    def _stop_removed_replicas(self, tp: TopicPartition, removed: Sequence[int]) -> None:
        replicas = [_PR(tp, r) for r in removed]
        for target in (
            ReplicaState.OFFLINE_REPLICA,
            ReplicaState.REPLICA_DELETION_STARTED,
            ReplicaState.REPLICA_DELETION_SUCCESSFUL,
            ReplicaState.NON_EXISTENT_REPLICA,
        ):
            self.rsm.handle_state_changes(replicas, target)

    def _update_leader_epoch_and_send_request(
        self, tp: TopicPartition, assignment: ReplicaAssignment
    ) -> None:
        """A1/B3: bump the leader epoch (leader and ISR unchanged), then LeaderAndIsr to RS."""
        ctx = self.context
        updated: LeaderIsrAndControllerEpoch | None = None
        while updated is None:
            read = self.store.get_partition_states([tp]).get(tp)
            if not isinstance(read, LeaderIsrAndControllerEpoch):
                raise IllegalControllerStateError(f"no leader epoch to update for {tp}: {read}")
            if read.controller_epoch > ctx.epoch:
                raise StateChangeFailedError(f"{tp} was written by controller epoch {read.controller_epoch}")
            bumped = read.leader_and_isr.new_epoch_and_zk_version()
            result = self.store.update_leader_and_isr({tp: bumped}, ctx.epoch, ctx.epoch_zk_version)
            written = result.finished.get(tp)
            if isinstance(written, Exception):
                raise written
            if written is not None:  # else BADVERSION: read again
                updated = LeaderIsrAndControllerEpoch(written, ctx.epoch)
        ctx.put_partition_leadership_info(tp, updated)

        def queue() -> None:
            add = self._sender.batch.add_leader_and_isr_request_for_brokers
            add(assignment.origin_replicas, tp, updated, assignment, False)
            add(assignment.adding_replicas, tp, updated, assignment, True)

        self._sender.send(queue)


def _ids(broker_ids: Iterable[int]) -> set[int]:
    if isinstance(broker_ids, str | bytes):
        raise InvalidArgumentError(f"broker ids must be integers, got the string {broker_ids!r}")
    ids = list(broker_ids)
    bad = [b for b in ids if type(b) is not int or b < 0]
    if bad:
        raise InvalidArgumentError(f"broker ids must be non-negative integers, got {bad}")
    return set(ids)
