"""What the controller's concerns share: one ``ControllerServices`` object handed to each concern's
constructor, and the store watch handlers.

``KafkaController`` (Kafka's ``KafkaController.scala``) is composed of one object per concern:
election and resignation, failover, broker changes, controlled shutdown, reassignment, replica
elections, topic changes, ISR changes, dynamic broker configs, gauges. Each receives in its
constructor the services and the few other concerns it calls, so a reader follows a call from
constructor arguments alone. ``ControllerServices`` holds what every concern reads or replaces:
the config, the context, the store, the channel, the state machines and the controller's own
request batch (rebuilt on failover), the audit sink, the clock, the event manager and the
scheduler, and the controller identity.

Watch handlers and session listeners live in ``StoreWatches`` because they are the controller's
only code that runs on store threads: each builds an event and enqueues it, nothing else
(docs/rules.md, callbacks only enqueue).
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable, Mapping
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
from kafka_controller.domain.values import (
    Broker,
    LeaderIsrAndControllerEpoch,
    TopicPartition,
)
from kafka_controller.ports import (
    BrokerChannel,
    Clock,
    MetadataStore,
    PartitionStateRead,
    SessionEvent,
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


class ControllerServices:
    """The state every concern shares, named; see the module docstring. The state machines, the
    deletion manager and the request batch are replaced as a whole (``StateMachineFactory``), so
    concerns read them from here at each use, never keep their own reference."""

    #: The controller's own batch (Kafka's ``brokerRequestBatch``); each state machine has its own.
    broker_request_batch: ControllerBrokerRequestBatch
    partition_state_machine: PartitionStateMachine
    replica_state_machine: ReplicaStateMachine
    topic_deletion_manager: TopicDeletionManager

    def __init__(
        self,
        config: KafkaConfig,
        store: MetadataStore,
        channel_manager: BrokerChannelManager,
        clock: Clock,
        audit: ControllerAuditSink,
        event_manager: ControllerEventManager,
        kafka_scheduler: KafkaScheduler,
        controller_context: ControllerContext,
        watches: StoreWatches,
        broker_info: Broker | None,
    ) -> None:
        #: The effective config (static + dynamic broker configs); replaced when they change.
        self.config = config
        self.controller_id = config.broker_id
        self.store = store
        self.channel_manager = channel_manager
        self.clock = clock
        self.audit = audit
        self.event_manager = event_manager
        self.kafka_scheduler = kafka_scheduler
        self.controller_context = controller_context
        self.watches = watches
        self.broker_info = broker_info
        self.active_controller_id = -1
        #: While a Reelect elects: (the controller last seen, when its /controller went away).
        self.outage: tuple[int | None, int | None] | None = None
        #: Finalized features of ``/feature`` (KIP-584); brokers that cannot support them are ignored.
        self.finalized_features: Mapping[str, tuple[int, int]] = {}
        #: Brokers whose ``/brokers/ids/<id>`` data watch this controller holds.
        self.watched_brokers: set[int] = set()
        #: The controller epoch whose auto-rebalance task chain is scheduled (0: none yet).
        self.auto_rebalance_epoch = 0

    # ------------------------------------------------------------------ state
    @property
    def is_active(self) -> bool:
        return self.active_controller_id == self.controller_id

    def enqueue(self, event: ControllerEvent) -> None:
        self.event_manager.put(event)

    @property
    def is_auto_leader_rebalance_scheduled(self) -> bool:
        """Whether this epoch's auto-rebalance task runs: each run schedules the next, and
        resignation drops the scheduler's tasks and resets the epoch to 0."""
        epoch = self.controller_context.epoch
        return epoch > 0 and self.auto_rebalance_epoch == epoch

    # ------------------------------------------------------------------ shared operations
    def update_leader_and_isr_cache(
        self,
        partitions: Collection[TopicPartition] | None = None,
        *,
        already_read: Mapping[TopicPartition, PartitionStateRead] | None = None,
    ) -> None:
        """Re-read the state znodes (all partitions when None), batched, into the context; those in
        ``already_read`` (read with the topics by a failover's context load) are not read again."""
        update_leader_and_isr_cache(
            self.controller_context, self.store, partitions, already_read=already_read
        )

    def register_broker_modifications_handlers(self, broker_ids: Iterable[int]) -> None:
        for b in broker_ids:
            self.store.watch_broker(b, self.watches.on_broker_znode)
            self.watched_brokers.add(b)

    def unregister_broker_modifications_handlers(self, broker_ids: Iterable[int]) -> None:
        for b in list(broker_ids):
            self.store.unwatch(broker_path(b))
            self.watched_brokers.discard(b)


