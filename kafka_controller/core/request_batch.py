"""ControllerBrokerRequestBatch: the requests one state change produces, sent per broker
(docs/controller-behaviour.md §6).

The state machines queue per-partition entries (``add_*``); ``send_requests_to_brokers`` turns them
into one LeaderAndIsr, one UpdateMetadata and one (or, before IBP 2.6, two) StopReplica request per
live-or-shutting-down broker, in that order, and hands them to the ``BrokerChannel`` port. Response
callbacks run on channel threads and only build an event for ``event_sink``
(docs/rules.md, callbacks only enqueue).

Requests hold what their version carries on the wire: topic ids only from LeaderAndIsr v5 (zero
ids for the grouped v2-v4) and UpdateMetadata v7, StopReplica leader epochs only from v3 (else -1).

Built for large batches: an entry's request state is built once per partition and shared by every
broker that gets it; the UpdateMetadata partition list, live-broker list and topic ids are built
once per send and shared by all UpdateMetadata requests (receivers treat requests as read-only).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from itertools import chain
from typing import NoReturn

from kafka_controller.core.batch_api import LeaderAndIsrEntry, isr_removal_entries, told_by_replica_id
from kafka_controller.core.context import ControllerContext
from kafka_controller.core.ibp import InterBrokerProtocolVersion
from kafka_controller.core.replica_runs import ReplicaRuns
from kafka_controller.core.request_batch_send import (
    LeaderAndIsrMemo,
    RequestBatchSender,
    summarize_requests,
)
from kafka_controller.core.request_batch_states import (
    OfflineReplicas,
    fill_broker_maps,
    isr_removal_states,
    leader_and_isr_and_metadata_states,
    leader_and_isr_state,
    leader_and_isr_states,
    online_replica_states,
    queue_distinct_partitions,
)
from kafka_controller.domain.errors import IllegalControllerStateError
from kafka_controller.domain.requests import (
    LeaderAndIsrPartitionState,
    StopReplicaPartitionState,
    UpdateMetadataPartitionState,
)
from kafka_controller.domain.values import (
    EMPTY_ASSIGNMENT,
    EPOCH_DURING_DELETE,
    LEADER_DURING_DELETE,
    NO_EPOCH,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
    TopicPartition,
)
from kafka_controller.hotpath import new_tuple
from kafka_controller.ports import BrokerChannel

__all__ = ["ControllerBrokerRequestBatch"]

log = logging.getLogger(__name__)
state_change_log = logging.getLogger("kafka_controller.state_change")

_DEBUG = logging.DEBUG
_INFO = logging.INFO


class ControllerBrokerRequestBatch:
    """Kafka's ``ControllerBrokerRequestBatch``: four structures, cleared by a successful send."""

    def __init__(
        self,
        controller_id: int,
        context: ControllerContext,
        channel: BrokerChannel,
        event_sink: Callable[[object], None],
        *,
        ibp: InterBrokerProtocolVersion | str = "2.8-IV1",
        inter_broker_listener_name: str | None = None,
    ) -> None:
        """``inter_broker_listener_name``: when set, ``live_leaders`` carry only that listener's
        endpoint (Kafka's ``Node``); when ``None`` they carry the registered brokers unchanged."""
        self.controller_id = controller_id
        self.ibp = InterBrokerProtocolVersion.parse(ibp)
        self._context = context
        self._channel = channel
        self._event_sink = event_sink
        self._listener = inter_broker_listener_name
        self._lai_version = self.ibp.leader_and_isr_request_version
        self._um_version = self.ibp.update_metadata_request_version
        self._sr_version = self.ibp.stop_replica_request_version
        self._lai: dict[int, dict[TopicPartition, LeaderAndIsrPartitionState]] = {}
        self._sr: dict[int, dict[TopicPartition, StopReplicaPartitionState]] = {}
        self._um_brokers: set[int] = set()
        # "UpdateMetadata to every live-or-shutting-down broker", queued by each LeaderAndIsr entry
        # and resolved into ``_um_brokers`` when the batch is next looked at or sent (in the
        # controller, within the same event), so that 100,000 entries do not build 100,000 sets.
        self._um_to_all_live = False
        self._um_partitions: dict[TopicPartition, UpdateMetadataPartitionState] = {}
        # The last LeaderAndIsr state built per partition by a one-entry call, and its inputs (see
        # ``add_leader_and_isr_request_for_brokers``); lives as long as the queues.
        self._lai_memo: LeaderAndIsrMemo = {}
        versions = (self._lai_version, self._um_version, self._sr_version)
        queues = (self._lai, self._sr, self._um_brokers, self._um_partitions, self._lai_memo)
        self._sender = RequestBatchSender(
            controller_id, context, channel, event_sink, versions, inter_broker_listener_name, queues
        )

    # ------------------------------------------------------------------ the four structures (read-only)
    @property
    def leader_and_isr_request_map(self) -> Mapping[int, Mapping[TopicPartition, LeaderAndIsrPartitionState]]:
        return self._lai

    @property
    def stop_replica_request_map(self) -> Mapping[int, Mapping[TopicPartition, StopReplicaPartitionState]]:
        return self._sr

    @property
    def update_metadata_request_broker_set(self) -> Collection[int]:
        return self._resolve_um_brokers()

    @property
    def update_metadata_request_partition_info_map(
        self,
    ) -> Mapping[TopicPartition, UpdateMetadataPartitionState]:
        return self._um_partitions

    def _resolve_um_brokers(self) -> set[int]:
        if self._um_to_all_live:
            self._um_to_all_live = False
            self._um_brokers.update(self._context.live_or_shutting_down_broker_ids)
        return self._um_brokers

    # ------------------------------------------------------------------ lifecycle
    def send_requests_to_brokers(self, controller_epoch: int) -> None:
        """LeaderAndIsr, then UpdateMetadata, then StopReplica; only to live-or-shutting-down brokers.

        On any error the structures are left as they are (the controller's ``handle_illegal_state``
        clears them and resigns) and the error is re-raised as ``IllegalControllerStateError``.
        """
        try:
            self._resolve_um_brokers()
            self._sender.send(controller_epoch)
        except Exception as e:
            self._fail(e)

    def _fail(self, e: Exception) -> NoReturn:
        um = f"{sorted(self._resolve_um_brokers())} for {len(self._um_partitions)} partitions"
        lai, sr = summarize_requests(self._lai), summarize_requests(self._sr)
        pending = f"LeaderAndIsr {lai}, UpdateMetadata to {um}, StopReplica {sr}"
        log.error("Haven't been able to send controller requests (%s): %r", pending, e)
        raise IllegalControllerStateError(f"failed to send controller requests to brokers: {e!r}") from e

    def new_batch(self) -> None:
        """Raise if a previous batch was neither sent nor cleared; the partition map alone is allowed."""
        prefix = "Controller to broker state change requests batch is not empty while creating a new one."
        if self._lai:
            raise IllegalControllerStateError(
                f"{prefix} Some LeaderAndIsr state changes {summarize_requests(self._lai)} might be lost"
            )
        if self._sr:
            raise IllegalControllerStateError(
                f"{prefix} Some StopReplica state changes {summarize_requests(self._sr)} might be lost"
            )
        if self._resolve_um_brokers():
            raise IllegalControllerStateError(
                f"{prefix} Some UpdateMetadata state changes to brokers {sorted(self._um_brokers)} "
                f"with partition info for {len(self._um_partitions)} partitions might be lost"
            )

    def clear(self) -> None:
        self._lai.clear()
        self._lai_memo.clear()
        self._sr.clear()
        self._um_to_all_live = False
        self._um_brokers.clear()
        self._um_partitions.clear()

    # ------------------------------------------------------------------ queueing
    def add_leader_and_isr_request_for_brokers(
        self,
        broker_ids: Iterable[int],
        tp: TopicPartition,
        leader_isr_and_controller_epoch: LeaderIsrAndControllerEpoch,
        replica_assignment: ReplicaAssignment,
        is_new: bool,
    ) -> None:
        """Queue ``tp``'s state for each broker (``is_new`` is sticky within the batch), then queue
        UpdateMetadata for ``tp`` to every live-or-shutting-down broker.

        Called once per replica (a new topic's NewReplica transitions) with the same leadership
        and assignment objects, so the sharing memo here lives as long as the queues: at RF 3 each
        state would otherwise be built three times."""
        entry = (broker_ids, tp, leader_isr_and_controller_epoch, replica_assignment)
        self._queue_leader_and_isr_states((entry,), is_new, self._lai_memo)

    def add_leader_and_isr_requests(self, entries: Iterable[LeaderAndIsrEntry], is_new: bool) -> None:
        """``add_leader_and_isr_request_for_brokers(*entry, is_new)`` for each entry, in order.

        The state machines queue a partition once per replica: a failover makes 300,000 calls at
        RF 3. Entries of one partition with the same leadership and assignment objects share one
        state (states are immutable), found through a memo that lives only for the call: freed
        before the UpdateMetadata states are built, it is not part of the batch's peak (at
        100,000 partitions ~12 MB; a memo kept until the send was). What the UpdateMetadata
        entries need from the context (leadership, assignments, live brokers, offline log dirs,
        topics being deleted) cannot change while these entries are queued, so a partition's
        UpdateMetadata state comes out the same for each of its entries: it is built once per
        distinct partition, after the LeaderAndIsr states, and each distinct replica list's
        offline subset once. When no partition repeats (the election's entries, and the ISR
        removal's when they come as entries), there is nothing to share: no memo, each broker's
        map filled in one pass, the UpdateMetadata states built in the same pass as the
        LeaderAndIsr ones (``queue_distinct_partitions``).
        """
        entries = entries if isinstance(entries, list) else list(entries)
        unled = queue_distinct_partitions(self._context, self._lai, self._um_partitions, entries, is_new)
        if unled is None:  # a partition repeats
            self._queue_leader_and_isr_states(entries, is_new, None)
        elif entries:
            self._um_to_all_live = True
            for tp in unled:
                log.info("Leader not yet assigned for partition %s. Skip sending UpdateMetadataRequest.", tp)

    def add_leader_and_isr_requests_by_broker(
        self,
        groups: Iterable[tuple[int, Sequence[TopicPartition]]],
        leadership: Mapping[TopicPartition, LeaderIsrAndControllerEpoch],
        full_assignment: Callable[[TopicPartition], ReplicaAssignment],
        is_new: bool,
    ) -> None:
        """``add_leader_and_isr_requests`` with the entries ``((broker_id,), tp, leadership[tp],
        full_assignment(tp))`` for each ``(broker_id, partitions)`` and each of its partitions,
        in order: the OnlineReplica form (240,000 entries at 100,000 partitions RF 3).

        The inputs of a partition are the same for all its entries, so its state is built once
        (as the bulk memo shares it) and each broker's map filled in one pass: the
        same keys in the same order, with equal states, as the entry-at-a-time loop. A broker
        that already has partitions queued takes that loop's path (``is_new`` is sticky)."""
        groups = [(broker_id, tps) for broker_id, tps in groups if tps]
        if not groups:
            return
        partitions = dict.fromkeys(chain.from_iterable(tps for _, tps in groups))
        ctx = self._context
        from_context = full_assignment == ctx.partition_full_replica_assignment
        states: dict[TopicPartition, LeaderAndIsrPartitionState]
        if from_context and leadership is ctx.partitions_leadership_info:  # both kinds in one pass
            states = leader_and_isr_and_metadata_states(ctx, partitions, is_new, self._um_partitions)
            fill_broker_maps(self._lai, groups, states, is_new)
            self._um_to_all_live = True
            return
        if from_context:
            states = leader_and_isr_states(partitions, leadership, ctx.partition_assignments, is_new)
        else:
            states = {}
            for tp in partitions:
                states[tp] = leader_and_isr_state(tp, leadership[tp], full_assignment(tp), is_new)
        fill_broker_maps(self._lai, groups, states, is_new)
        self._um_to_all_live = True
        self._queue_update_metadata_states(partitions)

    def add_leader_and_isr_requests_by_replica(
        self,
        runs: ReplicaRuns,
        leadership: Mapping[TopicPartition, LeaderIsrAndControllerEpoch],
        full_assignment: Callable[[TopicPartition], ReplicaAssignment],
        skip: Collection[TopicPartition],
        is_new: bool,
    ) -> None:
        """``add_leader_and_isr_requests_by_broker(told_by_replica_id(runs.replicas, leadership,
        skip), leadership, full_assignment, is_new)``: a whole OnlineReplica call's entries.

        With nothing queued for any broker yet and the inputs the context's (no topic queued for
        deletion, no log dir offline), the queues are built run by run (``online_replica_states``):
        the same keys in the same order, with equal states, without grouping, filtering and looking
        up each of a failover's 240,000 replicas (RF 3) on its own."""
        ctx = self._context
        of_replicas = OfflineReplicas(ctx).of_replicas
        if (
            self._lai
            or of_replicas is None
            or ctx.topics_to_be_deleted
            or leadership is not ctx.partitions_leadership_info
            or full_assignment != ctx.partition_full_replica_assignment
        ):
            groups = told_by_replica_id(runs.replicas, leadership, skip)
            self.add_leader_and_isr_requests_by_broker(groups, leadership, full_assignment, is_new)
            return
        by_broker, metadata = online_replica_states(ctx, runs, skip, of_replicas, is_new)
        if metadata:
            self._lai.update(by_broker)
            self._um_partitions.update(metadata)
            self._um_to_all_live = True

    def add_isr_removal_requests(
        self,
        replica_id: int,
        removed: Sequence[tuple[TopicPartition, LeaderIsrAndControllerEpoch]],
        full_assignment: Callable[[TopicPartition], ReplicaAssignment],
        topics_to_be_deleted: Collection[str],
    ) -> None:
        """``add_leader_and_isr_requests(isr_removal_entries(replica_id, removed, full_assignment,
        topics_to_be_deleted), False)``: the OfflineReplica step's requests after its ISR removal.

        With the context's assignments and deletion queue, built partition by partition
        (``isr_removal_states``): the same states in the same places as the entries' bulk path
        (``queue_distinct_partitions``), without building an entry per partition first; a
        partition removed twice goes the entries' way (equal UpdateMetadata states queued again)."""
        ctx = self._context
        if (
            full_assignment == ctx.partition_full_replica_assignment
            and topics_to_be_deleted is ctx.topics_to_be_deleted
        ):
            built = isr_removal_states(ctx, self._lai, self._um_partitions, replica_id, removed)
            if built is not None:
                count, unled = built
                if count:
                    self._um_to_all_live = True
                    for tp in unled:
                        log.info(
                            "Leader not yet assigned for partition %s. Skip sending UpdateMetadataRequest.",
                            tp,
                        )
                return
        entries = isr_removal_entries(replica_id, removed, full_assignment, topics_to_be_deleted)
        self.add_leader_and_isr_requests(entries, False)

    def _queue_leader_and_isr_states(
        self, entries: Iterable[LeaderAndIsrEntry], is_new: bool, memo: LeaderAndIsrMemo | None
    ) -> None:
        """Both ``add_leader_and_isr_*``: each entry's state for its brokers, shared through
        ``memo`` (a memo for this call alone when None, freed before the UpdateMetadata states are
        built) by entries with the same inputs, then the partitions' UpdateMetadata states."""
        requests = self._lai
        shares: LeaderAndIsrMemo = {} if memo is None else memo
        partitions: dict[TopicPartition, None] = {}
        for broker_ids, tp, info, assignment in entries:
            partitions[tp] = None
            state: LeaderAndIsrPartitionState | None = None
            for broker_id in broker_ids:
                if broker_id < 0:
                    continue
                per_broker = requests.get(broker_id)
                if per_broker is None:
                    per_broker = requests[broker_id] = {}
                previous = per_broker.get(tp)
                if previous is not None and previous.is_new and not is_new:
                    per_broker[tp] = leader_and_isr_state(tp, info, assignment, True)
                    continue
                if state is None:
                    shared = shares.get(tp)
                    if (
                        shared is not None
                        and shared[0] is info
                        and shared[1] is assignment
                        and shared[2] == is_new
                    ):
                        state = shared[3]
                    else:
                        state = leader_and_isr_state(tp, info, assignment, is_new)
                        shares[tp] = (info, assignment, is_new, state)
                per_broker[tp] = state
        del shares
        if partitions:
            self._um_to_all_live = True
            self._queue_update_metadata_states(partitions)

    def _queue_update_metadata_states(self, partitions: Iterable[TopicPartition]) -> None:
        """UpdateMetadata states from the context's leadership and assignment (for
        ``add_leader_and_isr_requests``: not the entry's), once per partition, replacing what is
        queued for it (an equal state when its inputs did not change: no memo of the inputs is
        kept, it would cost ~13 MB at 100,000 partitions and a failover never queues a partition
        twice with the same inputs)."""
        ctx = self._context
        deleting = ctx.topics_to_be_deleted
        leadership = ctx.partitions_leadership_info
        assignments = ctx.partition_assignments
        queued = self._um_partitions
        offline_replicas = OfflineReplicas(ctx)
        of_replicas = offline_replicas.of_replicas
        # Partitions come topic by topic: the topic's assignments and deletion flag looked up once.
        last_topic: str | None = None
        per_topic: Mapping[int, ReplicaAssignment] = {}
        topic_deleted = False
        for tp in partitions:
            current = leadership.get(tp)
            if current is None:
                log.info("Leader not yet assigned for partition %s. Skip sending UpdateMetadataRequest.", tp)
                continue
            topic, partition = tp
            if topic != last_topic:
                last_topic = topic
                per_topic = assignments.get(topic) or {}
                topic_deleted = topic in deleting
            replicas = per_topic.get(partition, EMPTY_ASSIGNMENT).replicas
            offline = offline_replicas(tp, replicas) if of_replicas is None else of_replicas(replicas)
            (leader, leader_epoch, isr, zk_version), controller_epoch = current
            if topic_deleted:  # LeaderAndIsr.duringDelete(isr): leader -2, epoch 0, version 0, ISR kept
                leader, leader_epoch, zk_version = LEADER_DURING_DELETE, 0, 0
            # build_update_metadata_partition_state's tuple, without its call
            queued[tp] = new_tuple(
                UpdateMetadataPartitionState,
                (
                    topic,
                    partition,
                    controller_epoch,
                    leader,
                    leader_epoch,
                    isr,
                    zk_version,
                    replicas,
                    offline,
                ),
            )

    def add_stop_replica_request_for_brokers(
        self, broker_ids: Iterable[int], tp: TopicPartition, delete_partition: bool
    ) -> None:
        """Leader epoch -2 once the topic is queued for deletion, else the cached one (-1 if none);
        ``delete_partition`` is sticky within the batch."""
        self.add_stop_replica_requests(tuple(broker_ids), (tp,), delete_partition)

    def add_stop_replica_requests(
        self, broker_ids: Sequence[int], partitions: Iterable[TopicPartition], delete_partition: bool
    ) -> None:
        """``add_stop_replica_request_for_brokers(broker_ids, tp, delete_partition)`` for each
        partition, in order (a failover stops 20,000 replicas per dead broker at 100,000
        partitions RF 1, 60,000 at RF 3). Equal states are one shared (immutable) tuple: a state
        is a partition number, a leader epoch and the flag, so 60,000 of them take a few hundred
        distinct values, and building one each held ~4 MB at the failover's memory peak (the ISR
        removal's requests being built)."""
        tps = list(partitions)
        if not tps:
            return
        ctx = self._context
        deleting = ctx.topics_to_be_deleted
        leadership = ctx.partitions_leadership_info
        requests = self._sr
        # A broker with nothing queued yet (a failover's dead broker) has no entry to keep
        fresh: list[dict[TopicPartition, StopReplicaPartitionState]] = []
        targets: list[dict[TopicPartition, StopReplicaPartitionState]] = []
        for broker_id in broker_ids:
            if broker_id < 0:
                continue
            per_broker = requests.get(broker_id)
            if per_broker is None:
                per_broker = requests[broker_id] = {}
            (targets if per_broker else fresh).append(per_broker)
        shared: dict[int, dict[int, StopReplicaPartitionState]] = {}  # leader epoch -> partition -> state
        for tp in tps:
            if tp.topic in deleting:
                leader_epoch = EPOCH_DURING_DELETE
            else:
                info = leadership.get(tp)
                leader_epoch = NO_EPOCH if info is None else info.leader_and_isr.leader_epoch
            partition = tp.partition
            by_partition = shared.get(leader_epoch)
            if by_partition is None:
                by_partition = shared[leader_epoch] = {}
            state = by_partition.get(partition)
            if state is None:
                state = by_partition[partition] = new_tuple(
                    StopReplicaPartitionState, (partition, leader_epoch, delete_partition)
                )
            for per_broker in fresh:
                per_broker[tp] = state
            for per_broker in targets:
                previous = per_broker.get(tp)
                if previous is not None and previous.delete_partition and not delete_partition:
                    per_broker[tp] = StopReplicaPartitionState(tp.partition, leader_epoch, True)
                else:
                    per_broker[tp] = state

    def add_update_metadata_request_for_brokers(
        self, broker_ids: Iterable[int], partitions: Collection[TopicPartition] = ()
    ) -> None:
        """Queue the brokers, and the partitions that have leadership (an empty set still sends
        the live-broker list)."""
        self._um_brokers.update(b for b in broker_ids if b >= 0)
        if partitions:
            self._queue_update_metadata_states(partitions)
