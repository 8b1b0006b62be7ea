"""A broker's ZooKeeper session expiry: register again (KIP-380: a new, larger broker epoch).

The store's session listener runs on a store thread and only remembers and enqueues; the broker's
own task thread re-registers, waiting out a lost connection (``zk_wait.UntilConnected``) and
retrying refusals a bounded number of times. With a ``data_dir`` it records the new session for
crash detection (``session_file``) before registering and again with the new epoch after.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

from kafka_controller.broker import zk_wait
from kafka_controller.domain.errors import MetadataStoreError
from kafka_controller.domain.values import Broker
from kafka_controller.ports import Clock, MetadataStore, SessionEvent
from kafka_controller.zk import session_file

log = logging.getLogger("kafka_controller.broker.server")  # the broker's lines, as before the split
#: Re-registration attempts after a session expiry that fail otherwise than by a lost connection.
REREGISTER_ATTEMPTS = 30


class SessionExpiry:
    """A broker's session listener and its re-registration, given what they use by ``BrokerServer``
    when its store is open.

    ``broker_info()`` is the registration to make again (built before the broker first registers);
    ``reregistered(epoch)`` is told the new broker epoch (the server keeps ``broker_epoch``);
    ``enqueue`` puts the re-registration on the broker's own task thread; ``halted`` is set once
    the broker is being stopped, which ends the attempts."""

    def __init__(
        self,
        broker_id: int,
        store: MetadataStore,
        *,
        broker_info: Callable[[], Broker | None],
        reregistered: Callable[[int], None],
        enqueue: Callable[[Callable[[], None]], None],
        halted: threading.Event,
        clock: Clock,
        data_dir: str | Path | None,
    ) -> None:
        self.broker_id = broker_id
        self._store = store
        self._data_dir = data_dir
        self._broker_info = broker_info
        self._reregistered = reregistered
        self._enqueue = enqueue
        self._halted = halted
        self._clock = clock
        self._session_expired = False

    def on_session_event(self, event: SessionEvent) -> None:
        """A store thread: only remember and enqueue."""
        if event is SessionEvent.EXPIRED:
            self._session_expired = True
        elif event is SessionEvent.CONNECTED and self._session_expired:
            self._session_expired = False
            self._enqueue(self._reregister)

    def _reregister(self) -> None:
        store, info = self._store, self._broker_info()
        assert info is not None
        if self._halted.is_set():  # stopped before the task ran; later attempts check as they back off
            return
        retry = zk_wait.UntilConnected(store, self._halted, self._clock)  # a lost link costs no attempt
        self._record_new_session()  # before it registers (as at startup)
        for attempt in range(1, REREGISTER_ATTEMPTS + 1):
            try:
                epoch = retry(lambda: store.register_broker(info), "Re-registering the broker")
            except MetadataStoreError as e:
                log.warning("Re-registering broker %d failed (attempt %d): %s", self.broker_id, attempt, e)
                if self._halted.wait(min(5.0, 0.2 * attempt)):
                    return
                continue
            self._reregistered(epoch)
            self._record_new_session(epoch)  # the new session is the one to close should this process die
            return
        log.error("Broker %d could not re-register; the controller will treat it as dead", self.broker_id)

    def _record_new_session(self, epoch: int = session_file.UNKNOWN_BROKER_EPOCH) -> None:
        """The session file after an expiry, best effort: a broker that cannot write it (a full or
        broken disk) still re-registers, as Kafka's would, rather than stay unregistered; only a
        crash of this process then waits for the session timeout. The old record names the
        expired session, which no longer owns the registration: a supervisor leaves it alone."""
        if self._data_dir is None:
            return
        try:
            session_file.record_session(self._data_dir, self._store, self.broker_id, epoch)
        except OSError as e:
            log.warning(
                "Broker %d cannot record its ZooKeeper session in %s (%s): should this process die, "
                "its registration lapses only after the session timeout",
                self.broker_id,
                self._data_dir,
                e.strerror or e,
            )
