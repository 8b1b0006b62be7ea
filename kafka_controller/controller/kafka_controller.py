"""``KafkaController``: Kafka 2.8's ZooKeeper-mode controller, one per broker
(docs/controller-behaviour.md §8; Kafka's ``KafkaController.scala``).

The class itself is the runtime shell: it owns the event queue, the scheduler, the metrics and
the audit stamping, dispatches each event to the concern that handles it (one mixin per concern,
see ``base``), and offers the entry points other threads call. Those entry points and every store
or channel callback only enqueue; all controller state is touched by ``controller-event-thread``.

Two rules from Kafka hold for every event: a ``ControllerMovedError`` (a fenced write failed)
makes the controller re-read ``/controller`` and resign if it lost the role, and the metrics are
refreshed after the event whatever happened. Callers waiting on an event are always answered:
with the result, with NOT_CONTROLLER when the event is preempted or the controller is fenced
while handling it, or with UNKNOWN_SERVER_ERROR when handling it failed.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from kafka_controller.controller import events as ev
from kafka_controller.controller.api import ControllerApi
from kafka_controller.controller.auditing import ControllerAuditSink
from kafka_controller.controller.base import BrokerChannelManager
from kafka_controller.controller.broker_configs import DynamicBrokerConfigs
from kafka_controller.controller.brokers import BrokerChanges
from kafka_controller.controller.config import UNCLEAN_LEADER_ELECTION_ENABLE, KafkaConfig
from kafka_controller.controller.election import ControllerElection
from kafka_controller.controller.event_manager import ControllerEvent, ControllerEventManager
from kafka_controller.controller.failover import ControllerFailover
from kafka_controller.controller.gauges import GAUGE_NAMES as _NAME
from kafka_controller.controller.gauges import ControllerGauges
from kafka_controller.controller.isr import IsrChanges
from kafka_controller.controller.metrics import (
    EVENT_QUEUE_TIME_MS,
    UNCLEAN_LEADER_ELECTIONS_PER_SEC,
    MetricsRegistry,
    new_rate_and_time_metrics,
)
from kafka_controller.controller.reassignment import Reassignments
from kafka_controller.controller.replica_election import ReplicaElections
from kafka_controller.controller.scheduler import KafkaScheduler
from kafka_controller.controller.shutdown import ControlledShutdownHandling
from kafka_controller.controller.topics import ControllerDeletionClient, TopicChanges
from kafka_controller.core import events as core_events
from kafka_controller.core.context import ControllerContext
from kafka_controller.core.context_description import describe_context
from kafka_controller.core.partition_state_machine import PartitionStateMachine
from kafka_controller.core.replica_state_machine import ReplicaStateMachine
from kafka_controller.core.request_batch import ControllerBrokerRequestBatch
from kafka_controller.core.topic_deletion_manager import TopicDeletionManager
from kafka_controller.domain.errors import ControllerMovedError
from kafka_controller.domain.requests import Errors
from kafka_controller.domain.values import Broker
from kafka_controller.ports import AuditSink, Clock, MetadataStore, NullAuditSink, SystemClock

log = logging.getLogger("kafka_controller.controller")


class _Once:
    """A callback that runs at most once (a result, or the error answer, never both)."""

    __slots__ = ("called", "fn")

    def __init__(self, fn: Callable[[Any], None]) -> None:
        self.fn = fn
        self.called = False

    def __call__(self, value: Any) -> None:
        if not self.called:
            self.called = True
            self.fn(value)


class KafkaController(
    ControllerGauges,
    ControllerApi,
    ControllerElection,
    ControllerFailover,
    DynamicBrokerConfigs,
    BrokerChanges,
    ControlledShutdownHandling,
    Reassignments,
    ReplicaElections,
    TopicChanges,
    IsrChanges,
):
    """One broker's controller candidate. ``startup()`` joins the election; ``shutdown()`` leaves."""

    def __init__(
        self,
        config: KafkaConfig,
        store: MetadataStore,
        channel_manager: BrokerChannelManager,
        *,
        clock: Clock | None = None,
        audit: AuditSink | None = None,
        metrics: MetricsRegistry | None = None,
        broker_info: Broker | None = None,
        inter_broker_listener_name: str | None = None,
    ) -> None:
        """``broker_info`` is this broker's registration, re-created after a session expiry
        (Kafka's RegisterBrokerAndReelect); None for a controller that registers no broker."""
        self.config = config
        self.static_config = config
        self._dynamic_default = {}
        self._dynamic_per_broker = {}
        self.controller_id = config.broker_id
        self.store = store
        self.channel_manager = channel_manager
        self.clock = clock or SystemClock()
        self.broker_info = broker_info
        self.controller_context = ControllerContext()
        self.active_controller_id = -1
        self._finalized_features = {}
        self._watched_brokers = set()
        self._listener = inter_broker_listener_name
        self._answer: _Once | None = None
        self.audit = ControllerAuditSink(
            audit or NullAuditSink(), self.controller_id, self.clock, lambda: self.controller_context.epoch
        )
        self.metrics = metrics or MetricsRegistry(self.clock)
        self.event_manager = ControllerEventManager(
            self.controller_id,
            self,
            self.clock,
            rate_and_time_metrics=new_rate_and_time_metrics(self.metrics),
            event_queue_time_histogram=self.metrics.histogram(EVENT_QUEUE_TIME_MS, "Time events wait (ms)"),
        )
        self.kafka_scheduler = KafkaScheduler(self.clock, name=f"controller-{self.controller_id}-scheduler")
        self._metric_values: dict[str, float] = dict.fromkeys(_NAME, 0.0)
        self._unclean_meter = self.metrics.meter(UNCLEAN_LEADER_ELECTIONS_PER_SEC, "Unclean leader elections")
        self._unclean_seen = 0
        self._register_metrics()
        self.build_state_machines()
        self._dispatch: dict[type[ControllerEvent], Callable[[Any], None]] = self._dispatch_table()

    # ------------------------------------------------------------------ wiring
    def build_state_machines(self) -> None:
        """Fresh batches, state machines and deletion manager (at construction, on every
        failover, and when a broker default they read changes)."""
        ctx, store, cid = self.controller_context, self.store, self.controller_id
        ibp = self.config.inter_broker_protocol_version

        def batch() -> ControllerBrokerRequestBatch:
            return ControllerBrokerRequestBatch(
                cid,
                ctx,
                self.channel_manager,
                self._event_sink,
                ibp=ibp,
                inter_broker_listener_name=self._listener,
            )

        audit = self.audit if self.audit.enabled else None
        self.broker_request_batch = batch()
        self.replica_state_machine = rsm = ReplicaStateMachine(cid, ctx, store, batch(), audit=audit)
        self.partition_state_machine = psm = PartitionStateMachine(
            cid, ctx, store, batch(), broker_config=self._log_config_defaults(), audit=audit
        )
        # Cached-state writes, offline leaders left to the election, writes started early (core.*).
        psm.write_on_cached_zk_version = rsm.write_on_cached_zk_version = True
        rsm.leave_offline_leaders_to_election = rsm.prewrite_isr_removal = True
        rsm.on_left_to_election = psm.start_election_prewrite
        self.topic_deletion_manager = TopicDeletionManager(
            cid,
            ctx,
            self.replica_state_machine,
            self.partition_state_machine,
            ControllerDeletionClient(self, store),
            delete_topic_enable=self.config.delete_topic_enable,
        )

    def _log_config_defaults(self) -> dict[str, str]:
        """Kafka's ``config.originals()`` with the broker's unclean default spelled out."""
        defaults = self.config.originals()
        defaults[UNCLEAN_LEADER_ELECTION_ENABLE] = str(self.config.unclean_leader_election_enable).lower()
        return defaults

    def _event_sink(self, event: object) -> None:
        """Response callbacks of the batches (channel threads): wrap and enqueue, nothing else."""
        if isinstance(event, core_events.LeaderAndIsrResponseReceived):
            self.enqueue(ev.LeaderAndIsrResponseReceived(event.response, event.broker_id))
        elif isinstance(event, core_events.UpdateMetadataResponseReceived):
            self.enqueue(ev.UpdateMetadataResponseReceived(event.response, event.broker_id))
        elif isinstance(event, core_events.TopicDeletionStopReplicaResponseReceived):
            self.enqueue(
                ev.TopicDeletionStopReplicaResponseReceived(
                    event.broker_id, event.error, dict(event.partition_errors)
                )
            )
        elif isinstance(event, ControllerEvent):
            self.enqueue(event)
        else:
            log.warning("Dropping unexpected event %r from a broker response", event)

    # ------------------------------------------------------------------ lifecycle
    def startup(self) -> None:
        """Listen to the session, queue Startup (which runs the election) and start the thread."""
        self.store.add_session_listener(self._on_session_event)
        self.event_manager.put(ev.Startup())
        self.event_manager.start()

    def shutdown(self) -> None:
        """Stop the event thread (queued events are preempted), then resign locally."""
        self.store.remove_session_listener(self._on_session_event)
        self.event_manager.close()
        self.active_controller_id = -1
        self.on_controller_resignation()

    def wait_until_idle(self, timeout_s: float = 30.0) -> bool:
        """Block until every queued event, and every event those queue, has been processed;
        False if that did not happen within ``timeout_s`` (per barrier). For tests, benchmarks and
        tools that act on the controller and then read what it did. Never call it from the event
        thread."""
        for _ in range(1000):
            done = threading.Event()
            idle: list[bool] = []

            def barrier(done: threading.Event = done, idle: list[bool] = idle) -> None:
                idle.append(self.event_manager.is_empty)
                done.set()

            def preempted(done: threading.Event = done, idle: list[bool] = idle) -> None:
                idle.append(True)  # shut down: nothing will run any more
                done.set()

            self.event_manager.put(ev.MockEvent(barrier, on_preempt=preempted))
            if not done.wait(timeout_s):
                return False
            if idle[0]:
                return True
        return False

    # ------------------------------------------------------------------ event processing
    def process(self, event: ControllerEvent) -> None:
        self.audit.begin_event(ev.event_name(event), getattr(event, "operation_id", None))
        self._answer = None
        try:
            handler = self._dispatch.get(type(event))
            if handler is not None:
                handler(event)
            elif isinstance(event, ev.MockEvent):
                event.process()
            else:
                log.error("Unknown controller event %r", event)
        except ControllerMovedError as e:
            log.info("Controller moved to another broker when processing %s: %s", ev.event_name(event), e)
            self._answer_failure(event, Errors.NOT_CONTROLLER, e)
            try:
                self.maybe_resign()
            except Exception:
                log.exception("Error while checking whether to resign after %s", ev.event_name(event))
        except Exception as e:
            log.exception("Error processing event %r", event)
            self._answer_failure(event, Errors.UNKNOWN_SERVER_ERROR, e)
        finally:
            self._answer = None
            try:
                self.update_metrics()
            finally:
                self.audit.end_event()

    def preempt(self, event: ControllerEvent) -> None:
        event.preempt()

    def _once(self, callback: Callable[[Any], None]) -> _Once:
        self._answer = _Once(callback)
        return self._answer

    def _answer_failure(self, event: ControllerEvent, error: Errors, exc: Exception) -> None:
        """Answer a caller the handler did not answer before it failed."""
        answer = self._answer
        if answer is None or answer.called:
            return
        api_error = ev.ApiError(error, str(exc) or None)
        if isinstance(event, ev.ReplicaLeaderElection):
            answer(dict.fromkeys(event.partitions or (), api_error))
        elif isinstance(event, ev.ControlledShutdown):
            answer(exc)
        elif isinstance(event, ev.AlterIsrReceived):
            answer(error)
        else:
            answer(api_error)

    def _dispatch_table(self) -> dict[type[ControllerEvent], Callable[[Any], None]]:
        return {
            ev.Startup: lambda e: self.process_startup(),
            ev.ControllerChange: lambda e: self.process_controller_change(),
            ev.Reelect: lambda e: self.process_reelect(e.controller_gone_ms),
            ev.RegisterBrokerAndReelect: lambda e: self.process_register_broker_and_reelect(),
            ev.Expire: lambda e: self.process_expire(),
            ev.SessionReconnected: lambda e: self.process_session_reconnected(),
            ev.BrokerChange: lambda e: self.process_broker_change(),
            ev.BrokerModifications: lambda e: self.process_broker_modification(e.broker_id),
            ev.TopicChange: lambda e: self.process_topic_change(),
            ev.PartitionModifications: lambda e: self.process_partition_modifications(e.topic),
            ev.TopicDeletion: lambda e: self.process_topic_deletion(),
            ev.TopicDeletionStopReplicaResponseReceived: lambda e: (
                self.process_topic_deletion_stop_replica_response_received(
                    e.replica_id, e.request_error, e.partition_errors
                )
            ),
            ev.ZkPartitionReassignment: lambda e: self._process_zk_partition_reassignment(),
            ev.ApiPartitionReassignment: lambda e: self.process_api_partition_reassignment(
                e.reassignments, self._once(e.callback)
            ),
            ev.PartitionReassignmentIsrChange: lambda e: self.process_partition_reassignment_isr_change(
                e.partition
            ),
            ev.ListPartitionReassignments: lambda e: self.process_list_partition_reassignments(
                e.partitions, self._once(e.callback)
            ),
            ev.DescribeControllerContext: self._process_describe_controller_context,
            ev.AutoPreferredReplicaLeaderElection: lambda e: (
                self.process_auto_preferred_replica_leader_election()
            ),
            ev.ReplicaLeaderElection: self._process_replica_leader_election,
            ev.ControlledShutdown: lambda e: self.process_controlled_shutdown(
                e.broker_id, e.broker_epoch, self._once(e.callback)
            ),
            ev.UncleanLeaderElectionEnable: lambda e: self._process_unclean_leader_election_enable(),
            ev.TopicUncleanLeaderElectionEnable: lambda e: self.process_topic_unclean_leader_election_enable(
                e.topic
            ),
            ev.DynamicBrokerConfigChange: lambda e: self.process_dynamic_broker_config_change(
                e.cluster_default, e.per_broker
            ),
            ev.IsrChangeNotification: lambda e: self.process_isr_change_notification(),
            ev.AlterIsrReceived: lambda e: self.process_alter_isr(
                e.broker_id, e.broker_epoch, e.isrs, self._once(e.callback)
            ),
            ev.LeaderAndIsrResponseReceived: lambda e: self.process_leader_and_isr_response_received(
                e.response, e.broker_id
            ),
            ev.UpdateMetadataResponseReceived: lambda e: self.process_update_metadata_response_received(
                e.response, e.broker_id
            ),
            ev.LogDirEventNotification: lambda e: self.process_log_dir_event_notification(),
            ev.UpdateFeatures: self._process_update_features,
        }

    def _process_zk_partition_reassignment(self) -> None:
        self.process_zk_partition_reassignment()

    def _process_replica_leader_election(self, e: ev.ReplicaLeaderElection) -> None:
        partitions = e.partitions
        if partitions is None and e.trigger is ev.ElectionTrigger.ADMIN_CLIENT_TRIGGERED and self.is_active:
            partitions = self.controller_context.all_partitions  # "all partitions" from the admin API
        self.process_replica_leader_election(partitions, e.election_type, e.trigger, self._once(e.callback))

    def _process_unclean_leader_election_enable(self) -> None:
        """The broker default was raised (Kafka's dynamic config): the state machines read it."""
        if not self.config.unclean_leader_election_enable:
            self.config = self.config.with_overrides({UNCLEAN_LEADER_ELECTION_ENABLE: "true"})
            self.build_state_machines()
        self.process_unclean_leader_election_enable()

    def process_session_reconnected(self) -> None:
        """Finish what the connection loss may have cut short (not Kafka's, whose ZooKeeper calls
        wait for the connection instead of failing). A candidate elects unless someone is the
        controller: its Startup or Reelect may have failed, and an absent ``/controller`` fires no
        watch. The controller re-checks every reassignment in flight (one batched read; an event
        may have written an ISR that completes one and failed to read it back) and elects what is
        offline. Watch-driven work needs nothing: dropped watches are re-armed and fired for what
        changed."""
        if not self.is_active:
            return self.elect()
        ctx = self.controller_context
        reassigning = sorted(ctx.partitions_being_reassigned)
        log.info("Session reconnected: re-checking %d reassignments in flight", len(reassigning))
        self.maybe_complete_reassignments(reassigning)  # one batched read; the complete ones finish
        self.partition_state_machine.trigger_online_partition_state_change()

    def _process_describe_controller_context(self, e: ev.DescribeControllerContext) -> None:
        """Only the active controller's context is worth describing; a failure while building it is
        answered UNKNOWN_SERVER_ERROR by ``process``, like any other event's."""
        answer = self._once(e.callback)
        if not self.is_active:
            answer(ev.ApiError(Errors.NOT_CONTROLLER))
        else:
            answer(describe_context(self.controller_context, self.controller_id))

    def _process_update_features(self, e: ev.UpdateFeatures) -> None:
        answer = self._once(e.callback)
        if not self.is_active:
            answer(ev.ApiError(Errors.NOT_CONTROLLER))
        else:
            answer(
                ev.ApiError(
                    Errors.INVALID_REQUEST, "this controller finalizes no features (Kafka 2.8 default)"
                )
            )
