"""The replica state machine: Kafka's ``ZkReplicaStateMachine`` over the context and ports.

``ReplicaStateMachine`` is composed of objects it builds from its constructor's arguments: a
``ReplicaTransitionRecorder`` (log lines and audit rows), an ``IsrRemoval`` (the store writes of
OfflineReplica) and an ``OfflineReplicaStep`` (the OfflineReplica move, which uses both); the other
targets are moved here, as Kafka's ``doHandleStateChanges`` moves them.

Moving a replica queues broker requests on the machine's own batch and, for OfflineReplica, takes
it out of the ISR in the metadata store. One call is one ``new_batch`` / ``send_requests_to_brokers``
pair and, per replica id, one store read (plus one write) per retry round: never a round trip per
partition. Invalid transitions are logged and skipped, never raised (docs/controller-behaviour.md §1.2); only
``ControllerMovedError`` leaves ``handle_state_changes``.
"""

from __future__ import annotations

import abc
import logging
from collections.abc import Callable, Sequence
from itertools import compress, repeat
from operator import itemgetter, not_
from typing import cast

from kafka_controller.core.batch_api import RequestBatch
from kafka_controller.core.context import ControllerContext
from kafka_controller.core.replica_isr import IsrRemoval
from kafka_controller.core.replica_offline import OfflineReplicaStep
from kafka_controller.core.replica_records import ReplicaTransitionRecorder
from kafka_controller.core.replica_runs import replica_runs
from kafka_controller.domain.audit_records import OUTCOME_FAILED
from kafka_controller.domain.errors import (
    ControllerMovedError,
    StateChangeFailedError,
)
from kafka_controller.domain.states import ReplicaState
from kafka_controller.domain.values import (
    LeaderIsrAndControllerEpoch,
    PartitionAndReplica,
    ReplicaAssignment,
    TopicPartition,
)
from kafka_controller.hotpath import dropped_members, kept_members, members, new_tuple, values_at
from kafka_controller.ports import AuditSink, PartitionStateStore

_LOG = logging.getLogger(__name__)
_STATE_CHANGE_LOG = logging.getLogger("kafka_controller.state_change")

_NEW = ReplicaState.NEW_REPLICA
_ONLINE = ReplicaState.ONLINE_REPLICA
_OFFLINE = ReplicaState.OFFLINE_REPLICA
_DELETION_STARTED = ReplicaState.REPLICA_DELETION_STARTED
_DELETION_INELIGIBLE = ReplicaState.REPLICA_DELETION_INELIGIBLE
_NON_EXISTENT = ReplicaState.NON_EXISTENT_REPLICA

_Leadership = LeaderIsrAndControllerEpoch | None
_Valid = list[tuple[PartitionAndReplica, ReplicaState]]
_Replicas = list[PartitionAndReplica]

#: A replica's first state by whether it is online.
_INITIAL_STATE = {True: ReplicaState.ONLINE_REPLICA, False: ReplicaState.REPLICA_DELETION_INELIGIBLE}
_REPLICA_ID = itemgetter(1)


def initial_replica_states(ctx: ControllerContext) -> tuple[_Replicas, _Replicas]:
    """Set every replica's first state in ``ctx`` (OnlineReplica if online, else
    ReplicaDeletionIneligible), in the assignments' order; return the online and the other ones."""
    live = ctx.live_broker_ids
    offline_dirs = ctx.replicas_on_offline_dirs
    # PartitionAndReplica(tp, r) for every replica, in the assignments' order (300,000 at RF 3)
    replicas = [
        new_tuple(PartitionAndReplica, (tp, r)) for tp, a in ctx.iter_assignments() for r in a.replicas
    ]
    if offline_dirs:
        is_online = [r in live and tp not in offline_dirs.get(r, ()) for tp, r in replicas]
    else:
        is_online = list(members(live, map(_REPLICA_ID, replicas)))
    # Each replica's state, set in the same order as one at a time
    ctx.replica_states.update(zip(replicas, values_at(_INITIAL_STATE, is_online), strict=True))
    online = list(compress(replicas, is_online))
    offline = list(compress(replicas, map(not_, is_online)))
    return online, offline


def _by_replica_id(replicas: Sequence[PartitionAndReplica]) -> dict[int, list[PartitionAndReplica]]:
    """``replicas`` grouped by replica id, in order of first appearance (Kafka's ``groupBy``)."""
    groups: dict[int, list[PartitionAndReplica]] = {}
    for replica in replicas:
        group = groups.get(replica.replica)
        if group is None:
            groups[replica.replica] = [replica]
        else:
            group.append(replica)
    return groups


