"""What every part of the controller shares: its collaborators, the watch handlers, and the few
operations each concern calls on another.

``KafkaController`` is assembled from one mixin per concern (election, failover, brokers,
controlled shutdown, reassignment, replica elections, topics, ISR); each mixin inherits this base,
which declares the collaborators they all use and, as abstract methods, the operations one concern
calls on another. Keeping Kafka's method names (``on_broker_startup``, ``on_partition_reassignment``)
on one object lets a Kafka reader follow ``KafkaController.scala`` file by file.

Watch handlers and session listeners live here because they are the controller's only code that
runs on store threads: each builds an event and enqueues it, nothing else
(docs/rules.md, callbacks only enqueue).
"""

from __future__ import annotations

import abc
import logging
from collections.abc import Callable, Collection, Iterable, Mapping
from itertools import repeat
from operator import eq
from typing import Protocol, cast

from kafka_controller.controller.auditing import ControllerAuditSink
from kafka_controller.controller.config import KafkaConfig
from kafka_controller.controller.event_manager import ControllerEvent, ControllerEventManager
from kafka_controller.controller.events import (
    BrokerChange,
    BrokerModifications,
    ControllerChange,
    ElectionTrigger,
    ElectionType,
    Expire,
    IsrChangeNotification,
    LogDirEventNotification,
    PartitionModifications,
    PartitionReassignmentIsrChange,
    Reelect,
    RegisterBrokerAndReelect,
    ReplicaLeaderElection,
    SessionReconnected,
    TopicChange,
    TopicDeletion,
    ZkPartitionReassignment,
)
from kafka_controller.controller.scheduler import KafkaScheduler
from kafka_controller.core.context import ControllerContext
from kafka_controller.core.partition_state_machine import PartitionStateMachine
from kafka_controller.core.replica_state_machine import ReplicaStateMachine
from kafka_controller.core.request_batch import ControllerBrokerRequestBatch
from kafka_controller.core.topic_deletion_manager import TopicDeletionManager
from kafka_controller.domain.errors import IllegalControllerStateError
from kafka_controller.domain.values import (
    Broker,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    PartitionAndReplica,
    ReplicaAssignment,
    TopicPartition,
)
from kafka_controller.ports import (
    BrokerChannel,
    Clock,
    MetadataStore,
    PartitionStateRead,
    SessionEvent,
    TopicIdReplicaAssignment,
    ZNodeEvent,
    ZNodeEventType,
)

log = logging.getLogger("kafka_controller.controller")
#: ``update_leader_and_isr_cache``: the types of reads that are all states (none missing or failed).
_ALL_READ = {LeaderIsrAndControllerEpoch}
#: A partition ``update_leader_and_isr_cache`` was not handed a read of.
_UNREAD = object()

# Kafka's znode paths (docs/external-contract.md §1) that the controller names when it drops a
# watch or parses a watch event; the store owns everything else about them.
BROKER_IDS_PATH = "/brokers/ids"
BROKER_TOPICS_PATH = "/brokers/topics"
DELETE_TOPICS_PATH = "/admin/delete_topics"
REASSIGN_PARTITIONS_PATH = "/admin/reassign_partitions"
PREFERRED_REPLICA_ELECTION_PATH = "/admin/preferred_replica_election"
ISR_CHANGE_NOTIFICATION_PATH = "/isr_change_notification"
LOG_DIR_EVENT_NOTIFICATION_PATH = "/log_dir_event_notification"


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS_PATH}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{BROKER_TOPICS_PATH}/{topic}"


def partition_state_path(tp: TopicPartition) -> str:
    return f"{BROKER_TOPICS_PATH}/{tp.topic}/partitions/{tp.partition}/state"


class BrokerChannelManager(BrokerChannel, Protocol):
    """A ``BrokerChannel`` whose per-broker queues follow broker changes (Kafka's
    ``ControllerChannelManager``): ``startup`` on failover, ``add_broker`` / ``remove_broker`` on
    broker changes (a bounce is a remove then an add), ``shutdown`` on resignation."""

    def startup(self, brokers: Iterable[Broker]) -> None: ...

    def shutdown(self) -> None: ...

    def add_broker(self, broker: Broker) -> None: ...

    def remove_broker(self, broker_id: int) -> None: ...


