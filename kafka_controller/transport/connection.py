"""One accepted connection as the listener's network thread sees it (Kafka's ``KafkaChannel``).

A connection is always in exactly one state:

* ``HANDSHAKING``: a TLS listener's connection before its handshake is complete (no frame is
  read until it is; the peer's idleness counts, as for ``READING``);
* ``READING``: waiting for, or in the middle of, a frame (the only state a peer can be idle in);
* ``WAITING_MEMORY``: its length prefix is read but ``queued.max.request.bytes`` has no room
  yet; muted until a request elsewhere is released (Kafka mutes on memory pressure too);
* ``IN_FLIGHT``: a complete request is queued for or held by a request-handler thread; muted,
  so at most one request per connection is ever held (Kafka's ``mute`` after a receive);
* ``WRITING``: its answer is being written; reading resumes when the answer is out;
* ``REFUSING``: a bad length prefix was read and the server waits (briefly) for the frame's
  first byte, which tells whether the peer speaks Kafka's protocol or the private one;
* ``LINGERING``: refused; half-closed and drained for a bounded time before the close, so the
  peer reads the refusal instead of a reset.

**Authentication seam.** Every connection carries an ``Authenticator``. A PLAINTEXT listener's
is complete from the start with Kafka's ``User:ANONYMOUS`` principal. A SASL listener's is not:
until it is, frames go to its ``receive`` instead of the handlers, and a length prefix above
``sasl.server.max.receive.size`` is refused (Kafka's bound for unauthenticated peers, the fix of
CVE-2022-34917) rather than ``socket.request.max.bytes``. On a TLS listener the authenticator is
made once the handshake is complete, from the client's certificate (``listener`` names the
listener, ``tls`` is the connection's ``TlsChannel``; both None/"" where they do not apply).
"""

from __future__ import annotations

import enum
import socket
from typing import Protocol

from kafka_controller.transport.framing import FrameReader
from kafka_controller.transport.tls import TlsChannel

#: Kafka's principal of a peer that did not authenticate (``KafkaPrincipal.ANONYMOUS``).
ANONYMOUS = "User:ANONYMOUS"
#: ``Connection.refusal`` of a peer whose authentication failed (its authenticator's ``failed``):
#: its answer waits ``connection.failed.authentication.delay.ms``, then the connection is closed.
AUTHENTICATION_FAILED = "authentication failed"


class Authenticator(Protocol):
    """What a listener's security layer supplies per connection."""

    @property
    def complete(self) -> bool:
        """Whether the peer has authenticated (always, on a PLAINTEXT listener)."""
        ...

    @property
    def principal(self) -> str:
        """Kafka's principal string (``User:NAME``) once ``complete``."""
        ...

    def receive(self, payload: bytearray) -> bytes | None:
        """A frame read before ``complete``: the answer to write, or None to close."""
        ...


class PlaintextAuthenticator:
    """Kafka's ``DefaultAuthenticator``: nothing to do, the peer is anonymous."""

    complete = True
    principal = ANONYMOUS

    def receive(self, payload: bytearray) -> bytes | None:  # pragma: no cover - never called
        return None


class PendingAuthenticator:
    """A TLS connection's authenticator until its handshake completes (no frame reaches it)."""

    complete = False
    principal = ANONYMOUS

    def receive(self, payload: bytearray) -> bytes | None:  # pragma: no cover - never called
        return None


class State(enum.Enum):
    HANDSHAKING = "handshaking"
    READING = "reading"
    WAITING_MEMORY = "waiting for memory"
    IN_FLIGHT = "in flight"
    WRITING = "writing"
    REFUSING = "refusing"
    LINGERING = "lingering"
    CLOSED = "closed"


class Connection:
    """State of one peer; touched only by the network thread, except ``peer``, ``ip`` and
    ``authenticator``, which request handlers read."""

    __slots__ = (
        "authenticator",
        "deadline",
        "drained",
        "ip",
        "last_active",
        "listener",
        "out",
        "peer",
        "reader",
        "refusal",
        "reserved",
        "sock",
        "state",
        "tls",
    )

    def __init__(
        self,
        sock: socket.socket | TlsChannel,
        address: tuple[str, int],
        authenticator: Authenticator,
        now: float,
        listener: str = "",
    ) -> None:
        self.sock = sock
        self.tls = sock if isinstance(sock, TlsChannel) else None
        self.listener = listener  # the listener's name (``PLAINTEXT``, ``SSL``, ...)
        self.ip = str(address[0])
        self.peer = f"{address[0]}:{address[1]}"
        self.authenticator = authenticator
        self.reader = FrameReader()
        self.state = State.READING
        self.last_active = now
        self.reserved = 0  # bytes held in the listener's MemoryPool for the current request
        self.out: memoryview | None = None  # what is left to write
        self.deadline = 0.0  # REFUSING / LINGERING: when to give up waiting
        self.drained = 0  # LINGERING: bytes read and dropped
        self.refusal: str | None = None  # why the connection is being refused

    @property
    def authenticated(self) -> bool:
        return bool(self.authenticator.complete)

    @property
    def principal(self) -> str:
        return str(self.authenticator.principal)

    def fileno(self) -> int:
        return self.sock.fileno()

    def __repr__(self) -> str:
        return f"Connection({self.peer}, {self.state.value})"
