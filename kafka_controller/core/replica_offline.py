"""``OfflineReplicaStep``: the replica state machine's move to OfflineReplica (Kafka's
``ReplicaStateMachine.doHandleStateChanges``, its OfflineReplica case), and the startup's partitions
left to the election (the README's deviations table).

Kafka's controller startup moves every offline replica to OfflineReplica before the partition
state machine starts. A partition the dead broker led is then written twice: by the ISR removal
(no leader, ISR without it, next leader epoch, with its LeaderAndIsr and UpdateMetadata), then by
the offline election (new leader, next leader epoch, requests again).

With ``leave_offline_leaders_to_election`` on (``KafkaController`` turns it on), startup leaves to the
election each partition that
* is led by an offline replica, or by none;
* belongs to a topic not queued for deletion;
* has its offline replicas all on brokers that are gone (a replica on a live broker's failed log
  dir would be told the leaderless state: such a partition goes Kafka's way);
* has an online replica of its assignment in its ISR.

The offline election elects such a partition from its ISR and keeps only the ISR's online
replicas, so its one write gives the leader and ISR that Kafka's two give, with the leader epoch
bumped once instead of twice; no leaderless state reaches ZooKeeper or the brokers in between.

Its offline replicas still become OfflineReplica at once (their StopReplica queued), without a
write or a request of their own. The startup's OnlineReplica requests (LeaderAndIsr to its online
replicas, UpdateMetadata to every broker) skip it too: they would carry the dead leader's state,
which the brokers have from the previous controller, a moment before the election's carry the new
one. A partition the election leaves without a leader (its state changed behind the controller's
back) then goes through Kafka's ISR removal (``finish_offline_left_to_election``), so it ends as in
Kafka.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from itertools import repeat

from kafka_controller.core.batch_api import RequestBatch
from kafka_controller.core.context import ControllerContext
from kafka_controller.core.election import LiveReplicaFilter
from kafka_controller.core.replica_isr import IsrRemoval
from kafka_controller.core.replica_records import ReplicaTransitionRecorder
from kafka_controller.domain.audit_records import OUTCOME_FAILED
from kafka_controller.domain.states import PartitionState, ReplicaState
from kafka_controller.domain.values import LeaderIsrAndControllerEpoch, PartitionAndReplica, TopicPartition
from kafka_controller.hotpath import values_at

__all__ = ["OfflineReplicaStep", "left_to_election"]

_STATE_CHANGE_LOG = logging.getLogger("kafka_controller.state_change")
_OFFLINE = ReplicaState.OFFLINE_REPLICA
_ONLINE_PARTITION = PartitionState.ONLINE_PARTITION
#: Audit text for a replica that kept its state although nothing failed (docs/controller-behaviour.md §4.4).
_DROPPED = "state znode missing and the topic is queued for deletion: change dropped"
_Valid = list[tuple[PartitionAndReplica, ReplicaState]]


class OfflineReplicaStep:
    """Moves one replica id's valid replicas to OfflineReplica: StopReplica, the ``isr_removal``'s
    write, LeaderAndIsr to the remaining replicas (or UpdateMetadata for a partition without a
    leader), each outcome told to the ``recorder``; and, at startup, which partitions it leaves to
    the election."""

    def __init__(
        self,
        context: ControllerContext,
        batch: RequestBatch,
        isr_removal: IsrRemoval,
        recorder: ReplicaTransitionRecorder,
        *,
        leave_offline_leaders_to_election: bool = False,
        prewrite_isr_removal: bool = False,
        on_left_to_election: Callable[[frozenset[TopicPartition]], None] | None = None,
    ) -> None:
        self.controller_context = context
        self._batch = batch
        self._isr_removal = isr_removal
        self._recorder = recorder
        #: Leave the partitions the offline election will write to it at startup (module docs).
        self.leave_offline_leaders_to_election = leave_offline_leaders_to_election
        #: Start startup's ISR-removal write while its online replicas move (``core.replica_isr``).
        self.prewrite_isr_removal = prewrite_isr_removal
        #: Told the partitions left to the election before the online replicas move, to start its
        #: write (``PartitionStateMachine.start_election_prewrite``, as ``KafkaController`` wires it).
        self.on_left_to_election = on_left_to_election
        #: The startup's partitions left to the election while its offline replicas move (the
        #: OnlineReplica step skips their requests too).
        self.leaving: frozenset[TopicPartition] = frozenset()
        # their offline replicas, until ``take_left``
        self._left: Sequence[PartitionAndReplica] = ()

    def prepare_startup(self, offline: Sequence[PartitionAndReplica]) -> None:
        """Before startup's online replicas move (their requests skip the partitions left)."""
        self.leaving, self._left = frozenset(), ()
        if self.leave_offline_leaders_to_election:
            self.leaving = left_to_election(self.controller_context, offline)
        leaving = self.leaving
        prewrite = self.prewrite_isr_removal and bool(offline)
        # one pass over the offline replicas (60,000 at RF 3): those left to the election, the
        # partitions of the others (the ISR removal's) and whether they are one broker's
        left: list[PartitionAndReplica] = []
        removed: list[TopicPartition] = []
        replica_ids: set[int] = set()
        if leaving or prewrite:
            for replica in offline:
                tp, replica_id = replica
                replica_ids.add(replica_id)
                if tp in leaving:
                    left.append(replica)
                else:
                    removed.append(tp)
        if leaving:
            self._left = left
            if self.on_left_to_election is not None:
                self.on_left_to_election(leaving)
        # One dead broker (one replica id): its ISR removal is one round, which starts now.
        if prewrite and removed and len(replica_ids) == 1:
            self._isr_removal.start_isr_prewrite(offline[0].replica, removed)

    def end_startup(self) -> None:
        """Startup's offline replicas moved (or startup failed first): nothing is left to the
        election any more, and a started ISR-removal round nobody took is waited for."""
        self.leaving = frozenset()
        self._isr_removal.abandon_isr_prewrite()

    def take_left(self) -> list[PartitionAndReplica]:
        """The offline replicas of the partitions left to the election that the partition state
        machine's startup did not bring online (none, unless a state changed meanwhile); forgotten."""
        left, self._left = self._left, ()
        states = self.controller_context.partition_states
        return [r for r in left if states.get(r.topic_partition) is not _ONLINE_PARTITION]

    def to_offline(self, replica_id: int, valid: _Valid) -> None:
        ctx = self.controller_context
        states = ctx.replica_states
        leadership = ctx.partitions_leadership_info
        # the partitions listed once, for the StopReplica requests and for the split below
        tps = [replica.topic_partition for replica, _ in valid]
        self._batch.add_stop_replica_requests((replica_id,), tps, False)
        led: list[tuple[PartitionAndReplica, ReplicaState, LeaderIsrAndControllerEpoch]] = []
        led_tps: list[TopicPartition] = []
        leaderless: _Valid = []
        recorder = self._recorder
        leaving = self.leaving
        run = recorder.changed_run(_OFFLINE)  # successes recorded in bulk, in runs between failures
        for (replica, state), tp, info in zip(valid, tps, map(leadership.get, tps), strict=True):
            if info is None:
                leaderless.append((replica, state))
            elif leaving and tp in leaving:
                states[replica] = _OFFLINE  # the election writes and sends its new state
                if run is not None:
                    run.append((replica, state, info, info))
                elif recorder.tracking:
                    recorder.succeeded(replica, state, _OFFLINE, info, info)
            else:
                led.append((replica, state, info))
                led_tps.append(tp)
        recorder.record_changed(run, _OFFLINE)
        del tps

        if led:
            failures: dict[TopicPartition, Exception] = {}
            updated = self._isr_removal.remove_replicas_from_isr(replica_id, led_tps, failures)
            # (partition, new leadership) of each replica taken out of the ISR, in order: their
            # LeaderAndIsr and UpdateMetadata are built partition by partition by the batch
            removed: list[tuple[TopicPartition, LeaderIsrAndControllerEpoch]]
            log_info = _STATE_CHANGE_LOG.isEnabledFor(logging.INFO)
            tracking = recorder.tracking
            run = recorder.changed_run(_OFFLINE)
            if len(updated) == len(led) and not log_info and (run is not None or not tracking):
                # Each replica's partition written once (no failure, none twice), no line to log and
                # no row of its own to record: the loop below, in bulk.
                replicas, previous, befores = zip(*led, strict=True)
                removed = list(zip(led_tps, values_at(updated, led_tps), strict=True))
                states.update(zip(replicas, repeat(_OFFLINE)))
                if run is not None:
                    run.extend(zip(replicas, previous, befores, (after for _, after in removed), strict=True))
                del replicas, previous, befores
                led, led_tps = [], []
            else:
                removed = []
            for (replica, state, before), tp in zip(led, led_tps, strict=True):
                after = updated.get(tp)
                if after is None:  # failed (logged already) or dropped: the state stays
                    recorder.record_changed(run, _OFFLINE)
                    error = failures.get(tp)
                    recorder.audit_record(
                        replica, state, _OFFLINE, OUTCOME_FAILED, before, None, error or _DROPPED
                    )
                    continue
                if log_info and recorder.isr_lines.take():
                    _STATE_CHANGE_LOG.info(
                        "Partition %s state changed to %s after removing replica %s from the ISR as part "
                        "of transition to OfflineReplica",
                        tp,
                        after,
                        replica_id,
                    )
                removed.append((tp, after))
                states[replica] = _OFFLINE
                if run is not None:
                    run.append((replica, state, before, after))
                elif tracking:
                    recorder.succeeded(replica, state, _OFFLINE, before, after)
            recorder.record_changed(run, _OFFLINE)
            # Queueing the requests is the failover's memory peak: let the ISR removal's maps go first.
            del led, led_tps, updated, failures
            self._batch.add_isr_removal_requests(
                replica_id, removed, ctx.partition_full_replica_assignment, ctx.topics_to_be_deleted
            )

        if leaderless:
            # KAFKA-6650: UpdateMetadata with only the live broker list. One call for all of them
            # queues exactly what Kafka's one call per partition does.
            self._batch.add_update_metadata_request_for_brokers(
                sorted(ctx.live_or_shutting_down_broker_ids), [r.topic_partition for r, _ in leaderless]
            )
            for replica, state in leaderless:
                states[replica] = _OFFLINE
                if recorder.tracking:
                    recorder.succeeded(replica, state, _OFFLINE)


