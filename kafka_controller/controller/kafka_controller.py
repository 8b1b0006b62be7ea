"""``KafkaController``: Kafka 2.8's ZooKeeper-mode controller, one per broker
(docs/controller-behaviour.md §8; Kafka's ``KafkaController.scala``).

The class itself is the runtime shell: it owns the event queue, the scheduler, the metrics and
the audit stamping, dispatches each event to the concern that handles it (one object per concern,
see ``services``), and offers the entry points other threads call. Those entry points and every store
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
from kafka_controller.controller.broker_configs import DynamicBrokerConfigs
from kafka_controller.controller.brokers import BrokerChanges
from kafka_controller.controller.config import KafkaConfig
from kafka_controller.controller.election import ControllerElection
from kafka_controller.controller.event_manager import ControllerEvent, ControllerEventManager
from kafka_controller.controller.failover import ControllerFailover
from kafka_controller.controller.gauges import ControllerGauges
from kafka_controller.controller.isr import IsrChanges
from kafka_controller.controller.metadata_updates import UpdateMetadataSender
from kafka_controller.controller.metrics import (
    EVENT_QUEUE_TIME_MS,
    MetricsRegistry,
    new_rate_and_time_metrics,
)
from kafka_controller.controller.reassignment import Reassignments
from kafka_controller.controller.reassignment_phases import ReassignmentPhases
from kafka_controller.controller.replica_election import ReplicaElections
from kafka_controller.controller.resignation import ControllerResignation
from kafka_controller.controller.scheduler import KafkaScheduler
from kafka_controller.controller.services import BrokerChannelManager, ControllerServices, StoreWatches
from kafka_controller.controller.shutdown import ControlledShutdownHandling
from kafka_controller.controller.state_machines import StateMachineFactory
from kafka_controller.controller.topics import TopicChanges
from kafka_controller.core.context import ControllerContext
from kafka_controller.core.context_description import describe_context
from kafka_controller.domain.config_keys import UNCLEAN_LEADER_ELECTION_ENABLE
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


class KafkaController:
    """One broker's controller candidate. ``startup()`` joins the election; ``shutdown()`` leaves.

    Composed of one object per concern, each built here with the services and the concerns it
    calls (see ``services``); Kafka's method names live on those objects (``failover``'s
    ``on_controller_failover``, ``broker_changes``' ``on_broker_failure``, ``reassignment_phases``'
    ``on_partition_reassignment``). This class keeps the event loop's side: dispatch, answers,
    metrics after each event, and the entry points other threads call."""

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
        clock = clock or SystemClock()
        controller_id = config.broker_id
        context = ControllerContext()
        self._answer: _Once | None = None
        self.metrics = metrics or MetricsRegistry(clock)
        event_manager = ControllerEventManager(
            controller_id,
            self,
            clock,
            rate_and_time_metrics=new_rate_and_time_metrics(self.metrics),
            event_queue_time_histogram=self.metrics.histogram(EVENT_QUEUE_TIME_MS, "Time events wait (ms)"),
        )
        self.services = s = ControllerServices(
            config,
            store,
            channel_manager,
            clock,
            ControllerAuditSink(audit or NullAuditSink(), controller_id, clock, lambda: context.epoch),
            event_manager,
            KafkaScheduler(clock, name=f"controller-{controller_id}-scheduler"),
            context,
            StoreWatches(event_manager, clock),
            broker_info,
        )
        self.gauges = ControllerGauges(s, self.metrics)
        self.resignation = ControllerResignation(s, self.gauges)
        self.metadata = UpdateMetadataSender(s, self.resignation)
        self.state_machines = StateMachineFactory(s, self.metadata, inter_broker_listener_name)
        self.state_machines.build_state_machines()
        self.replica_elections = ReplicaElections(s)
        self.broker_configs = DynamicBrokerConfigs(s, config, self.state_machines, self.replica_elections)
        self.reassignment_phases = ReassignmentPhases(s, self.metadata, self.resignation)
        self.reassignments = Reassignments(s, self.reassignment_phases)
        self.failover = ControllerFailover(
            s,
            self.state_machines,
            self.metadata,
            self.broker_configs,
            self.reassignments,
            self.replica_elections,
        )
        self.election = ControllerElection(s, self.resignation, self.failover)
        self.broker_changes = BrokerChanges(s, self.metadata, self.failover, self.reassignment_phases)
        self.controlled_shutdown_handling = ControlledShutdownHandling(s, self.resignation)
        self.topic_changes = TopicChanges(s, self.failover)
        self.isr_changes = IsrChanges(s, self.metadata, self.reassignment_phases)
        api = ControllerApi(s)
        # The entry points other threads call, under Kafka's names (``KafkaController.scala``).
        self.elect_leaders = api.elect_leaders
        self.alter_partition_reassignments = api.alter_partition_reassignments
        self.list_partition_reassignments = api.list_partition_reassignments
        self.describe_controller_context = api.describe_controller_context
        self.controlled_shutdown = api.controlled_shutdown
        self.alter_isr = api.alter_isr
        self.enable_default_unclean_leader_election = api.enable_default_unclean_leader_election
        self.update_dynamic_broker_configs = api.update_dynamic_broker_configs
        self.enable_topic_unclean_leader_election = api.enable_topic_unclean_leader_election
        self.metric = self.gauges.metric
        self.handle_illegal_state = self.resignation.handle_illegal_state
        self._dispatch: dict[type[ControllerEvent], Callable[[Any], None]] = self._dispatch_table()

    # ------------------------------------------------------------------ what callers read
    @property
    def controller_id(self) -> int:
        return self.services.controller_id

    @property
    def is_active(self) -> bool:
        return self.services.is_active

    @property
    def active_controller_id(self) -> int:
        return self.services.active_controller_id

    @property
    def config(self) -> KafkaConfig:
        """The effective config: static plus the dynamic broker configs (``broker_configs``)."""
        return self.services.config

    @property
    def static_config(self) -> KafkaConfig:
        return self.broker_configs.static_config

    @property
    def controller_context(self) -> ControllerContext:
        return self.services.controller_context

    @property
    def store(self) -> MetadataStore:
        return self.services.store

    @property
    def channel_manager(self) -> BrokerChannelManager:
        return self.services.channel_manager

    @property
    def audit(self) -> ControllerAuditSink:
        return self.services.audit

    @property
    def event_manager(self) -> ControllerEventManager:
        return self.services.event_manager

    @property
    def kafka_scheduler(self) -> KafkaScheduler:
        return self.services.kafka_scheduler

    def enqueue(self, event: ControllerEvent) -> None:
        self.services.enqueue(event)

    # ------------------------------------------------------------------ lifecycle
    def startup(self) -> None:
        """Listen to the session, queue Startup (which runs the election) and start the thread."""
        self.store.add_session_listener(self.services.watches.on_session_event)
        self.event_manager.put(ev.Startup())
        self.event_manager.start()

    def shutdown(self) -> None:
        """Stop the event thread (queued events are preempted), then resign locally."""
        self.store.remove_session_listener(self.services.watches.on_session_event)
        self.event_manager.close()
        self.services.active_controller_id = -1
        self.resignation.on_controller_resignation()

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
                self.resignation.maybe_resign()
            except Exception:
                log.exception("Error while checking whether to resign after %s", ev.event_name(event))
        except Exception as e:
            log.exception("Error processing event %r", event)
            self._answer_failure(event, Errors.UNKNOWN_SERVER_ERROR, e)
        finally:
            self._answer = None
            try:
                self.gauges.update_metrics()
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
            ev.Startup: lambda e: self.election.process_startup(),
            ev.ControllerChange: lambda e: self.election.process_controller_change(),
            ev.Reelect: lambda e: self.election.process_reelect(e.controller_gone_ms),
            ev.RegisterBrokerAndReelect: lambda e: self.election.process_register_broker_and_reelect(),
            ev.Expire: lambda e: self.election.process_expire(),
            ev.SessionReconnected: lambda e: self.process_session_reconnected(),
            ev.BrokerChange: lambda e: self.broker_changes.process_broker_change(),
            ev.BrokerModifications: lambda e: self.broker_changes.process_broker_modification(e.broker_id),
            ev.TopicChange: lambda e: self.topic_changes.process_topic_change(),
            ev.PartitionModifications: lambda e: self.topic_changes.process_partition_modifications(e.topic),
            ev.TopicDeletion: lambda e: self.topic_changes.process_topic_deletion(),
            ev.TopicDeletionStopReplicaResponseReceived: lambda e: (
                self.topic_changes.process_topic_deletion_stop_replica_response_received(
                    e.replica_id, e.request_error, e.partition_errors
                )
            ),
            ev.ZkPartitionReassignment: lambda e: self._process_zk_partition_reassignment(),
            ev.ApiPartitionReassignment: lambda e: self.reassignments.process_api_partition_reassignment(
                e.reassignments, self._once(e.callback)
            ),
            ev.PartitionReassignmentIsrChange: lambda e: (
                self.reassignments.process_partition_reassignment_isr_change(e.partition)
            ),
            ev.ListPartitionReassignments: lambda e: self.reassignments.process_list_partition_reassignments(
                e.partitions, self._once(e.callback)
            ),
            ev.DescribeControllerContext: self._process_describe_controller_context,
            ev.AutoPreferredReplicaLeaderElection: lambda e: (
                self.replica_elections.process_auto_preferred_replica_leader_election()
            ),
            ev.ReplicaLeaderElection: self._process_replica_leader_election,
            ev.ControlledShutdown: lambda e: self.controlled_shutdown_handling.process_controlled_shutdown(
                e.broker_id, e.broker_epoch, self._once(e.callback)
            ),
            ev.UncleanLeaderElectionEnable: lambda e: self._process_unclean_leader_election_enable(),
            ev.TopicUncleanLeaderElectionEnable: lambda e: (
                self.replica_elections.process_topic_unclean_leader_election_enable(e.topic)
            ),
            ev.DynamicBrokerConfigChange: lambda e: self.broker_configs.process_dynamic_broker_config_change(
                e.cluster_default, e.per_broker
            ),
            ev.IsrChangeNotification: lambda e: self.isr_changes.process_isr_change_notification(),
            ev.AlterIsrReceived: lambda e: self.isr_changes.process_alter_isr(
                e.broker_id, e.broker_epoch, e.isrs, self._once(e.callback)
            ),
            ev.LeaderAndIsrResponseReceived: lambda e: (
                self.broker_changes.process_leader_and_isr_response_received(e.response, e.broker_id)
            ),
            ev.UpdateMetadataResponseReceived: lambda e: (
                self.broker_changes.process_update_metadata_response_received(e.response, e.broker_id)
            ),
            ev.LogDirEventNotification: lambda e: self.broker_changes.process_log_dir_event_notification(),
            ev.UpdateFeatures: self._process_update_features,
        }

    def _process_zk_partition_reassignment(self) -> None:
        self.reassignments.process_zk_partition_reassignment()

    def _process_replica_leader_election(self, e: ev.ReplicaLeaderElection) -> None:
        partitions = e.partitions
        if partitions is None and e.trigger is ev.ElectionTrigger.ADMIN_CLIENT_TRIGGERED and self.is_active:
            partitions = (
                self.services.controller_context.all_partitions
            )  # "all partitions" from the admin API
        self.replica_elections.process_replica_leader_election(
            partitions, e.election_type, e.trigger, self._once(e.callback)
        )

    def _process_unclean_leader_election_enable(self) -> None:
        """The broker default was raised (Kafka's dynamic config): the state machines read it."""
        s = self.services
        if not s.config.unclean_leader_election_enable:
            s.config = s.config.with_overrides({UNCLEAN_LEADER_ELECTION_ENABLE: "true"})
            self.state_machines.build_state_machines()
        self.replica_elections.process_unclean_leader_election_enable()

    def process_session_reconnected(self) -> None:
        """Finish what the connection loss may have cut short (not Kafka's, whose ZooKeeper calls
        wait for the connection instead of failing). A candidate elects unless someone is the
        controller: its Startup or Reelect may have failed, and an absent ``/controller`` fires no
        watch. The controller re-checks every reassignment in flight (one batched read; an event
        may have written an ISR that completes one and failed to read it back) and elects what is
        offline. Watch-driven work needs nothing: dropped watches are re-armed and fired for what
        changed."""
        if not self.is_active:
            return self.election.elect()
        ctx = self.services.controller_context
        reassigning = sorted(ctx.partitions_being_reassigned)
        log.info("Session reconnected: re-checking %d reassignments in flight", len(reassigning))
        self.reassignment_phases.maybe_complete_reassignments(
            reassigning
        )  # one batched read; the complete ones finish
        self.services.partition_state_machine.trigger_online_partition_state_change()

    def _process_describe_controller_context(self, e: ev.DescribeControllerContext) -> None:
        """Only the active controller's context is worth describing; a failure while building it is
        answered UNKNOWN_SERVER_ERROR by ``process``, like any other event's."""
        answer = self._once(e.callback)
        if not self.is_active:
            answer(ev.ApiError(Errors.NOT_CONTROLLER))
        else:
            answer(describe_context(self.services.controller_context, self.controller_id))

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
