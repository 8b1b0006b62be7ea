"""Close a dead broker's ZooKeeper session from its session file, so its ephemerals go now.

ZooKeeper lets any client re-attach to a live session with the session's id and password (that
is how a client reconnects); closing that connection then ends the session, and the server
deletes the session's ephemeral znodes (``/brokers/ids/<id>``, ``/controller``) at once, instead
of after ``zookeeper.session.timeout.ms``. Kafka has no such step; a supervisor that saw the
broker process exit uses this one.

Never close a session that is not the dead process's: the caller checks the pid; this module
checks that the recorded session still owns ``/brokers/ids/<id>`` (its ``ephemeralOwner``) and
that the registration is the one the record was written for (its czxid is the broker epoch).
A record written before its registration (broker epoch unknown) is closed when its session owns
the registration, and also when there is none: the process died before or while registering, a
create it sent may still be applied, and closing its session removes whatever that created.
A session that expired meanwhile cannot be re-attached to (the server answers with timeout 0),
so the re-attached client is checked to hold the recorded id before it closes anything.

"Closed" is said only once a read shows the registration gone (or another session's): a close
that was lost on the way is made again. A ZooKeeper that cannot be reached is tried again, from the
owner check on, until the connection timeout has passed: an ensemble electing a leader (its old
leader died, or is being restarted) drops every client for a moment, and a supervisor that gave up
then would leave the dead broker registered for the whole session timeout.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable

from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError

from kafka_controller.domain.errors import StoreUnavailableError
from kafka_controller.ports.clock import Clock, SystemClock
from kafka_controller.zk.backend import Stat
from kafka_controller.zk.kazoo_client import InterruptibleKazooClient
from kafka_controller.zk.paths import broker_id_path
from kafka_controller.zk.security import ZkClientConfig
from kafka_controller.zk.session_file import UNKNOWN_BROKER_EPOCH, SessionRecord

log = logging.getLogger(__name__)

#: Reads the ``Stat`` of a chroot-relative path (None when absent).
StatReader = Callable[[str], "Stat | None"]
#: Makes the client that re-attaches to the recorded session (tests pass a fake).
ClientFactory = Callable[..., InterruptibleKazooClient]
#: The first pause before another try, and the longest (each doubles the one before).
FIRST_RETRY_PAUSE_S, MAX_RETRY_PAUSE_S = 0.1, 1.0
#: How long a close may take to show in a read before it is taken as lost, and the poll's pause.
CONFIRM_S, CONFIRM_POLL_S = 2.0, 0.02


class CloseUnconfirmedError(StoreUnavailableError):
    """A close went out, but no read has shown the registration gone: it is made again, and a
    later look that finds the registration gone counts it as closed."""


class CloseOutcome(enum.Enum):
    CLOSED = "closed"  # re-attached and closed: the session's ephemerals are gone
    NOT_REGISTERED = "not registered"  # /brokers/ids/<id> is gone already: nothing to do
    NOT_OWNER = "not the owner"  # another session holds the registration (a newer incarnation)
    EXPIRED = "expired"  # the session ended before it could be re-attached to


def check_owner(record: SessionRecord, stat: Stat | None) -> CloseOutcome | None:
    """None when ``record``'s session holds the registration it was written for; else why not."""
    unknown = record.broker_epoch == UNKNOWN_BROKER_EPOCH  # written before registering
    if stat is None:
        return None if unknown else CloseOutcome.NOT_REGISTERED
    if stat.ephemeral_owner != record.session_id or not (unknown or stat.czxid == record.broker_epoch):
        return CloseOutcome.NOT_OWNER
    return None


