"""A TCP server for the wire protocol whose threads and memory are bounded whatever clients do.

**Shape** (Kafka's ``SocketServer`` and ``KafkaRequestHandlerPool``): one network thread per
listener (``processor``) accepts, reads frames without blocking and writes answers; complete
requests go to a fixed pool of request-handler threads (``num.io.threads``, Kafka's default 8).
A connection is muted from the moment its request is complete until its answer is written, so
each connection has at most one request held, and a handler thread is never tied to a peer: a
slow or silent peer costs a buffer, not a thread. The thread count is ``1 + num.io.threads + 1``
whatever the number of connections (it was one thread per connection before).

**Why two pools.** Handlers block. A broker's Kafka-protocol CreateTopics, DeleteTopics,
CreatePartitions and ElectLeaders wait (up to the request's timeout) until this broker's
metadata cache shows the outcome, and that only happens when an UpdateMetadata or LeaderAndIsr
from the controller is handled *here*. The controller APIs (ControlledShutdown, AlterIsr,
reassignments, ...) wait for the controller's event thread. With one pool, eight clients waiting
for metadata would leave no thread to apply the UpdateMetadata they wait for, and every one would
time out. Kafka separates its control plane for this reason (``control.plane.listener.name``,
handled by a single thread). Here the controller's requests share the listener, so the split is
by frame: private-protocol LeaderAndIsr, UpdateMetadata and StopReplica (recognised from the
envelope's leading ``{"api":"..."`` without parsing the body, as the channel manager writes it)
go to a one-thread control pool, everything else to the data pool. Control requests never wait
for another request, so the control thread always makes progress, and whatever fills the data
pool can only wait for things the control thread or the controller's event thread deliver. (A
controller's requests to its own broker do not use the socket at all: ``channel_manager``.)

Every request gets exactly one answer: the handler's response, or an error envelope —
INVALID_REQUEST for bad JSON, a bad envelope, an unknown API or a malformed body, and
UNKNOWN_SERVER_ERROR when the handler raises. The connection stays open after those. A handler
that cannot decide yet raises ``UnansweredRequestError``: the connection is closed unanswered, and
the controller, which resends until answered, sends the request again. A length
prefix of zero or above the limit is answered too, but then the connection is closed, because
the stream cannot be resynchronised; the server itself keeps serving.

A ``raw_handler`` shares the listener with another protocol: every frame with a zero byte among
its first four (a Kafka request always has one: its api_key's or api_version's high byte; no JSON
text holds a zero byte, ``is_raw_frame``) goes to it as bytes, and its answer goes back as one
frame; ``None`` closes the connection. Such a peer's bad length prefix closes the connection
without an answer. Every other frame is handled as above.

**Listeners.** A broker binds each of Kafka's ``listeners`` (``ListenerEndpoint``: a name, an
address, a TLS context for SSL and SASL_SSL, and the factory of its connections' authenticators),
each with its own network thread, as Kafka's ``SocketServer`` gives each listener its own
``Processor``; all of them feed the same request-handler pools. Each listener has its own
connection quotas and memory budget (its network thread alone touches them, so they need no
lock); Kafka shares ``max.connections`` and ``queued.max.request.bytes`` across its listeners.

Limits, quotas, idle expiry and running out of descriptors: ``processor`` and ``limits``; the
reasoning in ``docs/connection-layer.md``.
"""

from __future__ import annotations

import contextvars
import logging
import queue
import re
import socket
import ssl
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kafka_controller.domain.errors import ClusterAuthorizationError, UnansweredRequestError
from kafka_controller.domain.requests import Errors
from kafka_controller.transport import framing
from kafka_controller.transport.codec import (
    DEFAULT_APIS,
    LEADER_AND_ISR,
    STOP_REPLICA,
    UPDATE_METADATA,
    ApiRegistry,
)
from kafka_controller.transport.connection import (
    AUTHENTICATION_FAILED,
    Authenticator,
    Connection,
    PlaintextAuthenticator,
)
from kafka_controller.transport.errors import ProtocolError, TransportError
from kafka_controller.transport.limits import ConnectionQuotas, SocketSettings, resolve_overrides
from kafka_controller.transport.processor import AuthenticatorFactory, Processor