class ControllerBase(abc.ABC):
    """Shared collaborators and cross-concern operations; see the module docstring."""

    config: KafkaConfig
    controller_id: int
    controller_context: ControllerContext
    store: MetadataStore
    channel_manager: BrokerChannelManager
    clock: Clock
    audit: ControllerAuditSink
    event_manager: ControllerEventManager
    kafka_scheduler: KafkaScheduler
    broker_info: Broker | None
    #: The controller's own batch (Kafka's ``brokerRequestBatch``); each state machine has its own.
    broker_request_batch: ControllerBrokerRequestBatch
    partition_state_machine: PartitionStateMachine
    replica_state_machine: ReplicaStateMachine
    topic_deletion_manager: TopicDeletionManager
    active_controller_id: int
    #: While a Reelect elects: (the controller last seen, when its /controller went away).
    outage: tuple[int | None, int | None] | None = None
    #: Finalized features of ``/feature`` (KIP-584); brokers that cannot support them are ignored.
    _finalized_features: Mapping[str, tuple[int, int]]
    #: Brokers whose ``/brokers/ids/<id>`` data watch this controller holds.
    _watched_brokers: set[int]
    #: The controller epoch whose auto-rebalance task chain is scheduled (0: none yet).
    _auto_rebalance_epoch: int = 0

    # ------------------------------------------------------------------ state
    @property
    def is_active(self) -> bool:
        return self.active_controller_id == self.controller_id

    @property
    def ctx(self) -> ControllerContext:
        return self.controller_context

    def enqueue(self, event: ControllerEvent) -> None:
        self.event_manager.put(event)

    @property
    def is_auto_leader_rebalance_scheduled(self) -> bool:
        """Whether this epoch's auto-rebalance task runs: each run schedules the next, and
        resignation drops the scheduler's tasks and resets the epoch to 0."""
        epoch = self.controller_context.epoch
        return epoch > 0 and self._auto_rebalance_epoch == epoch

    # ------------------------------------------------------------------ shared operations
    def send_update_metadata_request(
        self, brokers: Iterable[int], partitions: Collection[TopicPartition]
    ) -> None:
        """Kafka's ``sendUpdateMetadataRequest``: one batch, one send; a broken batch resigns."""
        batch = self.broker_request_batch
        try:
            batch.new_batch()
            batch.add_update_metadata_request_for_brokers(brokers, partitions)
            batch.send_requests_to_brokers(self.controller_context.epoch)
        except IllegalControllerStateError as e:
            self.handle_illegal_state(e)

    def update_leader_and_isr_cache(
        self,
        partitions: Collection[TopicPartition] | None = None,
        *,
        already_read: Mapping[TopicPartition, PartitionStateRead] | None = None,
    ) -> None:
        """Re-read the state znodes (all partitions when None), batched, into the context; those in
        ``already_read`` (read with the topics by a failover's context load) are not read again."""
        ctx = self.controller_context
        tps = ctx.all_partitions if partitions is None else list(dict.fromkeys(partitions))
        if not tps:
            return
        reads: Mapping[TopicPartition, PartitionStateRead]
        if already_read is None:
            reads = self.store.get_partition_states(tps)
        elif len(already_read) == len(tps) and all(map(eq, tps, already_read)):
            reads = already_read  # a failover's: every partition, read in the context's order
        else:  # in the partitions' order, as a read of them would be
            found: list[object] = list(map(already_read.get, tps, repeat(_UNREAD, len(tps))))
            if _UNREAD in found:
                more = self.store.get_partition_states([tp for tp in tps if tp not in already_read])
                found = [more[tp] if f is _UNREAD else f for tp, f in zip(tps, found, strict=True)]
            reads = cast("dict[TopicPartition, PartitionStateRead]", dict(zip(tps, found, strict=True)))
        if set(map(type, reads.values())) == _ALL_READ:  # a failover's 100,000: each a state, cached as read
            ctx.put_partition_leadership_infos(
                cast("dict[TopicPartition, LeaderIsrAndControllerEpoch]", reads).items()
            )
            return
        loaded: list[tuple[TopicPartition, LeaderIsrAndControllerEpoch]] = []
        for tp, read in reads.items():
            if read is None:
                continue
            if isinstance(read, Exception):
                log.error("Cannot read the leader and ISR of %s: %s", tp, read)
                continue
            loaded.append((tp, read))
        ctx.put_partition_leadership_infos(loaded)

    def register_broker_modifications_handlers(self, broker_ids: Iterable[int]) -> None:
        for b in broker_ids:
            self.store.watch_broker(b, self._on_broker_znode)
            self._watched_brokers.add(b)

    def unregister_broker_modifications_handlers(self, broker_ids: Iterable[int]) -> None:
        for b in list(broker_ids):
            self.store.unwatch(broker_path(b))
            self._watched_brokers.discard(b)

    # ------------------------------------------------------------------ cross-concern operations
    @abc.abstractmethod
    def build_state_machines(self) -> None:
        """(Re)build the batches, state machines and deletion manager from the current config."""

    @abc.abstractmethod
    def update_metrics(self) -> None: ...

    @abc.abstractmethod
    def handle_illegal_state(self, e: Exception) -> None:
        """Clear the batch, move the controller away (delete ``/controller``), re-raise ``e``."""

    @abc.abstractmethod
    def maybe_resign(self) -> None: ...

    @abc.abstractmethod
    def elect(self) -> None: ...

    @abc.abstractmethod
    def on_controller_failover(self) -> None: ...

    @abc.abstractmethod
    def on_controller_resignation(self) -> None: ...

    @abc.abstractmethod
    def on_replicas_become_offline(self, replicas: Collection[PartitionAndReplica]) -> None: ...

    @abc.abstractmethod
    def on_new_partition_creation(self, partitions: Collection[TopicPartition]) -> None: ...

    @abc.abstractmethod
    def on_partition_reassignment(self, tp: TopicPartition, reassignment: ReplicaAssignment) -> None: ...

    @abc.abstractmethod
    def maybe_complete_reassignment(self, tp: TopicPartition) -> None: ...

    @abc.abstractmethod
    def maybe_complete_reassignments(self, partitions: Iterable[TopicPartition]) -> None: ...

    @abc.abstractmethod
    def maybe_resume_reassignments(
        self, should_resume: Callable[[TopicPartition, ReplicaAssignment], bool]
    ) -> None: ...

    @abc.abstractmethod
    def initialize_partition_reassignments(self) -> None: ...

    @abc.abstractmethod
    def on_replica_election(
        self, partitions: Collection[TopicPartition], election_type: ElectionType, trigger: ElectionTrigger
    ) -> dict[TopicPartition, LeaderAndIsr | Exception]: ...

    @abc.abstractmethod
    def fetch_pending_preferred_replica_elections(self) -> set[TopicPartition]: ...

    @abc.abstractmethod
    def schedule_auto_leader_rebalance_task(self, delay_s: float) -> None: ...

    @abc.abstractmethod
    def load_dynamic_broker_configs(self) -> None:
        """Read the cluster-default and this broker's dynamic configs and apply them to ``config``."""

    @abc.abstractmethod
    def compatible_brokers(self, brokers: Mapping[Broker, int]) -> dict[Broker, int]: ...

    @abc.abstractmethod
    def process_topic_ids(self, assignments: Iterable[TopicIdReplicaAssignment]) -> None: ...

    # ------------------------------------------------------------------ watch handlers (store threads)
    def _on_controller_znode(self, event: ZNodeEvent) -> None:
        if event.type is ZNodeEventType.DELETED:
            self.enqueue(Reelect(self.clock.time_ms()))
        else:
            self.enqueue(ControllerChange())

    def _on_broker_ids(self, event: ZNodeEvent) -> None:
        self.enqueue(BrokerChange())

    def _on_broker_znode(self, event: ZNodeEvent) -> None:
        broker_id = event.path.rsplit("/", 1)[-1]
        if broker_id.lstrip("-").isdigit():
            self.enqueue(BrokerModifications(int(broker_id)))

    def _on_topics(self, event: ZNodeEvent) -> None:
        self.enqueue(TopicChange())

    def _on_topic_znode(self, event: ZNodeEvent) -> None:
        self.enqueue(PartitionModifications(event.path.rsplit("/", 1)[-1]))

    def _on_topic_deletions(self, event: ZNodeEvent) -> None:
        self.enqueue(TopicDeletion())

    def _on_reassign_partitions(self, event: ZNodeEvent) -> None:
        if event.type is ZNodeEventType.CREATED:
            self.enqueue(ZkPartitionReassignment())

    def _on_preferred_replica_election(self, event: ZNodeEvent) -> None:
        if event.type is ZNodeEventType.CREATED:
            self.enqueue(ReplicaLeaderElection(None, ElectionType.PREFERRED, ElectionTrigger.ZK_TRIGGERED))

    def _on_isr_change_notifications(self, event: ZNodeEvent) -> None:
        self.enqueue(IsrChangeNotification())

    def _on_log_dir_event_notifications(self, event: ZNodeEvent) -> None:
        self.enqueue(LogDirEventNotification())

    def _on_partition_state(self, event: ZNodeEvent) -> None:
        parts = event.path.split("/")  # /brokers/topics/<t>/partitions/<p>/state
        if event.type is ZNodeEventType.DATA_CHANGED and len(parts) == 7 and parts[5].isdigit():
            self.enqueue(PartitionReassignmentIsrChange(TopicPartition(parts[3], int(parts[5]))))

    def _on_session_event(self, event: SessionEvent) -> None:
        """Kafka's ``beforeInitializingSession`` / ``afterInitializingSession``: Expire jumps the
        queue (preempting what waits), then a new session re-registers and re-elects. Any other
        CONNECTED is a reconnection, even one whose loss came before this listener was added."""
        if event is SessionEvent.EXPIRED:
            self._session_expired = True
            self.event_manager.clear_and_put(Expire())
        elif event is SessionEvent.CONNECTED and self._session_expired:
            self._session_expired = False
            self.enqueue(RegisterBrokerAndReelect())
        elif event is SessionEvent.CONNECTED:
            self.enqueue(SessionReconnected())

    _session_expired = False