def update_leader_and_isr_cache(
    ctx: ControllerContext,
    store: MetadataStore,
    partitions: Collection[TopicPartition] | None = None,
    *,
    already_read: Mapping[TopicPartition, PartitionStateRead] | None = None,
) -> None:
    """Kafka's ``updateLeaderAndIsrCache``: see ``ControllerServices.update_leader_and_isr_cache``."""
    if (
        partitions is None
        and already_read is not None
        and set(map(type, already_read.values())) == _ALL_READ
        and ctx.load_partition_leadership_infos(
            cast("Mapping[TopicPartition, LeaderIsrAndControllerEpoch]", already_read)
        )
    ):
        return  # a failover's 100,000 states, read with the topics: cached in bulk
    tps = ctx.all_partitions if partitions is None else list(dict.fromkeys(partitions))
    if not tps:
        return
    reads: Mapping[TopicPartition, PartitionStateRead]
    if already_read is None:
        reads = store.get_partition_states(tps)
    elif len(already_read) == len(tps) and all(map(eq, tps, already_read)):
        reads = already_read  # a failover's: every partition, read in the context's order
    else:  # in the partitions' order, as a read of them would be
        found: list[object] = list(map(already_read.get, tps, repeat(_UNREAD, len(tps))))
        if _UNREAD in found:
            more = store.get_partition_states([tp for tp in tps if tp not in already_read])
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


class StoreWatches:
    """The watch handlers and the session listener: they run on store threads, so each only
    builds an event and enqueues it (the event thread does the work)."""

    def __init__(self, event_manager: ControllerEventManager, clock: Clock) -> None:
        self._event_manager = event_manager
        self._clock = clock
        self._session_expired = False

    def enqueue(self, event: ControllerEvent) -> None:
        self._event_manager.put(event)

    def on_controller_znode(self, event: ZNodeEvent) -> None:
        if event.type is ZNodeEventType.DELETED:
            self.enqueue(Reelect(self._clock.time_ms()))
        else:
            self.enqueue(ControllerChange())

    def on_broker_ids(self, event: ZNodeEvent) -> None:
        self.enqueue(BrokerChange())

    def on_broker_znode(self, event: ZNodeEvent) -> None:
        broker_id = event.path.rsplit("/", 1)[-1]
        if broker_id.lstrip("-").isdigit():
            self.enqueue(BrokerModifications(int(broker_id)))

    def on_topics(self, event: ZNodeEvent) -> None:
        self.enqueue(TopicChange())

    def on_topic_znode(self, event: ZNodeEvent) -> None:
        self.enqueue(PartitionModifications(event.path.rsplit("/", 1)[-1]))

    def on_topic_deletions(self, event: ZNodeEvent) -> None:
        self.enqueue(TopicDeletion())

    def on_reassign_partitions(self, event: ZNodeEvent) -> None:
        if event.type is ZNodeEventType.CREATED:
            self.enqueue(ZkPartitionReassignment())

    def on_preferred_replica_election(self, event: ZNodeEvent) -> None:
        if event.type is ZNodeEventType.CREATED:
            self.enqueue(ReplicaLeaderElection(None, ElectionType.PREFERRED, ElectionTrigger.ZK_TRIGGERED))

    def on_isr_change_notifications(self, event: ZNodeEvent) -> None:
        self.enqueue(IsrChangeNotification())

    def on_log_dir_event_notifications(self, event: ZNodeEvent) -> None:
        self.enqueue(LogDirEventNotification())

    def on_partition_state(self, event: ZNodeEvent) -> None:
        parts = event.path.split("/")  # /brokers/topics/<t>/partitions/<p>/state
        if event.type is ZNodeEventType.DATA_CHANGED and len(parts) == 7 and parts[5].isdigit():
            self.enqueue(PartitionReassignmentIsrChange(TopicPartition(parts[3], int(parts[5]))))

    def on_session_event(self, event: SessionEvent) -> None:
        """Kafka's ``beforeInitializingSession`` / ``afterInitializingSession``: Expire jumps the
        queue (preempting what waits), then a new session re-registers and re-elects. Any other
        CONNECTED is a reconnection, even one whose loss came before this listener was added."""
        if event is SessionEvent.EXPIRED:
            self._session_expired = True
            self._event_manager.clear_and_put(Expire())
        elif event is SessionEvent.CONNECTED and self._session_expired:
            self._session_expired = False
            self.enqueue(RegisterBrokerAndReelect())
        elif event is SessionEvent.CONNECTED:
            self.enqueue(SessionReconnected())