class AbstractReplicaStateMachine(abc.ABC):
    """What the controller and the topic-deletion manager need from a replica state machine."""

    def __init__(self, context: ControllerContext) -> None:
        self.controller_context = context
        # ``startup``'s online replicas while it moves them, each OnlineReplica since a moment ago
        self._initialized_online: Sequence[PartitionAndReplica] | None = None

    @property
    def context(self) -> ControllerContext:
        return self.controller_context

    def startup(self) -> None:
        """Initialise every replica's state, then move online and offline replicas
        (docs/controller-behaviour.md §4.1).

        Both calls are made even with empty lists, as Kafka's are (the mock machines count them).
        The online list is dropped before the offline changes: at RF 3 it holds 240,000 keys
        (~2 MB of list) that the offline changes, the failover's memory peak (the ISR removal's
        requests being built), do not need.
        """
        _LOG.info("Initializing replica state")
        online, offline = self.initialize_replica_state()
        self._prepare_startup(offline)
        try:
            _LOG.info("Triggering online replica state changes")
            self._initialized_online = online
            try:
                self.handle_state_changes(online, _ONLINE)
            finally:
                self._initialized_online = None
            del online
            _LOG.info("Triggering offline replica state changes")
            self._startup_offline(offline)
        finally:
            self._end_startup()

    def _prepare_startup(self, offline: list[PartitionAndReplica]) -> None:  # noqa: B027 (a hook)
        """Before the online replicas move: what the offline ones' move will need (none here)."""

    def _end_startup(self) -> None:  # noqa: B027 (a hook)
        """After the offline replicas' move, or instead of it if startup failed first."""

    def _startup_offline(self, offline: list[PartitionAndReplica]) -> None:
        self.handle_state_changes(offline, _OFFLINE)

    def shutdown(self) -> None:
        _LOG.info("Stopped replica state machine")

    def initialize_replica_state(self) -> tuple[list[PartitionAndReplica], list[PartitionAndReplica]]:
        """Online replicas start in OnlineReplica, all others in ReplicaDeletionIneligible.

        Ineligible even when the topic is not being deleted: that keeps deletion safe after a
        failover, and ``startup`` then moves them on with the valid Ineligible -> Offline.
        Returns the online and the other replicas: the split ``startup`` needs is the very test
        made here (``ControllerContext.online_and_offline_replicas``), and at RF 3 a second pass
        would build another 300,000 keys.
        """
        return initial_replica_states(self.controller_context)

    @abc.abstractmethod
    def handle_state_changes(self, replicas: Sequence[PartitionAndReplica], target: ReplicaState) -> None:
        """Move ``replicas`` to ``target``; invalid transitions are logged and skipped."""