def close_recorded_session(
    config: ZkClientConfig,
    record: SessionRecord,
    *,
    read_stat: StatReader | None = None,
    clock: Clock | None = None,
    connect: ClientFactory = InterruptibleKazooClient,
) -> CloseOutcome:
    """Check the owner (with ``read_stat``, or a client of our own), re-attach, close, and read
    until the registration is gone (a lost close is made again).

    Tried again while ZooKeeper cannot be reached (module docs); raises ``StoreUnavailableError``
    once the connection timeout has passed without an answer."""
    clock = clock or SystemClock()
    patience_s = config.connection_timeout_ms / 1000.0
    deadline = clock.monotonic() + patience_s
    pause = FIRST_RETRY_PAUSE_S
    sent = False  # a close of ours went out, but no read showed it
    while True:
        try:
            timeout_s = max(0.1, deadline - clock.monotonic())
            outcome = _close_once(config, record, read_stat, timeout_s, clock, connect)
        except StoreUnavailableError as e:
            sent = sent or isinstance(e, CloseUnconfirmedError)
            left = deadline - clock.monotonic()
            if left <= 0:
                raise StoreUnavailableError(f"{e}; tried for {patience_s:g} s") from None
            log.info("Closing the session of dead broker %d: %s; trying again", record.broker_id, e)
            clock.sleep(min(pause, left))
            pause = min(2 * pause, MAX_RETRY_PAUSE_S)
            continue
        if sent:  # gone now, after a close of ours whose read-back failed: that close took
            outcome = CloseOutcome.CLOSED
        if outcome is CloseOutcome.CLOSED:
            log.info("Closed ZooKeeper session 0x%x of dead broker %d", record.session_id, record.broker_id)
        return outcome


def _close_once(
    config: ZkClientConfig,
    record: SessionRecord,
    read_stat: StatReader | None,
    timeout_s: float,
    clock: Clock,
    connect: ClientFactory,
) -> CloseOutcome:
    path = broker_id_path(record.broker_id)
    reader = None
    if read_stat is None:
        reader = _started(InterruptibleKazooClient(**config.kazoo_kwargs()), config, timeout_s)
        read_stat = _stat_reader(reader)
    try:
        refused = check_owner(record, read_stat(path))
        if refused is not None:
            return refused
        kwargs = config.kazoo_kwargs()
        # No limit on tries: kazoo stops trying once they are spent but ``start`` still waits out its
        # whole timeout, so a limit spent while an ensemble elects a leader (under a second) left
        # the close waiting for nothing until the connection timeout had passed.
        kwargs["connection_retry"] = {"max_tries": -1, "delay": 0.1, "backoff": 2, "max_delay": 0.5}
        client = _started(
            connect(client_id=(record.session_id, record.password), **kwargs), config, timeout_s
        )
        try:
            attached = client.client_id
            if attached is None or attached[0] != record.session_id:
                return CloseOutcome.EXPIRED  # kazoo fell back to a new session: the old one is over
        finally:
            _stop(client)  # ends whichever session the client holds: the recorded one, or its own new one
        _confirm_closed(record, path, read_stat, clock)
    finally:
        if reader is not None:
            _stop(reader)
    return CloseOutcome.CLOSED


def _confirm_closed(record: SessionRecord, path: str, read_stat: StatReader, clock: Clock) -> None:
    """Wait until the registration is no longer the session's. A close sent as the server dropped
    the connection (an ensemble electing a leader) is lost, and the session would live on until its
    timeout: raising makes the caller close it again. Polled, since the reader's server may apply
    the close a moment after the one that took it."""
    deadline = clock.monotonic() + CONFIRM_S
    why = f"session 0x{record.session_id:x} still holds {path} after its close"
    while True:
        try:
            stat = read_stat(path)
        except StoreUnavailableError as e:  # the reader's server may be the one going away
            why = f"the close of session 0x{record.session_id:x} could not be read back: {e}"
        else:
            if stat is None or stat.ephemeral_owner != record.session_id:
                return
        if clock.monotonic() >= deadline:
            raise CloseUnconfirmedError(why, path=path)
        clock.sleep(CONFIRM_POLL_S)


def _stat_reader(reader: InterruptibleKazooClient) -> StatReader:
    def read(path: str) -> Stat | None:
        try:
            raw = reader.exists(path)
        except KazooException as e:
            raise StoreUnavailableError(f"cannot read {path}: {type(e).__name__}") from None
        return None if raw is None else Stat._make(raw)

    return read


def _started(
    client: InterruptibleKazooClient, config: ZkClientConfig, timeout_s: float
) -> InterruptibleKazooClient:
    try:
        client.start(timeout=timeout_s)
    except (KazooTimeoutError, KazooException) as e:
        _stop(client)
        raise StoreUnavailableError(
            f"cannot connect to ZooKeeper at {config.hosts} ({type(e).__name__})"
        ) from None
    return client


def _stop(client: InterruptibleKazooClient) -> None:
    try:
        client.stop()
        client.close()
    except Exception as e:  # closing is best effort
        log.debug("closing kazoo client: %r", e)