logger = logging.getLogger(__name__)

#: ``handler(api, decoded_request) -> response`` (the response is encoded by the API's codec).
Handler = Callable[[str, Any], Any]
#: ``raw_handler(payload) -> response payload``, or ``None`` to close the connection; must not raise.
RawHandler = Callable[[bytearray], bytes | None]
#: The first byte of every frame for ``raw_handler`` (a Kafka api_key's high byte); never JSON's.
RAW_FIRST_BYTE = 0x00


def is_raw_frame(payload: bytes | bytearray) -> bool:
    """Whether a frame goes to ``raw_handler``: it has a zero byte among its first four.

    JSON text never holds a zero byte (control characters must be escaped), so no private-protocol
    frame does; every Kafka request does, whatever its api key: the key's high byte for keys below
    256, and the api_version's high byte for every version below 256. So a Kafka client sending
    an api key this broker does not know (256 and above included) reaches the Kafka handler, which
    closes the connection as Kafka does, instead of getting a JSON answer it cannot read."""
    return 0 in payload[:4]


#: Kafka's control plane has one request-handler thread.
CONTROL_THREADS = 1
#: The private requests only a controller sends: they go to the control pool.
CONTROL_APIS = frozenset({LEADER_AND_ISR, UPDATE_METADATA, STOP_REPLICA})
_LEADING_API = re.compile(rb'\{\s*"api"\s*:\s*"([A-Za-z]{1,64})"')
#: Listen backlog (Kafka's ``socket.listen.backlog.size`` came later, in 3.2, with 50 by default).
BACKLOG = 128

_PEER: contextvars.ContextVar[str | None] = contextvars.ContextVar("transport_peer", default=None)
_CONNECTION: contextvars.ContextVar[Connection | None] = contextvars.ContextVar(
    "transport_connection", default=None
)


def current_peer() -> str | None:
    """``host:port`` of the peer whose request the calling thread is handling (None outside a
    request handler): handlers name who sent what they refuse without a change of signature."""
    return _PEER.get()


def current_connection() -> Connection | None:
    """The connection whose request the calling thread is handling: its ``principal`` and
    ``authenticated`` for whoever decides by them (None outside a request handler)."""
    return _CONNECTION.get()


def is_control_frame(payload: bytes | bytearray) -> bool:
    """Whether a private-protocol frame is a controller's LeaderAndIsr, UpdateMetadata or StopReplica
    (from its first bytes: ``encode_request`` writes ``api`` first)."""
    match = _LEADING_API.match(bytes(payload[:96]))
    return match is not None and match.group(1).decode() in CONTROL_APIS


def _plaintext(peer_certificate: bytes | None) -> Authenticator:
    return PlaintextAuthenticator()


@dataclass(frozen=True)
class ListenerEndpoint:
    """One listener to bind: Kafka's ``EndPoint`` with what its connections need. ``tls`` is the
    server context of an SSL or SASL_SSL listener; ``authenticator_factory(peer_certificate)``
    makes each connection's ``Authenticator`` (after the TLS handshake on a TLS listener)."""

    name: str
    host: str
    port: int
    tls: ssl.SSLContext | None = None
    authenticator_factory: AuthenticatorFactory = _plaintext