class ReplicaStateMachine(AbstractReplicaStateMachine):
    """Kafka's ``ZkReplicaStateMachine``: the real one, writing through a ``PartitionStateStore``."""

    def __init__(
        self,
        controller_id: int,
        context: ControllerContext,
        store: PartitionStateStore,
        batch: RequestBatch,
        *,
        audit: AuditSink | None = None,
        write_on_cached_zk_version: bool = False,
        leave_offline_leaders_to_election: bool = False,
        prewrite_isr_removal: bool = False,
        on_left_to_election: Callable[[frozenset[TopicPartition]], None] | None = None,
    ) -> None:
        """The switches of Kafka departures, all off by default (Kafka's call sequence), are
        kept by the steps they change, whose docs say what each does: ``write_on_cached_zk_version``
        (``core.replica_isr``), ``leave_offline_leaders_to_election`` and ``prewrite_isr_removal``
        (``core.replica_offline``, ``core.early_write``); ``on_left_to_election`` is told the
        partitions the startup leaves to the election (``PartitionStateMachine.start_election_prewrite``).
        """
        super().__init__(context)
        self.controller_id = controller_id
        self._batch = batch
        self._recorder = ReplicaTransitionRecorder(controller_id, context, audit)
        recorder = self._recorder
        self._isr_removal = IsrRemoval(
            context,
            store,
            recorder,
            recorder.audit if recorder.auditing else None,
            write_on_cached_zk_version=write_on_cached_zk_version,
        )
        self._offline = OfflineReplicaStep(
            context,
            batch,
            self._isr_removal,
            recorder,
            leave_offline_leaders_to_election=leave_offline_leaders_to_election,
            prewrite_isr_removal=prewrite_isr_removal,
            on_left_to_election=on_left_to_election,
        )
        # OnlineReplica's LeaderAndIsr entries of the call in progress, as (replica id, partitions)
        # per replica id group, queued on the batch in one call (``_queue_online_requests``).
        self._online_requests: list[tuple[int, list[TopicPartition]]] = []

    # The switches given to the constructor, as the steps keep them.
    @property
    def write_on_cached_zk_version(self) -> bool:
        return self._isr_removal.write_on_cached_zk_version

    @property
    def leave_offline_leaders_to_election(self) -> bool:
        return self._offline.leave_offline_leaders_to_election

    @property
    def prewrite_isr_removal(self) -> bool:
        return self._offline.prewrite_isr_removal

    def _prepare_startup(self, offline: list[PartitionAndReplica]) -> None:
        self._offline.prepare_startup(offline)

    def _end_startup(self) -> None:
        self._offline.end_startup()

    def finish_offline_left_to_election(self) -> None:
        """After the partition state machine's startup: Kafka's ISR removal for the partitions left
        to the election that it did not bring online (none, unless a state changed meanwhile)."""
        unled = self._offline.take_left()
        if unled:
            self.handle_state_changes(unled, _OFFLINE)

    def handle_state_changes(self, replicas: Sequence[PartitionAndReplica], target: ReplicaState) -> None:
        """docs/controller-behaviour.md §4.2: one batch for the whole call, grouped by replica id.

        ``ControllerMovedError`` is re-raised (the controller resigns); anything else is logged and
        the batch is left unsent, as in Kafka. The audit gets one ``record`` call either way.
        """
        if not replicas:
            return
        recorder = self._recorder
        recorder.begin()
        try:
            self._batch.new_batch()
            # startup's online replicas (240,000 at RF 3): their states need no look-up, all Online
            fresh = replicas is self._initialized_online and target is _ONLINE
            if fresh and not recorder.per_row:
                self._startup_online_in_bulk(replicas)
            else:
                groups = _by_replica_id(replicas)
                try:
                    for replica_id, group in groups.items():
                        self._do_handle_state_changes(replica_id, group, target, fresh)
                finally:
                    self._queue_online_requests()
            self._batch.send_requests_to_brokers(self.controller_context.epoch)
        except ControllerMovedError as e:
            _LOG.error("Controller moved to another broker when moving some replicas to %s state", target)
            recorder.record_unfinished(replicas, target, e)
            raise
        except Exception as e:
            _LOG.error("Error while moving some replicas to %s state", target, exc_info=True)
            recorder.record_unfinished(replicas, target, e)
        finally:
            recorder.finish(target)

    def _do_handle_state_changes(
        self, replica_id: int, replicas: list[PartitionAndReplica], target: ReplicaState, fresh: bool = False
    ) -> None:
        states = self.controller_context.replica_states
        allowed = target.valid_previous_states
        previous = [_ONLINE] * len(replicas) if fresh else list(map(states.get, replicas))
        valid: _Valid
        bulk_tried = False  # ``_to_online_in_bulk`` already refused these replicas
        if allowed.issuperset(previous):  # the usual case: all valid
            if target is _ONLINE:
                if self._to_online_in_bulk(replica_id, replicas, previous):
                    return
                bulk_tried = True
            valid = list(zip(replicas, cast("list[ReplicaState]", previous), strict=True))
        else:
            valid = []
            for replica in replicas:
                state = states.get(replica)
                if state is None:
                    state = states[replica] = _NON_EXISTENT
                if state in allowed:
                    valid.append((replica, state))
                else:
                    self._recorder.invalid_transition(replica, state, target)
        if not valid:
            return
        recorder = self._recorder
        tracking = recorder.tracking
        if target is _NEW:
            self._to_new(replica_id, valid)
        elif target is _ONLINE:
            self._to_online(replica_id, valid, bulk_tried)
        elif target is _OFFLINE:
            self._offline.to_offline(replica_id, valid)
        elif target is _NON_EXISTENT:
            ctx = self.controller_context
            for replica, state in valid:
                tp = replica.topic_partition
                assignment = ctx.partition_full_replica_assignment(tp).remove_replica(replica_id)
                ctx.update_partition_full_replica_assignment(tp, assignment)
                states.pop(replica, None)
                if tracking:
                    recorder.succeeded(replica, state, target)
        else:  # ReplicaDeletionStarted / Ineligible / Successful: the state, plus a delete if started
            delete = target is _DELETION_STARTED
            for replica, state in valid:
                states[replica] = target
                if delete:
                    self._batch.add_stop_replica_request_for_brokers(
                        (replica_id,), replica.topic_partition, True
                    )
                if tracking:
                    recorder.succeeded(replica, state, target)

    def _to_new(self, replica_id: int, valid: _Valid) -> None:
        ctx = self.controller_context
        leadership = ctx.partitions_leadership_info
        for replica, state in valid:
            tp = replica.topic_partition
            info = leadership.get(tp)
            if info is not None:
                if info.leader_and_isr.leader == replica_id:
                    error = StateChangeFailedError(
                        f"Replica {replica_id} for partition {tp} cannot be moved to NewReplica state "
                        "as it is being requested to become leader"
                    )
                    self._recorder.log_failed(replica, state, _NEW, error)
                    self._recorder.audit_record(replica, state, _NEW, OUTCOME_FAILED, info, None, error)
                    continue
                self._batch.add_leader_and_isr_request_for_brokers(
                    (replica_id,), tp, info, ctx.partition_full_replica_assignment(tp), True
                )
            ctx.replica_states[replica] = _NEW
            if self._recorder.tracking:
                self._recorder.succeeded(replica, state, _NEW, info, info)

    def _queue_online_requests(self) -> None:
        """Queue the OnlineReplica entries gathered so far, in their order, in one batch call: the
        batch then builds each partition's states once, not once per replica (Kafka queues each
        as it moves it). The requests are the same: the entries keep their order and are queued
        before anything they are built from changes (an assignment fix-up, the end of the call)."""
        if self._online_requests:
            groups, self._online_requests = self._online_requests, []
            ctx = self.controller_context
            self._batch.add_leader_and_isr_requests_by_broker(
                groups, ctx.partitions_leadership_info, ctx.partition_full_replica_assignment, False
            )

    def _startup_online_in_bulk(self, replicas: Sequence[PartitionAndReplica]) -> None:
        """``_to_online_in_bulk`` of each replica id's group of startup's online replicas, each
        OnlineReplica since ``initialize_replica_state`` a moment ago (nothing to look up, check or
        set), its requests queued for all groups in one batch call. The replicas (240,000 at RF 3)
        are walked once, into runs of one partition and their groups (``core.replica_runs``); the
        batch builds the requests from those run by run, and the recorder the records
        (``ReplicaTransitionRecorder.record_unchanged_replicas``). The records come first, as in
        the groups' loop, which queues after it."""
        runs = replica_runs(replicas)
        self._recorder.record_unchanged_replicas(runs, _ONLINE)
        ctx = self.controller_context
        self._batch.add_leader_and_isr_requests_by_replica(
            runs,
            ctx.partitions_leadership_info,
            ctx.partition_full_replica_assignment,
            self._offline.leaving,
            False,
        )

    def _to_online_in_bulk(
        self, replica_id: int, replicas: list[PartitionAndReplica], previous: Sequence[ReplicaState | None]
    ) -> bool:
        """``_to_online`` from valid ``previous`` states (a failover's 240,000 at RF 3), for all at once:
        requests queued, states set (unless Online already), successes recorded for a bulk sink.
        False, nothing done, if a replica is NewReplica or each is logged or recorded on its own."""
        if self._recorder.per_row:
            return False
        if _NEW in previous:
            return False
        ctx = self.controller_context
        leadership = ctx.partitions_leadership_info
        tps = list(map(itemgetter(0), replicas))
        # partitions the startup leaves to the election get its requests instead (core.replica_offline)
        leaving = self._offline.leaving
        told = dropped_members(leaving, tps) if leaving else tps
        self._online_requests.append((replica_id, list(kept_members(leadership, told))))
        if previous.count(_ONLINE) != len(previous):  # a failover's replicas are Online already
            ctx.replica_states.update(zip(replicas, repeat(_ONLINE)))
        self._recorder.record_unchanged(replica_id, tps, cast("list[ReplicaState]", previous), _ONLINE)
        return True

    def _to_online(self, replica_id: int, valid: _Valid, bulk_tried: bool = False) -> None:
        # ``bulk_tried`` False: some replicas were invalid, and the bulk path sees the valid ones first
        if not bulk_tried and self._to_online_in_bulk(
            replica_id, [r for r, _ in valid], [s for _, s in valid]
        ):
            return
        ctx = self.controller_context
        states = ctx.replica_states
        leadership = ctx.partitions_leadership_info
        full_assignment = ctx.partition_full_replica_assignment
        recorder = self._recorder
        tracking = recorder.tracking
        leaving = self._offline.leaving
        requests: list[TopicPartition] = []
        self._online_requests.append((replica_id, requests))
        for replica, state in valid:
            tp = replica.topic_partition
            if state is _NEW:
                # New -> Online only fixes up the assignment: the replica already got its request.
                a = full_assignment(tp)
                if replica_id not in a.replicas:
                    self._queue_online_requests()
                    requests = []
                    self._online_requests.append((replica_id, requests))
                    _LOG.error("Adding replica (%s) that is not part of the assignment %s", replica_id, a)
                    fixed = ReplicaAssignment(
                        (*a.replicas, replica_id), a.adding_replicas, a.removing_replicas
                    )
                    ctx.update_partition_full_replica_assignment(tp, fixed)
            elif tp in leadership and tp not in leaving:
                requests.append(tp)
            states[replica] = _ONLINE
            if tracking:
                info = leadership.get(tp)
                recorder.succeeded(replica, state, _ONLINE, info, info)
