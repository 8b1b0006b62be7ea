"""CoreHarness: the core wired as the controller wires it, with the controller flows of
docs/controller-behaviour.md §8 written out step by step, in Kafka's order, over an in-memory
ZooKeeper tree.

Real: ``ControllerContext``, the partition and replica state machines (each with its own
``ControllerBrokerRequestBatch``, plus one for the controller's own sends), the in-memory store
(Kafka's znodes, versions, and fencing by the real ``/controller_epoch`` version the harness gets by
registering as controller), a ``RecordingBrokerChannel`` and a ``RecordingAuditSink``.

Simplified on purpose:

* Brokers are not registered in the store: ``start_brokers`` / ``fail_brokers`` are the BrokerChange
  event after ``/brokers/ids`` was read; broker epochs come from a counter that only goes up, as
  czxids do. Nobody answers broker requests unless a test calls ``channel.respond*``.
* Topic deletion, topic ids, watches and the ``/admin/*`` request znodes are not modelled.
* ``reassign`` is KIP-455's U/A/B phases for one partition (docs/controller-behaviour.md §8.8).
  It refuses, with nothing written,
  a partition without leadership (Kafka would half-apply it, then answer UNKNOWN_SERVER_ERROR).
  Completion is checked after each ``set_isr`` of a reassigning partition and on broker startup.
* ``set_isr`` is the controller side of an AlterIsr from the running leader, built from the
  controller's cached state: the leader stays in the ISR, which stays within the replicas and only
  gains live brokers.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Iterable, Mapping, Sequence

from kafka_controller.core import strategies
from kafka_controller.core.context import ControllerContext
from kafka_controller.core.partition_state_machine import PartitionStateMachine
from kafka_controller.core.replica_state_machine import ReplicaStateMachine
from kafka_controller.core.request_batch import ControllerBrokerRequestBatch
from kafka_controller.domain.config_keys import UNCLEAN_LEADER_ELECTION_ENABLE
from kafka_controller.domain.errors import (
    BrokerNotAvailableError,
    InvalidArgumentError,
    StateChangeFailedError,
)
from kafka_controller.domain.states import PartitionState, ReplicaState
from kafka_controller.domain.values import (
    NO_LEADER,
    Broker,
    EndPoint,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    PartitionAndReplica,
    ReplicaAssignment,
    TopicPartition,
)
from kafka_controller.dryrun.memory_store import InMemoryMetadataStore
from kafka_controller.dryrun.recording import RecordingAuditSink
from kafka_controller.dryrun.recording_channel import RecordingBrokerChannel
from kafka_controller.ports import AuditSink
from kafka_controller.testing.core_harness_reassignment import (
    HarnessReassignment,
    HarnessSender,
    _ids,
    known_partition,
)

__all__ = ["CoreHarness", "ElectionOutcomes"]

ElectionOutcomes = dict[TopicPartition, LeaderAndIsr | Exception]

_ONLINE = PartitionState.ONLINE_PARTITION
_OFFLINE = PartitionState.OFFLINE_PARTITION
_PR = PartitionAndReplica
_CLEAN = strategies.OfflinePartitionLeaderElectionStrategy(False)
_UNCLEAN = strategies.OfflinePartitionLeaderElectionStrategy(True)
_PREFERRED = strategies.PreferredReplicaPartitionLeaderElectionStrategy()
_SHUTDOWN = strategies.ControlledShutdownPartitionLeaderElectionStrategy()
_REASSIGN = strategies.ReassignPartitionLeaderElectionStrategy()


class CoreHarness:
    """A controller without a runtime: call a flow, then inspect ``store``, ``context``,
    ``channel.sent`` and ``audit.records``. Reassignments are a ``HarnessReassignment`` and the
    controller's own sends a ``HarnessSender`` (``core_harness_reassignment``), built here."""

    def __init__(
        self,
        broker_ids: Iterable[int] = (1, 2, 3),
        *,
        controller_id: int = 0,
        broker_config: Mapping[str, str] | None = None,
        audit: AuditSink | None = None,
        ibp: str = "2.8-IV1",
        write_on_cached_zk_version: bool = True,
    ) -> None:
        """``write_on_cached_zk_version``: as ``KafkaController`` sets it (on); off gives Kafka's
        exact read-then-write call sequence (``core.replica_isr``)."""
        self.controller_id = controller_id
        self.store = InMemoryMetadataStore()
        self.context = ctx = ControllerContext()
        ctx.epoch, ctx.epoch_zk_version = self.store.register_controller_and_increment_controller_epoch(
            controller_id
        )
        self.channel = RecordingBrokerChannel()
        self.events: list[object] = []  # response events the batches would enqueue
        self.audit: AuditSink = audit if audit is not None else RecordingAuditSink()

        def new_batch() -> ControllerBrokerRequestBatch:
            return ControllerBrokerRequestBatch(controller_id, ctx, self.channel, self.events.append, ibp=ibp)

        self.batch, self.psm_batch, self.rsm_batch = new_batch(), new_batch(), new_batch()
        self._sender = HarnessSender(ctx, self.batch)
        self._broker_config = broker_config
        self._write_on_cached_zk_version = write_on_cached_zk_version
        self.psm: PartitionStateMachine
        self.rsm: ReplicaStateMachine
        self._reassignment: HarnessReassignment
        self.build_state_machines()
        self._broker_epochs = itertools.count(1)
        ctx.set_live_brokers({self._broker(b): next(self._broker_epochs) for b in _ids(broker_ids)})

    def build_state_machines(
        self, *, leave_offline_leaders_to_election: bool = False, write_early: bool = False
    ) -> None:
        """New state machines over the same context, store, batches and audit sink, as a new
        controller builds them: ``write_on_cached_zk_version`` as the harness was given it, and the
        startup's departures (``core.replica_offline``) off unless asked for. ``write_early``
        starts the startup's ISR-removal and election writes early, wired as ``KafkaController``
        wires them."""
        ctx, store = self.context, self.store
        cached = self._write_on_cached_zk_version
        self.psm = PartitionStateMachine(
            self.controller_id,
            ctx,
            store,
            self.psm_batch,
            broker_config=self._broker_config,
            audit=self.audit,
            write_on_cached_zk_version=cached,
        )
        self.rsm = ReplicaStateMachine(
            self.controller_id,
            ctx,
            store,
            self.rsm_batch,
            audit=self.audit,
            write_on_cached_zk_version=cached,
            leave_offline_leaders_to_election=leave_offline_leaders_to_election,
            prewrite_isr_removal=write_early,
            on_left_to_election=self.psm.start_election_prewrite if write_early else None,
        )
        self._reassignment = HarnessReassignment(ctx, store, self.psm, self.rsm, self._sender)

    @staticmethod
    def _broker(broker_id: int) -> Broker:
        return Broker(broker_id, (EndPoint("localhost", 9000 + broker_id),))

    # ------------------------------------------------------------------------------ topics
    def create_topic(
        self,
        topic: str,
        assignment: Sequence[Sequence[int]] | Mapping[int, Sequence[int]],
        config: Mapping[str, str] | None = None,
    ) -> list[TopicPartition]:
        """Admin create (store, atomic and validated), then the TopicChange event
        (docs/controller-behaviour.md §8.10)."""
        if topic in self.context.all_topics:
            raise InvalidArgumentError(f"topic {topic!r} already exists")
        items = assignment.items() if isinstance(assignment, Mapping) else enumerate(assignment)
        parts = {p: ReplicaAssignment.of(replicas) for p, replicas in items}
        self.store.create_topic(topic, parts, config)
        self.context.all_topics.add(topic)
        tps = [TopicPartition(topic, p) for p in sorted(parts)]
        for tp in tps:
            self.context.update_partition_full_replica_assignment(tp, parts[tp.partition])
        self.on_new_partition_creation(tps)
        return tps

    def on_new_partition_creation(self, partitions: Sequence[TopicPartition]) -> None:
        """Kafka's ``onNewPartitionCreation``: New, NewReplica, Online (initialisation), OnlineReplica."""
        replicas = self.context.replicas_for_partition(partitions)
        self.psm.handle_state_changes(partitions, PartitionState.NEW_PARTITION)
        self.rsm.handle_state_changes(replicas, ReplicaState.NEW_REPLICA)
        self.psm.handle_state_changes(partitions, _ONLINE, _CLEAN)
        self.rsm.handle_state_changes(replicas, ReplicaState.ONLINE_REPLICA)

    def enable_unclean_leader_election(self, topic: str) -> ElectionOutcomes:
        """Topic config change to unclean=true, then TopicUncleanLeaderElectionEnable
        (docs/controller-behaviour.md §8.13)."""
        if topic not in self.context.partition_assignments:
            raise InvalidArgumentError(f"unknown topic {topic!r}")
        config = {**self.store.get_topic_config(topic), UNCLEAN_LEADER_ELECTION_ENABLE: "true"}
        self.store.change_topic_config(topic, config)
        return self.psm.trigger_online_partition_state_change(topic)

    def trigger_online(self, topic: str | None = None) -> ElectionOutcomes:
        return self.psm.trigger_online_partition_state_change(topic)

    # ------------------------------------------------------------------------------ brokers
    def fail_brokers(self, broker_ids: Iterable[int]) -> None:
        """BrokerChange with dead brokers: remove them, then Kafka's ``onBrokerFailure``."""
        dead = sorted(_ids(broker_ids))
        for b in dead:
            if not self.context.is_live_or_shutting_down(b):
                raise BrokerNotAvailableError(f"broker {b} is not registered")
        self.context.remove_live_brokers(dead)
        for b in dead:
            self.context.replicas_on_offline_dirs.pop(b, None)
        self.context.shutting_down_broker_ids.difference_update(dead)
        self.on_replicas_become_offline(self.context.replicas_on_brokers(dead))

    def on_replicas_become_offline(self, replicas: Sequence[PartitionAndReplica]) -> None:
        """Kafka 2.x ``onReplicasBecomeOffline``: every partition with an offline leader goes Offline
        and is re-elected."""
        ctx = self.context
        # Replicas of topics queued for deletion would go to failReplicaDeletion: not modelled.
        others = [r for r in replicas if r.topic not in ctx.topics_to_be_deleted]
        offline_leader = sorted(ctx.partitions_with_offline_leader)
        self.psm.handle_state_changes(offline_leader, _OFFLINE)
        self.psm.trigger_online_partition_state_change()
        self.rsm.handle_state_changes(others, ReplicaState.OFFLINE_REPLICA)
        if not offline_leader:
            self.send_update_metadata(sorted(ctx.live_or_shutting_down_broker_ids), ())

    def start_brokers(self, broker_ids: Iterable[int]) -> None:
        """BrokerChange with new brokers: register them (new epochs), then Kafka's ``onBrokerStartup``."""
        ctx = self.context
        new = sorted(_ids(broker_ids))
        for b in new:
            if ctx.is_live_or_shutting_down(b):
                raise InvalidArgumentError(f"broker {b} is already registered")
        ctx.add_live_brokers({self._broker(b): next(self._broker_epochs) for b in new})
        for b in new:
            ctx.replicas_on_offline_dirs.pop(b, None)
        self.send_update_metadata(sorted(ctx.live_or_shutting_down_broker_ids - set(new)), ())
        self.send_update_metadata(new, ctx.partitions_with_leaders)
        self.rsm.handle_state_changes(ctx.replicas_on_brokers(new), ReplicaState.ONLINE_REPLICA)
        self.psm.trigger_online_partition_state_change()
        for tp in sorted(ctx.partitions_being_reassigned):
            assignment = ctx.partition_full_replica_assignment(tp)
            if not set(new).isdisjoint(assignment.target_replicas):
                self.on_partition_reassignment(tp, assignment)

    def controlled_shutdown(self, broker_id: int) -> set[TopicPartition]:
        """Kafka's ``doControlledShutdown`` from adding the broker to the shutting-down set on
        (docs/controller-behaviour.md §8.7); returns the partitions the broker still leads."""
        ctx = self.context
        if not ctx.is_live_or_shutting_down(broker_id):
            raise BrokerNotAvailableError(f"broker {broker_id} is not registered")
        ctx.shutting_down_broker_ids.add(broker_id)
        leadership = ctx.partitions_leadership_info
        queued = ctx.topics_to_be_deleted
        to_act = [
            tp
            for tp, a in ctx.iter_assignments()
            if broker_id in a.replicas and len(a.replicas) > 1 and tp in leadership and tp.topic not in queued
        ]
        led = [tp for tp in to_act if leadership[tp].leader_and_isr.leader == broker_id]
        followed = [tp for tp in to_act if leadership[tp].leader_and_isr.leader != broker_id]
        self.psm.handle_state_changes(led, _ONLINE, _SHUTDOWN)

        def stop_followed() -> None:
            for tp in followed:
                self.batch.add_stop_replica_request_for_brokers((broker_id,), tp, False)

        self._sender.send(stop_followed)
        self.rsm.handle_state_changes([_PR(tp, broker_id) for tp in followed], ReplicaState.OFFLINE_REPLICA)
        return ctx.partition_leaders_on_broker(broker_id)

    # ------------------------------------------------------------------------------ elections
    def preferred_election(self, partitions: Iterable[TopicPartition]) -> ElectionOutcomes:
        """Admin-triggered PREFERRED (docs/controller-behaviour.md §8.11): partitions already led by
        ``RS[0]`` are left out."""
        ctx = self.context
        electable = [
            tp
            for tp, info in self._elections_of(partitions)
            if info.leader_and_isr.leader != ctx.partition_replica_assignment(tp)[0]
        ]
        return self.psm.handle_state_changes(electable, _ONLINE, _PREFERRED)

    def unclean_election(self, partitions: Iterable[TopicPartition]) -> ElectionOutcomes:
        """Admin-triggered UNCLEAN (docs/controller-behaviour.md §8.11): only partitions without a
        live leader, allowUnclean=true."""
        live = self.context.live_broker_ids
        electable = [
            tp
            for tp, info in self._elections_of(partitions)
            if info.leader_and_isr.leader == NO_LEADER or info.leader_and_isr.leader not in live
        ]
        return self.psm.handle_state_changes(electable, _ONLINE, _UNCLEAN)

    def _elections_of(
        self, partitions: Iterable[TopicPartition]
    ) -> list[tuple[TopicPartition, LeaderIsrAndControllerEpoch]]:
        """Known partitions with leadership; unknown ones are refused before anything happens."""
        ctx = self.context
        tps = list(dict.fromkeys(partitions))
        for tp in tps:
            known_partition(self.context, tp)
        info, queued = ctx.partitions_leadership_info, ctx.topics_to_be_deleted
        return [(tp, info[tp]) for tp in tps if tp in info and tp.topic not in queued]

    # ------------------------------------------------------------------------------ ISR changes
    def set_isr(self, tp: TopicPartition, isr: Sequence[int]) -> LeaderAndIsr:
        """An AlterIsr from the leader (docs/controller-behaviour.md §8.12), written through
        ``update_leader_and_isr``.

        Keeps leader and leader epoch; refreshes the context from what was written, sends
        UpdateMetadata, and completes a reassignment whose targets are now all in the ISR.
        """
        ctx = self.context
        known_partition(self.context, tp)
        info = ctx.partition_leadership_info(tp)
        if info is None or info.leader_and_isr.leader == NO_LEADER:
            raise InvalidArgumentError(f"partition {tp} has no leader to change its ISR")
        current, new_isr = info.leader_and_isr, tuple(isr)
        replicas = ctx.partition_replica_assignment(tp)
        problem = _isr_problem(ctx, current, new_isr, replicas)
        if problem:
            raise InvalidArgumentError(f"cannot set the ISR of {tp} to {list(new_isr)}: {problem}")
        proposed = LeaderAndIsr(current.leader, current.leader_epoch, new_isr, current.zk_version)
        result = self.store.update_leader_and_isr({tp: proposed}, ctx.epoch, ctx.epoch_zk_version)
        written = result.finished.get(tp)
        if not isinstance(written, LeaderAndIsr):
            raise StateChangeFailedError(f"AlterIsr of {tp} was not written: {written or 'stale zk version'}")
        ctx.put_partition_leadership_info(tp, LeaderIsrAndControllerEpoch(written, ctx.epoch))
        self.send_update_metadata(sorted(ctx.live_or_shutting_down_broker_ids), [tp])
        if tp in ctx.partitions_being_reassigned:
            self.maybe_complete_reassignment(tp)
        return written

    # ------------------------------------------------------------------------------ reassignment
    def reassign(
        self, tp: TopicPartition, target: Sequence[int], *, from_zk: bool = False
    ) -> ReplicaAssignment:
        """``HarnessReassignment.reassign`` (docs/controller-behaviour.md §8.8): the new assignment."""
        return self._reassignment.reassign(tp, target, from_zk=from_zk)

    def maybe_complete_reassignment(self, tp: TopicPartition) -> None:
        self._reassignment.maybe_complete_reassignment(tp)

    def is_reassignment_complete(self, tp: TopicPartition, assignment: ReplicaAssignment) -> bool:
        return self._reassignment.is_reassignment_complete(tp, assignment)

    def on_partition_reassignment(self, tp: TopicPartition, reassignment: ReplicaAssignment) -> None:
        self._reassignment.on_partition_reassignment(tp, reassignment)

    # ------------------------------------------------------------------------------ sending
    def send_update_metadata(self, broker_ids: Sequence[int], partitions: Collection[TopicPartition]) -> None:
        """Kafka's ``sendUpdateMetadataRequest`` on the controller's own batch."""
        self._sender.send_update_metadata(broker_ids, partitions)


def _isr_problem(
    ctx: ControllerContext, current: LeaderAndIsr, isr: tuple[int, ...], replicas: tuple[int, ...]
) -> str | None:
    """What the controller would refuse in this AlterIsr, or None."""
    if not ctx.is_live_or_shutting_down(current.leader):
        return f"its leader {current.leader} is not running"
    if len(set(isr)) != len(isr) or not set(isr) <= set(replicas):
        return f"it must be distinct replicas of {list(replicas)}"
    if current.leader not in isr:
        return f"it must contain the leader {current.leader}"
    joining = set(isr) - set(current.isr) - ctx.live_broker_ids
    return f"brokers {sorted(joining)} are not live" if joining else None
