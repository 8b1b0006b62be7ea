"""Control requests that claim a controller epoch newer than the broker knows are checked first.

Kafka's brokers adopt any LeaderAndIsr, UpdateMetadata or StopReplica whose controller epoch is
not older than the last one they saw (``ReplicaManager.becomeLeaderOrFollower``,
``KafkaApis.handleUpdateMetadataRequest``): nothing ties the epoch to ZooKeeper, so one forged
request with epoch 2^31-1 from any peer that reaches the listener raises the broker's epoch past
anything a real controller will ever have; every later request of the real controller is then
STALE_CONTROLLER_EPOCH until a restart, and a forged UpdateMetadata's empty broker list is what
every client is told.

This project checks such a request against ``/controller_epoch`` before it is adopted: a
controller writes that znode (conditionally, in the multi that creates ``/controller``) before it
sends anything, so a real controller's epoch is always at most what ZooKeeper holds. A claim that
ZooKeeper does not back is refused (STALE_CONTROLLER_EPOCH). Cheap: ZooKeeper is read only for an
epoch above both the broker's own and the highest one ZooKeeper already vouched for (so once per
controller change), and reads are serialised; a request waiting for a read reuses an answer from a
read that started after it arrived, so a flood of forged requests costs at most one read at a time
and never delays a real controller's request behind a stale answer.

The broker's ZooKeeper session may be served by a follower a little behind the leader that
acknowledged the controller's write; before a claim is refused, ZooKeeper's ``sync`` (when the
store offers one) brings that server up to date and the epoch is read once more.

A claim that cannot be checked (the session is suspended while the ensemble elects a leader, say)
is neither adopted nor refused: ``UnansweredRequestError`` makes the server close the connection
without an answer, and the controller sends the request again until the broker can check it. A
refusal would be final — Kafka's controller only logs STALE_CONTROLLER_EPOCH — and would leave the
broker without the leadership the new controller gave it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from kafka_controller.domain.errors import KafkaControllerError, UnansweredRequestError

log = logging.getLogger(__name__)

#: Refusals are logged once per this many seconds (with a count of those not logged).
LOG_INTERVAL_S = 10.0


class ControllerEpochGuard:
    """``unbacked(epoch, known)``: None when a request with controller epoch ``epoch`` may be acted
    on by a broker that knows epoch ``known``, else why not (one line).

    ``read_epoch()`` returns ``/controller_epoch``'s epoch, or None when the znode is absent; it
    may raise ``KafkaControllerError`` (ZooKeeper unreachable: ``unbacked`` then raises
    ``UnansweredRequestError``, because the claim can be neither backed nor refused yet)."""

    def __init__(
        self,
        read_epoch: Callable[[], int | None],
        clock: Callable[[], int] = time.monotonic_ns,
        *,
        sync: Callable[[], None] | None = None,
    ) -> None:
        """``sync()``: ZooKeeper's sync of ``/controller_epoch`` (None: the store has none)."""
        self._read_epoch = read_epoch
        self._sync = sync
        self._clock = clock
        self._read_lock = threading.Lock()
        self._backed = -1  # the highest epoch ZooKeeper has vouched for
        self._last_read: tuple[int, int | None] | None = None  # (started at, epoch read)
        self._log_lock = threading.Lock()
        self._logged_at: float | None = None
        self._unlogged = 0
        self.reads = 0  # ZooKeeper reads made (tests and metrics look at it)

    @property
    def backed_epoch(self) -> int:
        """The highest controller epoch ZooKeeper has vouched for (-1: none yet)."""
        return self._backed

    def unbacked(self, epoch: int, known: int) -> str | None:
        """Raises ``UnansweredRequestError`` when ZooKeeper cannot be asked now."""
        if epoch <= known or epoch <= self._backed:
            return None
        arrived = self._clock()
        with self._read_lock:
            if epoch <= self._backed:  # a read made while this one waited vouched for it
                return None
            last = self._last_read
            if last is None or last[0] < arrived:
                started = self._clock()
                current = self._read_or_raise()
                if (current is None or current < epoch) and self._sync is not None:
                    _sync_or_raise(self._sync)
                    current = self._read_or_raise()  # the server caught up with the leader first
                self._last_read = last = (started, current)
                if current is not None and current > self._backed:
                    self._backed = current
            current = last[1]
        if current is None:
            return "ZooKeeper has no /controller_epoch"
        if epoch <= current:
            return None
        return f"/controller_epoch in ZooKeeper is {current}"

    def _read_or_raise(self) -> int | None:
        self.reads += 1
        try:
            return self._read_epoch()
        except KafkaControllerError as e:
            raise UnansweredRequestError(f"/controller_epoch could not be read to check it ({e})") from e

    def log_refusal(self, api: str, peer: str | None, controller_id: int, epoch: int, why: str) -> None:
        """Log a refusal with its sender, at most once per ``LOG_INTERVAL_S`` (a flood of forged
        requests is one line per interval, with how many were not logged)."""
        now = time.monotonic()
        with self._log_lock:
            if self._logged_at is not None and now - self._logged_at < LOG_INTERVAL_S:
                self._unlogged += 1
                return
            unlogged, self._unlogged, self._logged_at = self._unlogged, 0, now
        more = f" ({unlogged} more refused since the last such line)" if unlogged else ""
        log.warning(
            "Refused %s from %s claiming controller %d at epoch %d: %s%s",
            api,
            peer or "an unknown peer",
            controller_id,
            epoch,
            why,
            more,
        )


def _sync_or_raise(sync: Callable[[], None]) -> None:
    """Bring the session's server up to date before a claim is refused; a sync that fails leaves
    the claim unchecked."""
    try:
        sync()
    except Exception as e:  # the client's own errors (kazoo's), as the read's would be
        raise UnansweredRequestError(f"ZooKeeper's sync before checking the epoch failed ({e})") from e
