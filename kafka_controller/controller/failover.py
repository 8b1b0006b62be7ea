"""Becoming the controller and stepping down (docs/controller-behaviour.md §8.3, §8.4), step by step
as Kafka 2.8 does.

Failover is a bulk load: a handful of batched store reads (brokers, topic znodes, every partition
state), the context filled topic by topic, then the state machines started over all partitions
at once. Its cost is the store's batched I/O plus a few microseconds per partition; nothing here
reads or writes one partition at a time.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterable, Mapping
from operator import attrgetter
from types import MappingProxyType

from kafka_controller import heap
from kafka_controller.controller.broker_configs import DynamicBrokerConfigs
from kafka_controller.controller.events import ElectionTrigger, ElectionType
from kafka_controller.controller.metadata_updates import UpdateMetadataSender
from kafka_controller.controller.reassignment import Reassignments
from kafka_controller.controller.replica_election import AUTO_REBALANCE_FIRST_DELAY_S, ReplicaElections
from kafka_controller.controller.services import ControllerServices, log
from kafka_controller.controller.state_machines import StateMachineFactory
from kafka_controller.domain.errors import IllegalControllerStateError, MetadataStoreError, ZNodeDecodeError
from kafka_controller.domain.values import Broker
from kafka_controller.heap import release_free_heap
from kafka_controller.ports import FeatureZNode, TopicIdReplicaAssignment
from kafka_controller.thread_cpu import CpuAccount

_ENABLED, _DISABLED = 1, 0
_adding_replicas_of = attrgetter("adding_replicas")
_removing_replicas_of = attrgetter("removing_replicas")


def new_topic_id() -> str:
    """Kafka's ``Uuid.randomUuid``: 16 random bytes in URL-safe base64 without padding, never the
    zero/metadata ids and never starting with '-' (it would read as a command-line flag)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-") and text not in ("AAAAAAAAAAAAAAAAAAAAAA", "AAAAAAAAAAAAAAAAAAAAAQ"):
            return text


def is_broker_compatible(broker: Broker, finalized: Mapping[str, tuple[int, int]]) -> bool:
    """KIP-584: every finalized feature is supported by the broker over its whole version range."""
    supported = {name: (lo, hi) for name, lo, hi in broker.features}
    for name, (min_level, max_level) in finalized.items():
        versions = supported.get(name)
        if versions is None or min_level < versions[0] or max_level > versions[1]:
            return False
    return True


