"""Start-up's ZooKeeper steps ride out a lost connection, as a Kafka broker's do.

Kafka's ``KafkaZkClient`` sends a request again once the client is connected when it failed with
CONNECTIONLOSS (``retryRequestsUntilConnected``), so a broker starting while its ZooKeeper
connection drops (a server restarting, a partition shorter than the session) finishes its start.
The store fails fast instead (the controller must never block on it), so the broker's start waits
here: a step cut short is tried again once the store is connected, until a stop is asked for. A
session that expired meanwhile is a new one by then, and each step is safe to repeat on it
(``register_broker`` counts a znode of its own session as its own).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TypeVar

from kafka_controller.domain.errors import StoreUnavailableError
from kafka_controller.ports import Clock, MetadataStore

log = logging.getLogger(__name__)
T = TypeVar("T")

#: How often the connection is looked at while waiting (the store has no blocking wait).
POLL_S = 0.05
#: How often a wait that goes on says so in the log.
LOG_EVERY_S = 10.0


class UntilConnected:
    """``retry(step, what)``: ``step()``, again after each ``StoreUnavailableError`` once the store
    is connected. The last ``StoreUnavailableError`` is raised when ``stop`` is set while waiting
    (the broker was told to stop before it had started); any other error at once."""

    def __init__(self, store: MetadataStore, stop: threading.Event, clock: Clock) -> None:
        self._store = store
        self._stop = stop
        self._clock = clock

    def __call__(self, step: Callable[[], T], what: str) -> T:
        first = True
        while True:
            try:
                return step()
            except StoreUnavailableError as e:
                if first:  # a flapping link is logged once
                    log.warning("%s was cut short (%s); waiting until connected to ZooKeeper", what, e)
                if not self._wait_connected():
                    raise
                if first:
                    log.info("Connected to ZooKeeper again: %s once more", what)
                first = False

    def _wait_connected(self) -> bool:
        """False if ``stop`` was set first. At least one poll interval passes, so that an error the
        store raises while it reports itself connected is not retried in a tight loop."""
        started = last_said = self._clock.monotonic()
        while True:
            if self._stop.wait(POLL_S):
                return False
            if self._store.connected:
                return True
            if (now := self._clock.monotonic()) - last_said >= LOG_EVERY_S:
                log.warning("Still waiting until connected to ZooKeeper (%.0f s)", now - started)
                last_said = now