def left_to_election(
    ctx: ControllerContext, offline: Sequence[PartitionAndReplica]
) -> frozenset[TopicPartition]:
    """The partitions of ``offline`` replicas that the startup leaves to the election (module docs):
    led by no online replica, topic not queued for deletion, every offline replica on a broker that
    is gone (no request reaches it), an online replica of the assignment in the ISR (the offline
    election's clean candidates, so it elects whatever the topic's config)."""
    leadership = ctx.partitions_leadership_info
    live = LiveReplicaFilter(ctx)
    ids, online = live.broker_ids, live.is_online
    registered = ctx.live_or_shutting_down_broker_ids
    # No failed log dir and no broker shutting down: online is live, and no offline replica is on a
    # registered broker, so the answer depends on the ISR and the assignment alone (few distinct).
    simple = not live.has_offline_dirs and not ctx.shutting_down_broker_ids
    to_delete = ctx.topics_to_be_deleted
    left: set[TopicPartition] = set()
    decided: dict[tuple[tuple[int, ...], tuple[int, ...]], bool] = {}
    for replica in offline:
        tp = replica.topic_partition
        info = leadership.get(tp)
        if info is None:
            continue
        lai = info.leader_and_isr
        # ``online(lai.leader, tp)``, without a call where liveness alone decides it
        if (lai.leader in ids if simple else online(lai.leader, tp)) or tp.topic in to_delete:
            continue
        isr = lai.isr
        if simple and ids.isdisjoint(isr):  # no live ISR member (RF 1's every partition)
            continue
        assignment = ctx.partition_replica_assignment(tp)
        if simple:
            elects = decided.get((isr, assignment))
            if elects is None:
                elects = decided[(isr, assignment)] = any(r in isr and r in ids for r in assignment)
        elif any(r in registered and not online(r, tp) for r in assignment):
            # in Kafka that replica's broker is told the ISR removal's leaderless state: Kafka's way
            continue
        else:
            elects = any(r in isr and online(r, tp) for r in assignment)
        if elects:
            left.add(tp)
    return frozenset(left)