class ControllerFailover:
    """``on_controller_failover`` and its steps (resignation is ``election.ControllerResignation``)."""

    def __init__(
        self,
        services: ControllerServices,
        state_machines: StateMachineFactory,
        metadata: UpdateMetadataSender,
        broker_configs: DynamicBrokerConfigs,
        reassignments: Reassignments,
        elections: ReplicaElections,
    ) -> None:
        self._s = services
        self._state_machines = state_machines
        self._metadata = metadata
        self._broker_configs = broker_configs
        self._reassignments = reassignments
        self._elections = elections
        #: What the failover in progress knows of the outage it ends (see ``on_controller_failover``).
        self._recovery: Mapping[str, int | None] = MappingProxyType({})

    def on_controller_failover(self) -> None:
        """Become the controller, and record the failover with the outage it ends.

        An SRE's outage runs from the old controller's loss to every partition led again, not from
        this election: after a hard kill, partitions stay leaderless for the session timeout before
        anyone is elected. So the ``failover`` event carries what this controller knows: the
        controller it replaced and when its ``/controller`` went away (``outage``, set by a
        Reelect), when offline partitions were first seen and how many, and when the elections for
        them were done (``recovered_ms``: every partition that could be led is led; the detail
        counts those that could not, without a live replica). The report takes the earliest sign of
        the loss it has (a drill's own record of its kill comes first)."""
        previous, gone_ms = self._s.outage or (None, None)
        self._recovery = {"previous_broker_id": previous, "lost_ms": gone_ms}

        def detail() -> str:
            text = f"{len(self._s.controller_context.all_topics)} topics"
            still = self._s.controller_context.offline_partition_count
            return f"{text}; {still} partitions still offline" if still else text

        cpu = CpuAccount()
        with self._s.audit.timed("failover", detail, fields=lambda: self._recovery):
            self._on_controller_failover()
        log.info("Failover CPU by thread (s): %s", cpu.summary())  # ``thread_cpu``
        # The context just loaded (~10 objects per partition) lives until resignation and holds no
        # cycles: moved out of the collector's generations, later full collections no longer walk
        # it (each walk of a 100,000-partition context costs ~0.2 s). Resignation unfreezes.
        heap.freeze()  # shared with the broker in this process (``kafka_controller.heap``)
        # The failover's request queues and state-machine temporaries are free now; without this
        # glibc keeps most of their pages resident (~20 MB at 100,000 partitions RF 3).
        release_free_heap()

    def _on_controller_failover(self) -> None:
        ctx = self._s.controller_context
        store = self._s.store
        # 0. dynamic broker configs (``dynamic_config``): before anything reads the config, so that
        # a controller elected while the auto rebalance is paused stays paused
        self._broker_configs.load_dynamic_broker_configs()
        self._state_machines.build_state_machines()
        # 1. /feature
        self.maybe_setup_feature_versioning()
        # 2. watches
        store.watch_broker_ids(self._s.watches.on_broker_ids)
        store.watch_topics(self._s.watches.on_topics)
        store.watch_topic_deletions(self._s.watches.on_topic_deletions)
        store.watch_log_dir_event_notifications(self._s.watches.on_log_dir_event_notifications)
        store.watch_isr_change_notifications(self._s.watches.on_isr_change_notifications)
        store.watch_preferred_replica_election(self._s.watches.on_preferred_replica_election)
        store.watch_partition_reassignment(self._s.watches.on_reassign_partitions)
        # 3. stale notifications
        store.delete_log_dir_event_notifications(None, ctx.epoch_zk_version)
        store.delete_isr_change_notifications(None, ctx.epoch_zk_version)
        # 4. the context
        log.info("Initializing controller context")
        self.initialize_controller_context()
        # 5-6. pending topic deletions
        to_delete, ineligible = self.fetch_topic_deletions_in_progress()
        self._s.topic_deletion_manager.init(to_delete, ineligible)
        # 7. brokers learn the live brokers before any LeaderAndIsr
        self._metadata.send_update_metadata_request(sorted(ctx.live_or_shutting_down_broker_ids), ())
        # 8. state machines
        try:
            self._s.replica_state_machine.startup()
            self._start_partition_state_machine()
        finally:
            self._s.partition_state_machine.abandon_election_prewrite()  # taken by the election, if it ran
        self._s.replica_state_machine.finish_offline_left_to_election()
        log.info("Ready to serve as the new controller with epoch %d", ctx.epoch)
        # 9-11. reassignments, deletions, preferred elections left pending by the previous controller
        self._reassignments.initialize_partition_reassignments()
        self._s.topic_deletion_manager.try_topic_deletion()
        pending = self._elections.fetch_pending_preferred_replica_elections()
        self._elections.on_replica_election(pending, ElectionType.PREFERRED, ElectionTrigger.ZK_TRIGGERED)
        # 12. scheduler
        if not self._s.kafka_scheduler.is_started:
            self._s.kafka_scheduler.startup()
        if self._s.config.auto_leader_rebalance_enable:
            self._elections.schedule_auto_leader_rebalance_task(AUTO_REBALANCE_FIRST_DELAY_S)

    def _start_partition_state_machine(self) -> None:
        """``PartitionStateMachine.startup``, with the offline partitions it finds and the moment the
        elections it triggers are done noted for the failover's record."""
        ctx = self._s.controller_context
        found: dict[str, int | None] = {}

        def note_offline() -> None:
            offline = ctx.offline_partition_count
            found["offline_partitions"] = offline
            found["first_offline_ms"] = self._s.clock.time_ms() if offline else None

        self._s.partition_state_machine.startup(on_initialized=note_offline)
        self._recovery = {**self._recovery, **found, "recovered_ms": self._s.clock.time_ms()}

    def maybe_setup_feature_versioning(self) -> None:
        """Step 1 (KIP-584): enabled with no finalized features from IBP 2.7-IV0, else disabled.

        A ``/feature`` that does not decode is overwritten with the state this IBP calls for, as
        though it were absent: Kafka 2.8 fails its election on it and every broker after it does
        too, so one bad write by another client would leave the cluster without a controller.
        Finalized features it held were unreadable anyway; the log says why it did not decode."""
        try:
            existing = self._s.store.get_feature_znode()
        except ZNodeDecodeError as e:
            log.error("%s: overwriting /feature with no finalized features", e)
            wanted = _ENABLED if self._s.config.is_feature_versioning_supported else _DISABLED
            self._s.store.update_feature_znode(FeatureZNode(wanted, {}))
            existing = self._s.store.get_feature_znode()
        if self._s.config.is_feature_versioning_supported:
            if existing is None:
                self._s.store.create_feature_znode(FeatureZNode(_ENABLED, {}))
            elif not existing[0].enabled:
                if existing[0].features:
                    log.warning(
                        "/feature is disabled with features %s: clearing them", dict(existing[0].features)
                    )
                self._s.store.update_feature_znode(FeatureZNode(_ENABLED, {}))
        else:
            disabled = FeatureZNode(_DISABLED, {})
            if existing is None:
                self._s.store.create_feature_znode(disabled)
            elif existing[0].status != _DISABLED or existing[0].features:
                self._s.store.update_feature_znode(disabled)
        read = self._s.store.get_feature_znode()
        self._s.finalized_features = dict(read[0].features) if read is not None and read[0].enabled else {}

    def compatible_brokers(self, brokers: Mapping[Broker, int]) -> dict[Broker, int]:
        """The brokers that support the finalized features; the others are logged and ignored."""
        out: dict[Broker, int] = {}
        for broker, epoch in brokers.items():
            if is_broker_compatible(broker, self._s.finalized_features):
                out[broker] = epoch
            else:
                log.warning(
                    "Ignoring broker %d: its features are incompatible with the finalized ones", broker.id
                )
        return out

    def initialize_controller_context(self) -> None:
        ctx = self._s.controller_context
        store = self._s.store
        ctx.set_live_brokers(self.compatible_brokers(store.get_all_brokers_and_epochs()))
        log.info("Initialized broker epochs cache: %s", ctx.live_broker_id_and_epochs)
        ctx.set_all_topics(store.get_all_topics())
        # Kafka 2.8 reads the topics, then the states of their partitions (``updateLeaderAndIsrCache``
        # below); read together, ZooKeeper answers the first states while later topics decode
        # (README deviation 19: the same context, states read before the topic ids are written).
        reads, states = store.get_replica_assignments_and_partition_states(
            ctx.all_topics, watch_handler=self._s.watches.on_topic_znode
        )
        assignments: list[TopicIdReplicaAssignment] = []
        for topic, read in reads.items():
            if isinstance(read, MetadataStoreError):
                log.error("Cannot load the assignment of topic %s: %s", topic, read)
            else:
                assignments.append(read)
        self.process_topic_ids(assignments)
        ctx.clear_partition_leadership_info()
        being_reassigned = ctx.partitions_being_reassigned
        for a in assignments:
            ctx.load_topic_assignment(a.topic, a.assignment)
            # Most topics have no partition being reassigned: seen by ``any`` over the values, without a
            # Python step per partition.
            values = a.assignment.values()
            if any(map(_adding_replicas_of, values)) or any(map(_removing_replicas_of, values)):
                being_reassigned.update(tp for tp, ra in a.assignment.items() if ra.is_being_reassigned)
        ctx.shutting_down_broker_ids.clear()
        self._s.register_broker_modifications_handlers(ctx.live_or_shutting_down_broker_ids)
        self._s.update_leader_and_isr_cache(already_read=states)
        self._s.channel_manager.startup(ctx.live_or_shutting_down_brokers)
        log.info(
            "Currently active brokers in the cluster: %s; shutting down: %s",
            sorted(ctx.live_broker_ids),
            sorted(ctx.shutting_down_broker_ids),
        )

    def process_topic_ids(self, assignments: Iterable[TopicIdReplicaAssignment]) -> None:
        """IBP >= 2.8: give id-less topics an id (one fenced batched write); cache every known id."""
        ctx = self._s.controller_context
        items = list(assignments)
        if self._s.config.uses_topic_id:
            known = [a for a in items if a.topic_id is not None]
            fresh = [
                TopicIdReplicaAssignment(a.topic, new_topic_id(), a.assignment, a.zk_version)
                for a in items
                if a.topic_id is None
            ]
            if fresh:
                results = self._s.store.set_topic_ids(fresh, ctx.epoch_zk_version)
                for a in fresh:
                    error = results.get(a.topic)
                    if error is None:
                        known.append(a)
                    else:
                        log.error("Cannot store topic id %s for %s: %s", a.topic_id, a.topic, error)
            items = known
        for a in items:
            if a.topic_id is not None:
                try:
                    ctx.add_topic_id(a.topic, a.topic_id)
                except IllegalControllerStateError as e:
                    log.error("Ignoring topic id of %s: %s", a.topic, e)

    def fetch_topic_deletions_in_progress(self) -> tuple[set[str], set[str]]:
        """Step 5: queued deletions, and those that cannot proceed yet (an offline replica, or a
        partition being reassigned)."""
        ctx = self._s.controller_context
        to_delete = set(self._s.store.get_topic_deletions())
        with_offline_replicas = {
            t
            for t in to_delete
            if any(not ctx.is_replica_online(r.replica, r.topic_partition) for r in ctx.replicas_for_topic(t))
        }
        reassigning = {tp.topic for tp in ctx.partitions_being_reassigned}
        ineligible = with_offline_replicas | (reassigning & to_delete)
        log.info(
            "List of topics to be deleted: %s; ineligible for deletion: %s",
            sorted(to_delete),
            sorted(ineligible),
        )
        return to_delete, ineligible
