"""Test doubles for the runtime tests: a manual clock and a recording event processor."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from kafka_controller.controller.controller_state import ControllerState
from kafka_controller.controller.event_manager import ControllerEvent
from kafka_controller.testing.clock import ManualClock

__all__ = ["DEADLINE_S", "ManualClock", "RecordingProcessor"]

DEADLINE_S = 10.0


@dataclass
class Ev(ControllerEvent):
    """A test event: ``name`` identifies it; ``action`` runs inside ``process``."""

    name: str
    action: Callable[[], None] | None = None
    preempted: list[str] = field(default_factory=list)

    def preempt(self) -> None:
        self.preempted.append(self.name)


@dataclass
class BrokerChangeEv(Ev):
    state = ControllerState.BROKER_CHANGE


@dataclass
class UpdateMetadataEv(Ev):
    state = ControllerState.UPDATE_METADATA_RESPONSE_RECEIVED


class RecordingProcessor:
    """Records processed and preempted event names; signals each processed name."""

    def __init__(self, states_seen: Callable[[], ControllerState] | None = None) -> None:
        self.processed: list[str] = []
        self.preempted: list[str] = []
        self.states: list[ControllerState] = []
        self._state_probe = states_seen
        self._cond = threading.Condition()

    def process(self, event: ControllerEvent) -> None:
        assert isinstance(event, Ev)
        if self._state_probe is not None:
            self.states.append(self._state_probe())
        try:
            if event.action is not None:
                event.action()
        finally:
            with self._cond:
                self.processed.append(event.name)
                self._cond.notify_all()

    def preempt(self, event: ControllerEvent) -> None:
        assert isinstance(event, Ev)
        self.preempted.append(event.name)
        event.preempt()

    def wait_processed(self, count: int, timeout_s: float = DEADLINE_S) -> list[str]:
        with self._cond:
            ok = self._cond.wait_for(lambda: len(self.processed) >= count, timeout_s)
        assert ok, f"only {self.processed} processed before the deadline"
        return list(self.processed)


def wait_until(predicate: Callable[[], bool], timeout_s: float = DEADLINE_S, what: str = "condition") -> None:
    """Poll ``predicate`` with a deadline (real time: it synchronises with other threads)."""
    deadline = time.monotonic() + timeout_s
    pause = threading.Event()
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        pause.wait(0.002)
