"""Controller election and resignation (docs/controller-behaviour.md §7.2, §8.2): who is the
controller, and what happens when that changes.

Every broker runs a candidate; the first to create ``/controller`` in one multi with the bump of
``/controller_epoch`` wins, and the epoch's zk version then fences all of its writes. A candidate
that finds itself fenced (``ControllerMovedError`` anywhere) re-reads ``/controller`` and resigns
if someone else holds it (``maybe_resign``); one that hits an unexpected error gives the role up
by deleting ``/controller`` (``trigger_controller_move``), which makes every broker re-elect.
"""

from __future__ import annotations

from kafka_controller.controller.base import ControllerBase, log
from kafka_controller.domain.errors import ControllerMovedError, ZNodeDecodeError


class ControllerElection(ControllerBase):
    """Mixin: Startup, ControllerChange, Reelect, RegisterBrokerAndReelect, Expire."""

    def process_startup(self) -> None:
        self.store.watch_controller(self._on_controller_znode)
        self.elect()

    def elect(self) -> None:
        """Become the controller unless someone already is (Kafka's ``KafkaController.elect``)."""
        self.active_controller_id = self._read_controller_id()
        if self.active_controller_id != -1:
            log.debug(
                "Broker %d has been elected as the controller, so stopping the election process.",
                self.active_controller_id,
            )
            return
        ctx = self.controller_context
        try:
            started_ms, start = self.clock.time_ms(), self.clock.monotonic()
            epoch, epoch_zk_version = self.store.register_controller_and_increment_controller_epoch(
                self.controller_id
            )
            ctx.epoch, ctx.epoch_zk_version = epoch, epoch_zk_version
            self.active_controller_id = self.controller_id
            self.audit.record_controller_event(
                "elected",
                started_ms,
                (self.clock.monotonic() - start) * 1000.0,
                f"epoch {epoch}, epoch zk version {epoch_zk_version}",
            )
            log.info(
                "%d successfully elected as the controller. Epoch incremented to %d and epoch zk version "
                "is now %d",
                self.controller_id,
                epoch,
                epoch_zk_version,
            )
            self.on_controller_failover()
        except ControllerMovedError as e:
            log.info("Controller moved to another broker when electing %d: %s", self.controller_id, e)
            self.maybe_resign()
        except Exception:
            log.exception("Error while electing or becoming controller on broker %d", self.controller_id)
            self.trigger_controller_move()

    def maybe_resign(self) -> None:
        """Re-arm the ``/controller`` watch, re-read it, and resign if the role moved away."""
        was_active = self.is_active
        self.store.watch_controller(self._on_controller_znode)
        self.active_controller_id = self._read_controller_id()
        if was_active and not self.is_active:
            log.info(
                "Controller %d resigning: the controller is now %d",
                self.controller_id,
                self.active_controller_id,
            )
            self.on_controller_resignation()

    def trigger_controller_move(self) -> None:
        """Resign and delete ``/controller`` (fenced) so that every broker re-elects."""
        self.active_controller_id = self._read_controller_id()
        if not self.is_active:
            log.warning("Controller has already moved when trying to trigger controller movement")
            return
        started_ms = self.clock.time_ms()
        try:
            expected = self.controller_context.epoch_zk_version
            self.active_controller_id = -1
            self.on_controller_resignation()
            self.store.delete_controller(expected)
        except ControllerMovedError:
            log.warning("Controller has already moved when trying to trigger controller movement")
        self.audit.record_controller_event(
            "moved", started_ms, 0.0, "deleted /controller to force re-election"
        )

    def handle_illegal_state(self, e: Exception) -> None:
        """A batch could not be sent (KAFKA-2300): drop it, force a re-election, re-raise."""
        self.broker_request_batch.clear()
        self.trigger_controller_move()
        raise e

    def process_reelect(self, controller_gone_ms: int | None = None) -> None:
        """``controller_gone_ms``: when ``/controller``'s deletion was seen (a Reelect), kept with
        the controller last seen so that a failover this election starts can say what outage it
        ends (``failover`` event's ``previous_broker_id`` and ``lost_ms``)."""
        previous = self.active_controller_id
        self.maybe_resign()
        self.outage = (previous if previous >= 0 else None, controller_gone_ms)
        try:
            self.elect()
        finally:
            self.outage = None

    def process_controller_change(self) -> None:
        self.maybe_resign()

    def process_register_broker_and_reelect(self) -> None:
        """A new session: re-register this broker (a new broker epoch), then re-elect."""
        if self.broker_info is not None:
            epoch = self.store.register_broker(self.broker_info)
            log.info("Re-registered broker %d with broker epoch %d", self.broker_info.id, epoch)
        self.process_reelect()

    def process_expire(self) -> None:
        """The session expired: ``/controller`` is gone with it, so stop acting as controller."""
        self.active_controller_id = -1
        self.on_controller_resignation()

    def _read_controller_id(self) -> int:
        try:
            controller_id = self.store.get_controller_id()
        except ZNodeDecodeError as e:
            log.error("Ignoring an undecodable /controller: %s", e)
            return -1
        return -1 if controller_id is None else controller_id
