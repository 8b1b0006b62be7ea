"""Stepping down (docs/controller-behaviour.md §8.4): resign when the role moved, force a move
when the controller cannot go on, and Kafka's ``onControllerResignation``, which only clears local
state and so works with the store unreachable."""

from __future__ import annotations

from kafka_controller import heap
from kafka_controller.controller.gauges import ControllerGauges
from kafka_controller.controller.services import (
    BROKER_IDS_PATH,
    BROKER_TOPICS_PATH,
    DELETE_TOPICS_PATH,
    ISR_CHANGE_NOTIFICATION_PATH,
    LOG_DIR_EVENT_NOTIFICATION_PATH,
    PREFERRED_REPLICA_ELECTION_PATH,
    REASSIGN_PARTITIONS_PATH,
    ControllerServices,
    log,
    partition_state_path,
    topic_path,
)
from kafka_controller.domain.errors import ControllerMovedError, ZNodeDecodeError


class ControllerResignation:
    """Stepping down: Kafka's ``onControllerResignation``, ``maybeResign``,
    ``triggerControllerMove`` and ``handleIllegalState``. Every concern that can find the
    controller fenced or its batch broken holds this object."""

    def __init__(self, services: ControllerServices, gauges: ControllerGauges) -> None:
        self._s = services
        self._gauges = gauges

    def maybe_resign(self) -> None:
        """Re-arm the ``/controller`` watch, re-read it, and resign if the role moved away."""
        was_active = self._s.is_active
        self._s.store.watch_controller(self._s.watches.on_controller_znode)
        self._s.active_controller_id = self.read_controller_id()
        if was_active and not self._s.is_active:
            log.info(
                "Controller %d resigning: the controller is now %d",
                self._s.controller_id,
                self._s.active_controller_id,
            )
            self.on_controller_resignation()

    def trigger_controller_move(self) -> None:
        """Resign and delete ``/controller`` (fenced) so that every broker re-elects."""
        self._s.active_controller_id = self.read_controller_id()
        if not self._s.is_active:
            log.warning("Controller has already moved when trying to trigger controller movement")
            return
        started_ms = self._s.clock.time_ms()
        try:
            expected = self._s.controller_context.epoch_zk_version
            self._s.active_controller_id = -1
            self.on_controller_resignation()
            self._s.store.delete_controller(expected)
        except ControllerMovedError:
            log.warning("Controller has already moved when trying to trigger controller movement")
        self._s.audit.record_controller_event(
            "moved", started_ms, 0.0, "deleted /controller to force re-election"
        )

    def handle_illegal_state(self, e: Exception) -> None:
        """A batch could not be sent (KAFKA-2300): drop it, force a re-election, re-raise."""
        self._s.broker_request_batch.clear()
        self.trigger_controller_move()
        raise e

    def on_controller_resignation(self) -> None:
        epoch = self._s.controller_context.epoch
        if epoch == 0:  # never became controller (or already resigned): nothing worth a record
            self._on_controller_resignation()
            return
        with self._s.audit.timed("resigned", lambda: f"epoch {epoch}", controller_epoch=epoch):
            self._on_controller_resignation()

    def _on_controller_resignation(self) -> None:
        """Kafka's ``onControllerResignation`` (docs/controller-behaviour.md §8.4), in order. Only
        local bookkeeping: it works with the store unreachable."""
        log.debug("Resigning")
        ctx = self._s.controller_context
        store = self._s.store
        for path in (
            ISR_CHANGE_NOTIFICATION_PATH,
            REASSIGN_PARTITIONS_PATH,
            PREFERRED_REPLICA_ELECTION_PATH,
            LOG_DIR_EVENT_NOTIFICATION_PATH,
        ):
            store.unwatch(path)
        self._s.unregister_broker_modifications_handlers(self._s.watched_brokers)
        self._s.kafka_scheduler.shutdown()
        if not self._s.config.is_alter_isr_enabled:
            for tp in ctx.partitions_being_reassigned:
                store.unwatch(partition_state_path(tp))
        self._s.partition_state_machine.shutdown()
        store.unwatch(BROKER_TOPICS_PATH)
        for topic in ctx.all_topics:
            store.unwatch(topic_path(topic))
        store.unwatch(DELETE_TOPICS_PATH)
        self._s.replica_state_machine.shutdown()
        store.unwatch(BROKER_IDS_PATH)
        self._s.channel_manager.shutdown()
        ctx.reset_context()
        heap.unfreeze()  # what the context held is garbage now: let the collector see it again
        self._gauges.update_metrics()
        log.info("Resigned")

    def read_controller_id(self) -> int:
        try:
            controller_id = self._s.store.get_controller_id()
        except ZNodeDecodeError as e:
            log.error("Ignoring an undecodable /controller: %s", e)
            return -1
        return -1 if controller_id is None else controller_id
