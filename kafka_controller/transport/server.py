"""A threaded TCP server for the wire protocol: one thread per connection, one request at a time.

The handler runs on the connection's thread and may block (a broker applying a LeaderAndIsr does).
On the **controller** side a handler must not touch controller state: it puts an event on the
controller's queue and, if the API needs an answer, waits for that event's callback (house rule 5).

Every request gets exactly one answer: the handler's response, or an error envelope —
INVALID_REQUEST for bad JSON, a bad envelope, an unknown API or a malformed body, and
UNKNOWN_SERVER_ERROR when the handler raises. The connection stays open after those. A length
prefix of zero or above ``max_frame_bytes`` is answered too, but then the connection is closed,
because the stream cannot be resynchronised; the server itself keeps serving.

A ``raw_handler`` shares the listener with another protocol: every frame whose payload starts with
a zero byte (a Kafka request does: the high byte of its api_key; a private-protocol frame starts
with ``{``, and no JSON text starts with 0x00) goes to it as bytes, and its answer goes back as one
frame; ``None`` closes the connection. Such a peer's bad length prefix closes the connection
without an answer. Every other frame is handled as above.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from kafka_controller.domain.requests import Errors
from kafka_controller.transport import framing
from kafka_controller.transport.codec import DEFAULT_APIS, ApiRegistry
from kafka_controller.transport.errors import ProtocolError, TransportError

logger = logging.getLogger(__name__)

#: ``handler(api, decoded_request) -> response`` (the response is encoded by the API's codec).
Handler = Callable[[str, Any], Any]
#: ``raw_handler(payload) -> response payload``, or ``None`` to close the connection; must not raise.
RawHandler = Callable[[bytearray], bytes | None]
#: The first byte of every frame for ``raw_handler`` (a Kafka api_key's high byte); never JSON's.
RAW_FIRST_BYTE = 0x00

_PEER: contextvars.ContextVar[str | None] = contextvars.ContextVar("transport_peer", default=None)


def current_peer() -> str | None:
    """``host:port`` of the peer whose request the calling thread is handling (None outside a
    connection's thread): handlers name who sent what they refuse without a change of signature."""
    return _PEER.get()


class TransportServer:
    """``start()`` binds (port 0 picks a free port, then ``.port`` tells which) and serves."""

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
    ) -> None:
        self.host = host
        self.port = port
        self._handler = handler
        self._max_frame_bytes = max_frame_bytes
        self._apis = apis
        self._name = name
        self._raw_handler = raw_handler
        self._lock = threading.Lock()
        self._listener: socket.socket | None = None
        self._connections: dict[socket.socket, threading.Thread] = {}
        self._accept_thread: threading.Thread | None = None
        self._stopping = threading.Event()

    def start(self) -> TransportServer:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            listener.bind((self.host, self.port))
            listener.listen(128)
        except OSError as e:
            listener.close()
            raise TransportError(f"cannot listen on {self.host}:{self.port}: {e.strerror or e}") from None
        self._listener = listener
        self.port = listener.getsockname()[1]
        self._accept_thread = threading.Thread(
            target=self._accept_loop, name=f"{self._name}-accept-{self.port}", daemon=True
        )
        self._accept_thread.start()
        logger.info("%s listening on %s:%d", self._name, self.host, self.port)
        return self

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop accepting, close every connection, and wait (bounded) for their threads."""
        self._stopping.set()
        if self._listener is not None:
            with contextlib.suppress(OSError):
                self._listener.shutdown(socket.SHUT_RDWR)
            self._listener.close()
        if self._accept_thread is not None:
            self._accept_thread.join(timeout_s)
        with self._lock:
            connections = list(self._connections.items())
        for conn, _ in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        for _, thread in connections:
            thread.join(timeout_s)
            if thread.is_alive():
                logger.warning("%s: %s still busy in its handler after stop()", self._name, thread.name)

    def __enter__(self) -> TransportServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def connection_count(self) -> int:
        with self._lock:
            return len(self._connections)

    def _accept_loop(self) -> None:
        assert self._listener is not None
        while not self._stopping.is_set():
            try:
                conn, addr = self._listener.accept()
            except OSError:
                if self._stopping.is_set():
                    return
                continue
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            thread = threading.Thread(
                target=self._serve, args=(conn,), name=f"{self._name}-conn-{addr[0]}:{addr[1]}", daemon=True
            )
            with self._lock:
                if self._stopping.is_set():
                    conn.close()
                    return
                self._connections[conn] = thread
            thread.start()

    def _serve(self, conn: socket.socket) -> None:
        with contextlib.suppress(OSError):
            host, port = conn.getpeername()[:2]
            _PEER.set(f"{host}:{port}")
        try:
            while not self._stopping.is_set():
                try:
                    payload = framing.read_frame(conn, self._max_frame_bytes)
                except framing.FrameTooLargeError as e:
                    if not self._raw_peer(conn):  # a Kafka client just sees the connection close
                        framing.write_frame(conn, framing.encode_error(-1, Errors.INVALID_REQUEST, str(e)))
                    _linger_close(conn)
                    return
                if payload is None:
                    return
                if self._raw_handler is not None and payload[0] == RAW_FIRST_BYTE:
                    answer = self._raw_handler(payload)
                    if answer is None:
                        return
                    framing.write_frame(conn, answer)
                    continue
                framing.write_frame(conn, self._answer(payload))
        except (OSError, TransportError) as e:
            if not self._stopping.is_set():
                logger.debug("%s: connection ended: %s", self._name, e)
        finally:
            with self._lock:
                self._connections.pop(conn, None)
            conn.close()

    def _raw_peer(self, conn: socket.socket) -> bool:
        """After a bad length prefix: whether the frame's first byte (peeked, waited for briefly)
        says it is for ``raw_handler``."""
        if self._raw_handler is None:
            return False
        try:
            conn.settimeout(_PEEK_SECONDS)
            first = conn.recv(1, socket.MSG_PEEK)
        except OSError:
            return False
        finally:
            with contextlib.suppress(OSError):
                conn.settimeout(None)
        return len(first) == 1 and first[0] == RAW_FIRST_BYTE

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
        except Exception as e:
            logger.exception("%s: handler failed on %s (cid %d)", self._name, api, cid)
            return framing.encode_error(cid, Errors.UNKNOWN_SERVER_ERROR, f"{type(e).__name__}: {e}")

    def _refuse(self, cid: int, error: ProtocolError) -> bytes:
        logger.warning("%s: refused a request: %s", self._name, error)
        return framing.encode_error(cid, Errors.INVALID_REQUEST, str(error))


#: How long a bad length prefix waits for the frame's first byte, which tells the protocol.
_PEEK_SECONDS = 0.5
#: How long, and how many unread bytes, a refused connection is drained before it is closed.
_LINGER_SECONDS = 1.0
_LINGER_BYTES = 16 << 20


def _linger_close(conn: socket.socket) -> None:
    """Half-close after a refusal and drain what the peer still sends before closing.

    Closing a socket with unread input makes the kernel send a reset, which can reach the peer
    before it has read the refusal: it would see "connection reset" instead of the reason. The
    drain is bounded in time and bytes, so a peer that keeps streaming cannot hold the thread."""
    try:
        conn.shutdown(socket.SHUT_WR)
        conn.settimeout(_LINGER_SECONDS)
        deadline = time.monotonic() + _LINGER_SECONDS
        drained = 0
        while drained < _LINGER_BYTES and time.monotonic() < deadline:
            chunk = conn.recv(65536)
            if not chunk:
                break
            drained += len(chunk)
    except OSError:
        pass
