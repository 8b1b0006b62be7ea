"""Topic deletion (docs/controller-behaviour.md §8.9): Kafka 2.8's ``TopicDeletionManager``.

Why it is shaped this way:

* Every step moves the replicas or partitions of **all** topics together: one PSM or RSM call per
  step, made even when the list is empty (KAFKA-9499; Kafka's tests count these calls). Deleting
  many topics costs a few batched rounds, not one round per topic.
* Partitions go Offline -> NonExistent *before* ``ctx.begin_topic_deletion``, so that the offline
  partition count drops back for a topic being deleted (docs/controller-behaviour.md §5.4).
* Two notions of "deletion in progress" coexist, as in Kafka's ``TopicDeletionManager``:
  ``ctx.is_topic_deletion_in_progress`` (the topic's deletion has started) and this manager's
  private one (some replica is in ReplicaDeletionStarted, i.e. a StopReplica(delete=true) is still
  outstanding). Only the private one gates a (re)start, so nothing is retried while any delete
  request is in flight.

Runs only on the controller's event thread. Writes to the metadata store go through the
``DeletionClient`` and are fenced with ``ctx.epoch_zk_version``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from kafka_controller.core.election import LiveReplicaFilter
from kafka_controller.domain.errors import IllegalControllerStateError, InvalidArgumentError
from kafka_controller.domain.states import PartitionState, ReplicaState
from kafka_controller.domain.values import PartitionAndReplica, TopicPartition

if TYPE_CHECKING:
    from kafka_controller.core.context import ControllerContext
    from kafka_controller.core.partition_state_machine import AbstractPartitionStateMachine
    from kafka_controller.core.replica_state_machine import AbstractReplicaStateMachine
    from kafka_controller.ports import DeletionClient

logger = logging.getLogger(__name__)

_STARTED = ReplicaState.REPLICA_DELETION_STARTED
_SUCCESSFUL = ReplicaState.REPLICA_DELETION_SUCCESSFUL
_INELIGIBLE = ReplicaState.REPLICA_DELETION_INELIGIBLE


def _topics_arg(topics: Iterable[str], what: str) -> set[str]:
    """A set of topic names; a bare string (a classic slip: it iterates as characters) is refused."""
    if isinstance(topics, str | bytes):
        raise InvalidArgumentError(f"{what} must be a collection of topic names, not the string {topics!r}")
    items = list(topics)
    for t in items:
        if not isinstance(t, str):
            raise InvalidArgumentError(f"{what} must hold topic names (str), got {t!r}")
    return set(items)


def _replicas_arg(replicas: Iterable[PartitionAndReplica], what: str) -> list[PartitionAndReplica]:
    """Distinct replicas in first-seen order (Kafka passes a Set)."""
    items = list(replicas)
    for r in items:
        if not isinstance(r, PartitionAndReplica):
            raise InvalidArgumentError(f"{what} must hold PartitionAndReplica values, got {r!r}")
    return list(dict.fromkeys(items))


class TopicDeletionManager:
    """Queues, starts, retries and completes topic deletions (Kafka's ``TopicDeletionManager``)."""

    def __init__(
        self,
        controller_id: int,
        context: ControllerContext,
        replica_state_machine: AbstractReplicaStateMachine,
        partition_state_machine: AbstractPartitionStateMachine,
        client: DeletionClient,
        *,
        delete_topic_enable: bool = True,
    ) -> None:
        self.controller_id = controller_id
        self.is_delete_topic_enabled = delete_topic_enable
        self._ctx = context
        self._rsm = replica_state_machine
        self._psm = partition_state_machine
        self._client = client
        self._prefix = f"[Topic Deletion Manager {controller_id}] "

    # ------------------------------------------------------------------------------- public API
    def init(self, topics_to_delete: Iterable[str], topics_ineligible: Iterable[str]) -> None:
        """On failover: queue the pending deletions, or (deletion disabled) drop their znodes."""
        to_delete = _topics_arg(topics_to_delete, "topics_to_delete")
        ineligible = _topics_arg(topics_ineligible, "topics_ineligible")
        ctx = self._ctx
        logger.info(
            "%sInitializing manager with initial deletions: %s, initial ineligible deletions: %s",
            self._prefix,
            sorted(to_delete),
            sorted(ineligible),
        )
        if self.is_delete_topic_enabled:
            ctx.queue_topic_deletion(to_delete)
            ctx.topics_ineligible_for_deletion |= ineligible & ctx.topics_to_be_deleted
        else:
            logger.info("%sRemoving %s since delete topic is disabled", self._prefix, sorted(to_delete))
            self._client.delete_topic_deletions(sorted(to_delete), ctx.epoch_zk_version)

    def reset(self) -> None:
        """Forget all deletion bookkeeping (on resignation; ``ctx.reset_context`` also does this)."""
        if self.is_delete_topic_enabled:
            ctx = self._ctx
            ctx.topics_to_be_deleted.clear()
            ctx.topics_with_deletion_started.clear()
            ctx.topics_ineligible_for_deletion.clear()

    def try_topic_deletion(self) -> None:
        if self.is_delete_topic_enabled:
            self.resume_deletions()

    def enqueue_topics_for_deletion(self, topics: Iterable[str]) -> None:
        """Queue topics (from ``/admin/delete_topics``) and push every queued deletion forward."""
        wanted = _topics_arg(topics, "topics")
        if self.is_delete_topic_enabled:
            self._ctx.queue_topic_deletion(wanted)
            self.resume_deletions()

    def resume_deletion_for_topics(self, topics: Iterable[str] = ()) -> None:
        """A broker came back or a reassignment finished: the queued ones among ``topics`` may go on."""
        wanted = _topics_arg(topics, "topics")
        if self.is_delete_topic_enabled:
            ctx = self._ctx
            resumed = wanted & ctx.topics_to_be_deleted
            if resumed:
                ctx.topics_ineligible_for_deletion -= resumed
                self.resume_deletions()

    def fail_replica_deletion(self, replicas: Iterable[PartitionAndReplica]) -> None:
        """StopReplica failed or the broker died: park the replicas and halt their topics."""
        given = _replicas_arg(replicas, "replicas")
        if not self.is_delete_topic_enabled:
            return
        queued = self._ctx.topics_to_be_deleted
        failed = [r for r in given if r.topic_partition.topic in queued]
        if failed:
            topics = {r.topic_partition.topic for r in failed}
            if logger.isEnabledFor(logging.DEBUG):
                logger.debug(
                    "%sDeletion failed for replicas %s. Halting deletion for topics %s",
                    self._prefix,
                    ",".join(map(str, failed)),
                    sorted(topics),
                )
            self._rsm.handle_state_changes(failed, _INELIGIBLE)
            self.mark_topic_ineligible_for_deletion(topics, reason="replica deletion failure")
            self.resume_deletions()

    def mark_topic_ineligible_for_deletion(self, topics: Iterable[str], reason: str = "") -> None:
        """Halt deletion of the queued ones among ``topics`` (offline replicas, reassignment, ...)."""
        wanted = _topics_arg(topics, "topics")
        if self.is_delete_topic_enabled:
            ctx = self._ctx
            halted = ctx.topics_to_be_deleted & wanted
            ctx.topics_ineligible_for_deletion |= halted
            if halted:
                logger.info(
                    "%sHalted deletion of topics %s due to %s", self._prefix, ",".join(sorted(halted)), reason
                )

    def is_topic_queued_up_for_deletion(self, topic: str) -> bool:
        return self.is_delete_topic_enabled and self._ctx.is_topic_queued_up_for_deletion(topic)

    def complete_replica_deletion(self, replicas: Iterable[PartitionAndReplica]) -> None:
        """StopReplica(delete=true) succeeded: mark the replicas and tear down finished topics.

        The RSM is called even with an empty list, as Kafka does (its tests count the call).
        """
        given = _replicas_arg(replicas, "replicas")
        queued = self._ctx.topics_to_be_deleted if self.is_delete_topic_enabled else frozenset()
        done = [r for r in given if r.topic_partition.topic in queued]
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug(
                "%sDeletion successfully completed for replicas %s", self._prefix, ",".join(map(str, done))
            )
        self._rsm.handle_state_changes(done, _SUCCESSFUL)
        self.resume_deletions()

    # ------------------------------------------------------------------------------- the engine
    def resume_deletions(self) -> None:
        """Complete, retry or (re)start every queued topic, each step batched across topics."""
        ctx = self._ctx
        queued = sorted(ctx.topics_to_be_deleted)  # a snapshot: completion removes topics
        if queued:
            logger.info("%sHandling deletion for topics %s", self._prefix, ",".join(queued))
        eligible_for_retry: list[str] = []
        eligible_for_deletion: list[str] = []
        for topic in queued:
            all_successful, any_started, any_ineligible = self._deletion_summary(topic)
            if all_successful:
                self.complete_delete_topic(topic)
                logger.info("%sDeletion of topic %s successfully completed", self._prefix, topic)
                continue  # no longer queued, hence not eligible either
            if not any_started and any_ineligible:
                eligible_for_retry.append(topic)
            if not self._is_deletion_in_progress(any_started) and not self._is_topic_ineligible_for_deletion(
                topic
            ):
                logger.info("%sDeletion of topic %s (re)started", self._prefix, topic)
                eligible_for_deletion.append(topic)
        if eligible_for_retry:
            self.retry_deletion_for_ineligible_replicas(eligible_for_retry)
        if eligible_for_deletion:
            self.on_topic_deletion(eligible_for_deletion)

    def complete_delete_topic(self, topic: str) -> None:
        """Every replica is deleted: drop the topic from the RSM, the store and the context."""
        ctx = self._ctx
        # Muted first, so the znode deletion below does not come back as a partition-change event.
        self._client.mute_partition_modifications(topic)
        deleted = self._replicas_in_state([topic], _SUCCESSFUL)
        self._rsm.handle_state_changes(deleted, ReplicaState.NON_EXISTENT_REPLICA)
        self._client.delete_topic(topic, ctx.epoch_zk_version)
        ctx.remove_topic(topic)

    def retry_deletion_for_ineligible_replicas(self, topics: Sequence[str]) -> None:
        """Ineligible -> Offline, so that the next start moves them on to ReplicaDeletionStarted."""
        failed = self._replicas_in_state(topics, _INELIGIBLE)
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug(
                "%sRetrying deletion of topics %s since replicas %s were not successfully deleted",
                self._prefix,
                ",".join(topics),
                ",".join(map(str, failed)),
            )
        self._rsm.handle_state_changes(failed, ReplicaState.OFFLINE_REPLICA)

    def on_topic_deletion(self, topics: Sequence[str]) -> None:
        """Start (or restart) deletion: partitions to NonExistent once, metadata, then the replicas."""
        ctx = self._ctx
        logger.info("%sTopic deletion callback for %s", self._prefix, ",".join(topics))
        partitions_of = {t: ctx.partitions_for_topic(t) for t in topics}
        started = ctx.topics_with_deletion_started
        unseen = [t for t in topics if t not in started]
        if unseen:
            partitions = [tp for t in unseen for tp in partitions_of[t]]
            self._psm.handle_state_changes(partitions, PartitionState.OFFLINE_PARTITION)
            self._psm.handle_state_changes(partitions, PartitionState.NON_EXISTENT_PARTITION)
            # After the state changes, so that the offline partition count is decremented
            # (docs/controller-behaviour.md §5.4).
            ctx.begin_topic_deletion(unseen)
        # Brokers learn leader -2 for these partitions and stop serving them.
        self._client.send_metadata_update([tp for t in topics for tp in partitions_of[t]])
        self.on_partition_deletion(topics)

    def on_partition_deletion(self, topics: Sequence[str]) -> None:
        """Dead replicas -> Ineligible; live, not yet deleted ones -> Offline -> DeletionStarted.

        Three RSM calls for all topics together, each made even with an empty list.
        """
        ctx = self._ctx
        states = ctx.replica_states
        live = LiveReplicaFilter(ctx)  # liveness read once for the whole batch
        dead: list[PartitionAndReplica] = []
        retry: list[PartitionAndReplica] = []
        topics_with_dead: list[str] = []
        for topic in topics:
            n_dead = len(dead)
            for p, assignment in ctx.partition_assignments.get(topic, {}).items():
                tp = TopicPartition(topic, p)
                online = live.filter(assignment.replicas, tp)
                for r in assignment.replicas:
                    state = states.get((tp, r))  # type: ignore[call-overload]  # see _deletion_summary
                    if state is None:
                        raise _no_state(tp, r)
                    if r not in online:
                        dead.append(PartitionAndReplica(tp, r))
                    elif state is not _SUCCESSFUL:
                        retry.append(PartitionAndReplica(tp, r))
            if len(dead) > n_dead:
                logger.debug("%sDead replicas found for topic %s", self._prefix, topic)
                topics_with_dead.append(topic)
        self._rsm.handle_state_changes(dead, _INELIGIBLE)
        self._rsm.handle_state_changes(retry, ReplicaState.OFFLINE_REPLICA)
        self._rsm.handle_state_changes(retry, _STARTED)
        if topics_with_dead:
            self.mark_topic_ineligible_for_deletion(topics_with_dead, reason="offline replicas")

    # ------------------------------------------------------------------------------- private
    def _is_topic_ineligible_for_deletion(self, topic: str) -> bool:
        if not self.is_delete_topic_enabled:
            return True
        return topic in self._ctx.topics_ineligible_for_deletion

    def _is_deletion_in_progress(self, any_replica_started: bool) -> bool:
        """The manager's own notion (Kafka's ``isDeletionInProgress``): a delete request is
        outstanding for some replica.

        Not ``ctx.is_topic_deletion_in_progress`` (deletion *started*), which stays true between
        rounds; this one is false once every StopReplica(delete=true) has been answered.
        """
        return self.is_delete_topic_enabled and any_replica_started

    def _deletion_summary(self, topic: str) -> tuple[bool, bool, bool]:
        """(all replicas Successful, any Started, any Ineligible) in one pass over the topic.

        A replica without a state is a broken invariant (Kafka's ``replicaStates(r)`` throws).
        Looks states up with plain ``((topic, p), r)`` tuples and compares by identity: NamedTuple
        keys hash and compare as tuples, and this runs over every replica of every queued topic on
        each deletion event, so skipping 2 NamedTuples and an Enum hash per replica matters.
        """
        states = self._ctx.replica_states
        all_successful, any_started, any_ineligible = True, False, False
        for p, assignment in self._ctx.partition_assignments.get(topic, {}).items():
            key = (topic, p)
            for r in assignment.replicas:
                state = states.get((key, r))  # type: ignore[call-overload]
                if state is _SUCCESSFUL:
                    continue
                all_successful = False
                if state is _STARTED:
                    any_started = True
                elif state is _INELIGIBLE:
                    any_ineligible = True
                elif state is None:
                    raise _no_state(TopicPartition(topic, p), r)
        return all_successful, any_started, any_ineligible

    def _replicas_in_state(self, topics: Iterable[str], wanted: ReplicaState) -> list[PartitionAndReplica]:
        """The replicas of ``topics`` in state ``wanted``, in assignment order."""
        ctx = self._ctx
        states = ctx.replica_states
        out: list[PartitionAndReplica] = []
        for topic in topics:
            for p, assignment in ctx.partition_assignments.get(topic, {}).items():
                key = (topic, p)
                for r in assignment.replicas:
                    if states.get((key, r)) is wanted:  # type: ignore[call-overload]
                        out.append(PartitionAndReplica(TopicPartition(topic, p), r))
        return out


def _no_state(tp: TopicPartition, replica: int) -> IllegalControllerStateError:
    return IllegalControllerStateError(
        f"replica {PartitionAndReplica(tp, replica)} of topic {tp.topic} has no replica state"
    )
