"""A blocking client for the wire protocol: one connection, one request in flight, reconnect on demand.

``request`` connects if it has no connection, sends, and waits for the answer whose ``cid`` matches.
Any failure closes the connection (a half-read stream cannot be trusted), so the next ``request``
reconnects; the client itself never retries, because only the caller knows whether a request is
safe to repeat (the channel manager's control requests are). ``timeout_s`` bounds connecting and
each wait for bytes. ``close()`` is final and may be called from another thread to abort a request
in flight. A connection the server closed while it was unused (``connections.max.idle.ms``) is
noticed before sending and replaced, so the server's idle limit never fails a request.
``ssl_context`` makes every connection TLS (a broker's SSL or SASL_SSL inter-broker listener): the
handshake is part of connecting, bounded by ``timeout_s``, and the host name verified against the
certificate when the context checks host names (``ssl.endpoint.identification.algorithm=https``).
``authenticate(sock)``, when given, runs on every new connection (after TLS) before its first
request: a SASL listener's client side (``kafka_controller.security``); it raises
``TransportError`` to refuse the connection.
"""

from __future__ import annotations

import contextlib
import select
import socket
import ssl
import threading
from collections.abc import Callable
from typing import Any

from kafka_controller.domain.errors import InvalidArgumentError, KafkaControllerError
from kafka_controller.transport import framing
from kafka_controller.transport.codec import DEFAULT_APIS, ApiRegistry
from kafka_controller.transport.errors import (
    ProtocolError,
    RemoteError,
    TransportConnectionError,
    TransportError,
    TransportTimeoutError,
)


class TransportClient:
    def __init__(
        self,
        host: str,
        port: int,
        *,
        timeout_s: float = 30.0,
        max_frame_bytes: int = framing.DEFAULT_MAX_FRAME_BYTES,
        apis: ApiRegistry = DEFAULT_APIS,
        ssl_context: ssl.SSLContext | None = None,
        authenticate: Callable[[socket.socket], None] | None = None,
    ) -> None:
        self.ssl_context = ssl_context
        self._authenticate = authenticate
        self.host = host
        self.port = port
        self.timeout_s = timeout_s
        self._max_frame_bytes = max_frame_bytes
        self._apis = apis
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._next_cid = 0
        self._closed = False
        self.connects = 0  # how many connections were opened (reconnects are visible in tests)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def request(self, api: str, body: Any) -> Any:
        """Send ``body`` (a domain value for typed APIs) and return the decoded response body.

        Raises ``TransportTimeoutError`` / ``TransportConnectionError`` (retryable),
        ``RemoteError`` (the peer answered with an error), or ``ProtocolError``.
        """
        codec = self._apis.get(api)
        with self._lock:
            cid = self._next_cid
            self._next_cid += 1
            try:
                payload = framing.encode_request(api, cid, codec.encode_request(body))
            except KafkaControllerError:
                raise
            except Exception as e:
                raise InvalidArgumentError(f"cannot encode {api} request: {type(e).__name__}: {e}") from None
            sock = self._connect()
            try:
                framing.write_frame(sock, payload)
                answer = framing.read_frame(sock, self._max_frame_bytes)
                if answer is None:
                    raise TransportConnectionError(f"{self.address} closed the connection before answering")
                got_cid, response, error = framing.decode_response(answer)
                if got_cid != cid:
                    raise ProtocolError(f"{self.address} answered cid {got_cid} to request cid {cid}")
            except TimeoutError:
                self._drop(sock)
                raise TransportTimeoutError(
                    f"no answer to {api} from {self.address} within {self.timeout_s}s"
                ) from None
            except OSError as e:
                self._drop(sock)
                raise TransportConnectionError(f"{api} to {self.address} failed: {e.strerror or e}") from None
            except (TransportError, ProtocolError):
                self._drop(sock)
                raise
        if error is not None:
            raise RemoteError(*error)
        return self._apis.decode_response(api, response)

    def _connect(self) -> socket.socket:
        if self._closed:
            raise TransportConnectionError(f"the client for {self.address} is closed")
        if self._sock is not None:
            if not _closed_by_peer(self._sock):
                return self._sock
            self._drop(self._sock)  # e.g. the server's connections.max.idle.ms: open a new one
        try:
            sock = socket.create_connection((self.host, self.port), timeout=self.timeout_s)
        except TimeoutError:
            raise TransportTimeoutError(
                f"connecting to {self.address} timed out after {self.timeout_s}s"
            ) from None
        except ConnectionRefusedError:
            raise TransportConnectionError(f"connection to {self.address} refused") from None
        except OSError as e:
            raise TransportConnectionError(f"cannot connect to {self.address}: {e.strerror or e}") from None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.ssl_context is not None:
            sock = self._wrap(sock)
        if self._authenticate is not None:
            try:
                self._authenticate(sock)
            except TimeoutError:
                sock.close()
                raise TransportTimeoutError(
                    f"authenticating to {self.address} timed out after {self.timeout_s}s"
                ) from None
            except OSError as e:
                sock.close()
                raise TransportConnectionError(
                    f"authenticating to {self.address} failed: {e.strerror or e}"
                ) from None
            except BaseException:
                sock.close()
                raise
        if self._closed:  # close() ran while we were connecting
            sock.close()
            raise TransportConnectionError(f"the client for {self.address} is closed")
        self._sock = sock
        self.connects += 1
        return sock

    def _wrap(self, sock: socket.socket) -> socket.socket:
        context = self.ssl_context
        assert context is not None
        try:
            return context.wrap_socket(sock, server_hostname=self.host if context.check_hostname else None)
        except TimeoutError:
            sock.close()
            raise TransportTimeoutError(
                f"TLS handshake with {self.address} timed out after {self.timeout_s}s"
            ) from None
        except (ssl.SSLError, ssl.CertificateError) as e:
            sock.close()
            raise TransportConnectionError(f"TLS handshake with {self.address} failed: {e}") from None
        except OSError as e:
            sock.close()
            raise TransportConnectionError(
                f"TLS handshake with {self.address} failed: {e.strerror or e}"
            ) from None

    def _drop(self, sock: socket.socket) -> None:
        if self._sock is sock:
            self._sock = None
        with contextlib.suppress(OSError):
            sock.close()

    def close(self) -> None:
        """Close for good: a request in flight on another thread, and any later one, fail with
        ``TransportConnectionError``."""
        self._closed = True
        sock = self._sock
        self._sock = None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()

    def __enter__(self) -> TransportClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _closed_by_peer(sock: socket.socket) -> bool:
    """Whether a connection between requests can no longer be used: the server closed it (its
    ``connections.max.idle.ms``) or sent something unasked. Nothing is unsolicited in this protocol,
    so readable bytes between requests are an end of stream, except a TLS session ticket, which a
    non-blocking read consumes without data."""
    poller = select.poll()  # not select.select: descriptors above 1024 are common in a busy process
    try:
        poller.register(sock, select.POLLIN)
        if not poller.poll(0):
            return False
        timeout = sock.gettimeout()
        sock.setblocking(False)
        try:
            sock.recv(1) if isinstance(sock, ssl.SSLSocket) else sock.recv(1, socket.MSG_PEEK)
        finally:
            sock.settimeout(timeout)
    except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
        return False
    except (OSError, ValueError):
        return True
    return True  # an end of stream, or bytes nobody asked for: either way not to be trusted