class RequestPool:
    """A fixed number of request-handler threads (Kafka's ``KafkaRequestHandlerPool``) on one queue."""

    def __init__(self, name: str, threads: int, work: Callable[[Connection, bytearray], None]) -> None:
        self._queue: queue.SimpleQueue[tuple[Connection, bytearray] | None] = queue.SimpleQueue()
        self._work = work
        self._threads = [
            threading.Thread(target=self._run, name=f"{name}-{i}", daemon=True) for i in range(threads)
        ]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def submit(self, conn: Connection, payload: bytearray) -> None:
        self._queue.put((conn, payload))

    def _run(self) -> None:
        while (item := self._queue.get()) is not None:
            try:
                self._work(*item)
            except Exception:  # _process answers everything itself; this keeps the thread alive
                logger.exception("request handler thread %s failed", threading.current_thread().name)

    def stop(self, timeout_s: float) -> None:
        for _ in self._threads:
            self._queue.put(None)
        for thread in self._threads:
            if thread.is_alive():
                thread.join(timeout_s)
            if thread.is_alive():
                logger.warning("%s still busy in its handler after stop()", thread.name)


class TransportServer:
    """``start()`` binds (port 0 picks a free port, then ``.port`` tells which) and serves.

    ``settings`` are Kafka's socket-server settings (``limits.SocketSettings``); without them,
    Kafka's defaults with ``max_frame_bytes`` as ``socket.request.max.bytes``.
    ``authenticator_factory`` makes each connection's ``Authenticator`` (PLAINTEXT by default).
    ``listeners``, when given, replace ``host``/``port``/``authenticator_factory``: every one is
    bound; ``port`` is then the first one's and ``ports`` maps each listener's name to its port."""

    def __init__(
        self,
        host: str,
        port: int,
        handler: Handler,
        *,
        max_frame_bytes: int = framing.DEFAULT_MAX_FRAME_BYTES,
        apis: ApiRegistry = DEFAULT_APIS,
        name: str = "transport-server",
        raw_handler: RawHandler | None = None,
        settings: SocketSettings | None = None,
        authenticator_factory: Callable[[], Authenticator] = PlaintextAuthenticator,
        listeners: Sequence[ListenerEndpoint] | None = None,
    ) -> None:
        if listeners is None:
            make = authenticator_factory
            listeners = (ListenerEndpoint("PLAINTEXT", host, port, None, lambda _cert: make()),)
        if not listeners:
            raise TransportError("a server needs at least one listener")
        self.listeners: tuple[ListenerEndpoint, ...] = tuple(listeners)
        self.host = self.listeners[0].host
        self.port = self.listeners[0].port
        self.ports: dict[str, int] = {}
        self._handler = handler
        self.settings = settings or SocketSettings(socket_request_max_bytes=max_frame_bytes)
        self._apis = apis
        self._name = name
        self._raw_handler = raw_handler
        self._processors: dict[str, Processor] = {}
        self._data = RequestPool(f"{name}-io", self.settings.num_io_threads, self._process)
        self._control = RequestPool(f"{name}-control-io", CONTROL_THREADS, self._process)

    def start(self) -> TransportServer:
        """Bind every listener (all or none: one that cannot bind closes the others) and serve."""
        overrides = resolve_overrides(self.settings.max_connections_per_ip_overrides)
        bound: list[tuple[ListenerEndpoint, socket.socket]] = []
        for endpoint in self.listeners:
            try:
                bound.append((endpoint, _bind(endpoint)))
            except TransportError:
                for _, sock in bound:
                    sock.close()
                raise
        for endpoint, sock in bound:
            port = sock.getsockname()[1]
            self.ports[endpoint.name] = port
            self._processors[endpoint.name] = Processor(
                sock,
                self.settings,
                ConnectionQuotas(self.settings, overrides),
                self._submit,
                name=self._name,
                raw_capable=self._raw_handler is not None,
                authenticator_factory=endpoint.authenticator_factory,
                tls=endpoint.tls,
                listener_name=endpoint.name,
            )
        self.port = self.ports[self.listeners[0].name]
        self._data.start()
        self._control.start()
        for endpoint in self.listeners:
            port = self.ports[endpoint.name]
            self._processors[endpoint.name].start(f"{self._name}-network-{port}")
            logger.info("%s listening on %s:%d (%s)", self._name, endpoint.host, port, endpoint.name)
        return self

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop accepting, close every connection, and wait (bounded) for the threads."""
        for processor in self._processors.values():
            processor.stop(timeout_s)
        self._control.stop(timeout_s)
        self._data.stop(timeout_s)

    def __enter__(self) -> TransportServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def connection_count(self) -> int:
        return sum(p.connection_count for p in self._processors.values())

    @property
    def connections_by_listener(self) -> dict[str, int]:
        """Open connections per listener name."""
        return {name: p.connection_count for name, p in self._processors.items()}

    @property
    def waiting_for_memory(self) -> int:
        """Connections whose next request waits for room in ``queued.max.request.bytes``."""
        return sum(p.waiting_for_memory for p in self._processors.values())

    # -- requests (network thread -> pools -> network thread) ---------------------------------------
    def _submit(self, conn: Connection, payload: bytearray) -> None:
        control = payload[0] == ord("{") and conn.authenticated and is_control_frame(payload)
        (self._control if control else self._data).submit(conn, payload)

    def _process(self, conn: Connection, payload: bytearray) -> None:
        """On a handler thread: the one answer to ``payload`` (None closes the connection)."""
        peer = _PEER.set(conn.peer)
        connection = _CONNECTION.set(conn)
        answer: bytes | None = None
        try:
            if not conn.authenticated:
                answer = conn.authenticator.receive(payload)
                if getattr(conn.authenticator, "failed", False):
                    # Kafka's SaslServerAuthenticator: after connection.failed.authentication.delay.ms
                    # the refusal (if any) is sent, then the connection closed (the network thread
                    # reads this once the answer is handed over)
                    conn.refusal = AUTHENTICATION_FAILED
            elif self._raw_handler is not None and is_raw_frame(payload):
                answer = self._raw_handler(payload)
            else:
                answer = self._answer(payload)
        except UnansweredRequestError as e:  # the handler logged it; the sender will try again
            logger.debug("%s: closing the connection from %s unanswered: %s", self._name, conn.peer, e)
        except Exception:
            logger.exception("%s: closing the connection from %s: its request failed", self._name, conn.peer)
        finally:
            _CONNECTION.reset(connection)
            _PEER.reset(peer)
            processor = self._processors.get(conn.listener)
            if processor is not None:
                processor.respond(conn, answer)

    def _answer(self, payload: bytearray) -> bytes:
        try:
            api, cid, body = framing.decode_request(payload)
        except ProtocolError as e:
            return self._refuse(e.cid, e)
        try:
            request = self._apis.decode_request(api, body)
        except ProtocolError as e:
            return self._refuse(cid, e)
        try:
            response = self._handler(api, request)
            return framing.encode_response(cid, self._apis.get(api).encode_response(response))
        except ClusterAuthorizationError as e:  # the handler's authorizer refused the caller
            return framing.encode_error(cid, Errors.CLUSTER_AUTHORIZATION_FAILED, str(e))
        except UnansweredRequestError:
            raise
        except Exception as e:
            logger.exception("%s: handler failed on %s (cid %d)", self._name, api, cid)
            return framing.encode_error(cid, Errors.UNKNOWN_SERVER_ERROR, f"{type(e).__name__}: {e}")

    def _refuse(self, cid: int, error: ProtocolError) -> bytes:
        logger.warning("%s: refused a request from %s: %s", self._name, current_peer(), error)
        return framing.encode_error(cid, Errors.INVALID_REQUEST, str(error))


def _bind(endpoint: ListenerEndpoint) -> socket.socket:
    family = socket.AF_INET6 if ":" in endpoint.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((endpoint.host, endpoint.port))
        sock.listen(BACKLOG)
    except OSError as e:
        sock.close()
        where = f"{endpoint.host}:{endpoint.port}"
        raise TransportError(f"cannot listen on {where} ({endpoint.name}): {e.strerror or e}") from None
    return sock


__all__ = [
    "RAW_FIRST_BYTE",
    "Handler",
    "ListenerEndpoint",
    "RawHandler",
    "RequestPool",
    "TransportServer",
    "current_connection",
    "current_peer",
    "is_control_frame",
]
