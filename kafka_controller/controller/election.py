"""Controller election and resignation (docs/controller-behaviour.md §7.2, §8.2): who is the
controller, and what happens when that changes.

Every broker runs a candidate; the first to create ``/controller`` in one multi with the bump of
``/controller_epoch`` wins, and the epoch's zk version then fences all of its writes. A candidate
that finds itself fenced (``ControllerMovedError`` anywhere) re-reads ``/controller`` and resigns
if someone else holds it (``maybe_resign``); one that hits an unexpected error gives the role up
by deleting ``/controller`` (``trigger_controller_move``), which makes every broker re-elect.
"""

from __future__ import annotations

from kafka_controller.controller.failover import ControllerFailover
from kafka_controller.controller.resignation import ControllerResignation
from kafka_controller.controller.services import (
    ControllerServices,
    log,
)
from kafka_controller.domain.errors import ControllerMovedError


class ControllerElection:
    """Startup, ControllerChange, Reelect, RegisterBrokerAndReelect, Expire: Kafka's ``elect`` and
    the events that lead to it."""

    def __init__(
        self,
        services: ControllerServices,
        resignation: ControllerResignation,
        failover: ControllerFailover,
    ) -> None:
        self._s = services
        self._resignation = resignation
        self._failover = failover

    def process_startup(self) -> None:
        self._s.store.watch_controller(self._s.watches.on_controller_znode)
        self.elect()

    def elect(self) -> None:
        """Become the controller unless someone already is (Kafka's ``KafkaController.elect``)."""
        self._s.active_controller_id = self._resignation.read_controller_id()
        if self._s.active_controller_id != -1:
            log.debug(
                "Broker %d has been elected as the controller, so stopping the election process.",
                self._s.active_controller_id,
            )
            return
        ctx = self._s.controller_context
        try:
            started_ms, start = self._s.clock.time_ms(), self._s.clock.monotonic()
            epoch, epoch_zk_version = self._s.store.register_controller_and_increment_controller_epoch(
                self._s.controller_id
            )
            ctx.epoch, ctx.epoch_zk_version = epoch, epoch_zk_version
            self._s.active_controller_id = self._s.controller_id
            self._s.audit.record_controller_event(
                "elected",
                started_ms,
                (self._s.clock.monotonic() - start) * 1000.0,
                f"epoch {epoch}, epoch zk version {epoch_zk_version}",
            )
            log.info(
                "%d successfully elected as the controller. Epoch incremented to %d and epoch zk version "
                "is now %d",
                self._s.controller_id,
                epoch,
                epoch_zk_version,
            )
            self._failover.on_controller_failover()
        except ControllerMovedError as e:
            log.info("Controller moved to another broker when electing %d: %s", self._s.controller_id, e)
            self._resignation.maybe_resign()
        except Exception:
            log.exception("Error while electing or becoming controller on broker %d", self._s.controller_id)
            self._resignation.trigger_controller_move()

    def process_reelect(self, controller_gone_ms: int | None = None) -> None:
        """``controller_gone_ms``: when ``/controller``'s deletion was seen (a Reelect), kept with
        the controller last seen so that a failover this election starts can say what outage it
        ends (``failover`` event's ``previous_broker_id`` and ``lost_ms``)."""
        previous = self._s.active_controller_id
        self._resignation.maybe_resign()
        self._s.outage = (previous if previous >= 0 else None, controller_gone_ms)
        try:
            self.elect()
        finally:
            self._s.outage = None

    def process_controller_change(self) -> None:
        self._resignation.maybe_resign()

    def process_register_broker_and_reelect(self) -> None:
        """A new session: re-register this broker (a new broker epoch), then re-elect."""
        if self._s.broker_info is not None:
            epoch = self._s.store.register_broker(self._s.broker_info)
            log.info("Re-registered broker %d with broker epoch %d", self._s.broker_info.id, epoch)
        self.process_reelect()

    def process_expire(self) -> None:
        """The session expired: ``/controller`` is gone with it, so stop acting as controller."""
        self._s.active_controller_id = -1
        self._resignation.on_controller_resignation()
