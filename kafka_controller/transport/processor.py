"""The listener's network thread: Kafka's ``Acceptor`` and ``Processor`` in one selector loop.

It accepts, reads frames without blocking into each connection's ``FrameReader``, hands every
complete request to the server's request-handler pools (``submit``), and writes the answers the
handlers give back (``respond``, from any thread). It alone owns the connections, the memory
pool and the connection quotas, so none of those is locked. It never runs a handler, so a slow
handler or a slow peer delays no one else.

What the thread decides on its own, each named with the peer in one log line:

* a length prefix outside ``1..socket.request.max.bytes`` (``sasl.server.max.receive.size``
  before authentication) is refused: a private-protocol peer gets an INVALID_REQUEST envelope, a
  Kafka peer (a zero byte among the payload's first four) sees the connection close, as Kafka's
  ``InvalidReceive``;
* a connection that has sent nothing, stopped mid-frame or stopped reading its answer for
  ``connections.max.idle.ms`` is closed (Kafka's ``Selector`` idle expiry); time a request spends
  with a handler or waiting for memory is the server's, not the peer's, and does not count;
* a connection whose authentication failed gets its answer (or its close) only after
  ``connection.failed.authentication.delay.ms``, and is then closed (Kafka's delayed close);
* a connection over its address's ``max.connections.per.ip`` (or override) is closed at once;
* at ``max.connections`` the listener stops accepting until a connection closes;
* a TLS listener's handshake that fails (a plaintext client, an untrusted or missing client
  certificate where one is required) is logged once with the peer and the connection closed;
* out of file descriptors (``accept`` failing with EMFILE/ENFILE), it sheds the waiting peer with
  a reserved descriptor (so that peer is told, and named), pauses accepting for
  ``ACCEPT_BACKOFF_S`` instead of spinning on a listener that stays readable, and logs one
  warning per ``FD_LOG_INTERVAL_S`` with how many it shed.
"""

from __future__ import annotations

import collections
import contextlib
import errno
import logging
import os
import selectors
import socket
import ssl
import struct
import threading
import time
from collections.abc import Callable

from kafka_controller.domain.requests import Errors
from kafka_controller.transport import framing
from kafka_controller.transport.connection import (
    AUTHENTICATION_FAILED,
    Authenticator,
    Connection,
    PendingAuthenticator,
    State,
)
from kafka_controller.transport.limits import (
    ConnectionQuotas,
    MemoryPool,
    SocketSettings,
    TooManyConnectionsError,
)
from kafka_controller.transport.tls import TlsChannel

logger = logging.getLogger("kafka_controller.transport.server")

#: How long a bad length prefix waits for the frame's first byte, which tells the protocol.
PEEK_SECONDS = 0.5
#: How long, and how many unread bytes, a refused connection is drained before it is closed.
LINGER_SECONDS = 1.0
LINGER_BYTES = 16 << 20
#: Out of descriptors: how long accepting pauses, and how often that is logged at most.
ACCEPT_BACKOFF_S = 0.5
FD_LOG_INTERVAL_S = 10.0
#: How often a listener stopped at ``max.connections`` says so at most.
FULL_LOG_INTERVAL_S = 10.0
#: The longest the loop sleeps without looking at its timers.
MAX_POLL_S = 1.0
#: Reads (of up to 1 MiB) from one connection per wake-up before the loop serves the others.
READS_PER_EVENT = 4
#: Connections accepted per wake-up before the loop serves the others.
ACCEPT_BATCH = 64
_FD_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
_HEADER = struct.Struct(">I")
_WAKE = object()
_LISTEN = object()

#: ``submit(connection, payload)``: a complete request for the handler pools.
Submit = Callable[[Connection, bytearray], None]
#: ``authenticator_factory(peer_certificate)``: a connection's ``Authenticator``, made when it is
#: accepted (PLAINTEXT, SASL_PLAINTEXT: no certificate) or once its TLS handshake is complete
#: (the client's certificate, DER, when it presented one that verified).
AuthenticatorFactory = Callable[[bytes | None], Authenticator]


class Processor:
    def __init__(
        self,
        listener: socket.socket,
        settings: SocketSettings,
        quotas: ConnectionQuotas,
        submit: Submit,
        *,
        name: str,
        raw_capable: bool,
        authenticator_factory: AuthenticatorFactory,
        tls: ssl.SSLContext | None = None,
        listener_name: str = "",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._listener = listener
        self._settings = settings
        self._quotas = quotas
        self._pool = MemoryPool(settings.queued_max_request_bytes)
        self._submit = submit
        self._name = name
        self._raw_capable = raw_capable
        self._new_authenticator = authenticator_factory
        self._tls = tls
        self._listener_name = listener_name
        self._ready: set[Connection] = set()  # READING TLS connections with bytes already decrypted
        self._clock = clock
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        #: Answers from handler threads: bytes to frame, a framed remainder (memoryview), or None.
        self._responses: collections.deque[tuple[Connection, bytes | memoryview | None]] = collections.deque()
        #: Refused authentications, answered after ``connection.failed.authentication.delay.ms``:
        #: handed over by handler threads, then held (due time, connection, answer) by this thread.
        self._delayed_in: collections.deque[tuple[Connection, bytes | None]] = collections.deque()
        self._delayed: list[tuple[float, Connection, bytes | None]] = []
        self._conns: set[Connection] = set()
        self._lru: dict[Connection, None] = {}  # READING/WRITING connections, least recently active first
        self._timed: set[Connection] = set()  # REFUSING/LINGERING connections
        self._memory_waiters: collections.deque[Connection] = collections.deque()
        self._events: dict[Connection, int] = {}
        self._listening = False
        self._accept_resume_at = 0.0
        self._fd_shed = 0
        self._fd_last_peer: str | None = None
        self._fd_next_log = 0.0
        self._full_next_log = 0.0
        self._reserve_fd: int | None = _open_reserve()
        self.waiting_for_memory = 0  # connections muted until the memory pool has room
        self._stopping = False
        self._thread: threading.Thread | None = None

    # -- life cycle ---------------------------------------------------------------------------------
    def start(self, thread_name: str) -> None:
        self._listener.setblocking(False)
        self._selector.register(self._wake_r, selectors.EVENT_READ, _WAKE)
        self._listen(True)
        self._thread = threading.Thread(target=self._run, name=thread_name, daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float) -> None:
        self._stopping = True
        self._wake()
        if self._thread is not None:
            self._thread.join(timeout_s)

    @property
    def connection_count(self) -> int:
        return self._quotas.total

    def respond(self, conn: Connection, answer: bytes | None) -> None:
        """From a handler thread: write ``answer`` as one frame (None closes the connection).

        On a plain socket the handler thread writes what the socket takes at once itself (never
        waiting: the socket is non-blocking) and the network thread writes the rest: the answer
        reaches the peer without waiting for the network thread to be scheduled, which on a busy
        machine was most of a small request's round trip. The network thread does not touch a
        connection while its request is in flight, so the two never write at once."""
        if (
            conn.refusal == AUTHENTICATION_FAILED
            and self._settings.connection_failed_authentication_delay_ms > 0
        ):
            self._delayed_in.append((conn, answer))  # the network thread answers it later
        elif answer is None or conn.tls is not None or self._stopping:
            self._responses.append((conn, answer))
        else:
            frame = memoryview(_HEADER.pack(len(answer)) + answer)
            try:
                sent = conn.sock.send(frame)
            except OSError:  # full (BlockingIOError) or broken: the network thread finds out
                sent = 0
            self._responses.append((conn, frame[sent:]))
        self._wake()

    def _wake(self) -> None:
        with contextlib.suppress(OSError):  # full (a wake-up is pending anyway) or closed (stopped)
            self._wake_w.send(b"\0")

    # -- the loop -----------------------------------------------------------------------------------
    def _run(self) -> None:
        try:
            while not self._stopping:
                events = self._selector.select(self._poll_timeout(self._clock()))
                now = self._clock()
                for key, mask in events:
                    if key.data is _LISTEN:
                        self._accept(now)
                    elif key.data is _WAKE:
                        with contextlib.suppress(OSError):
                            while self._wake_r.recv(4096):
                                pass
                    else:
                        self._on_event(key.data, mask, now)
                self._drain_responses(now)
                self._serve_buffered(now)
                self._expire(now)
        except Exception:
            logger.exception("%s: the network thread failed", self._name)
        finally:
            self._shutdown()

    def _on_event(self, conn: Connection, mask: int, now: float) -> None:
        try:
            if conn.state is State.HANDSHAKING:
                self._handshake(conn, now)
                return
            if mask & selectors.EVENT_READ:
                if conn.state is State.READING:
                    self._read(conn, now)
                elif conn.state is State.REFUSING:
                    # a Kafka request has a zero byte among its first four (server.is_raw_frame)
                    first = conn.sock.recv(4, socket.MSG_PEEK)
                    self._finish_refusal(conn, 0 in first, now)
                elif conn.state is State.LINGERING:
                    self._drain(conn)
            if mask & selectors.EVENT_WRITE and conn.state is State.WRITING:
                self._write(conn, now)
        except BlockingIOError:
            pass
        except OSError as e:
            self._close(conn, f"connection ended: {e.strerror or e}", logging.DEBUG)

    def _serve_buffered(self, now: float) -> None:
        """Read what TLS already decrypted: the selector only sees the socket's bytes."""
        ready, self._ready = self._ready, set()
        for conn in ready:
            if conn.state is State.READING:
                self._on_event(conn, selectors.EVENT_READ, now)

    # -- TLS --------------------------------------------------------------------------------------------
    def _handshake(self, conn: Connection, now: float) -> None:
        tls = conn.tls
        assert tls is not None
        try:
            done = tls.handshake()
        except ssl.SSLError as e:  # not TLS, or a certificate refused: worth a warning
            reason = getattr(e, "reason", None) or str(e)
            listener = self._listener_name or "the listener"
            self._close(conn, f"TLS handshake failed on {listener}: {reason}", logging.WARNING)
            return
        except ConnectionError as e:  # the peer left (a port probe): as any other peer that leaves
            self._close(conn, f"the peer left during the TLS handshake: {e}", logging.INFO)
            return
        self._touch(conn, now)
        if not done:
            self._interest(conn, selectors.EVENT_READ | (selectors.EVENT_WRITE if tls.wants_write else 0))
            return
        try:
            conn.authenticator = self._new_authenticator(tls.peer_certificate())
        except Exception as e:  # e.g. no ssl.principal.mapping.rules rule matches the subject
            self._close(conn, f"authentication failed: {e}", logging.WARNING)
            return
        self._set_state(conn, State.READING, selectors.EVENT_READ)

    def _poll_timeout(self, now: float) -> float:
        if self._ready:
            return 0.0
        deadlines = [now + MAX_POLL_S]
        idle_s = self._settings.connections_max_idle_ms / 1000.0
        if self._lru and idle_s >= 0:
            deadlines.append(next(iter(self._lru)).last_active + idle_s)
        deadlines.extend(c.deadline for c in self._timed)
        deadlines.extend(due for due, _, _ in self._delayed)
        if not self._listening and self._accept_resume_at > now:
            deadlines.append(self._accept_resume_at)
        return max(0.0, min(deadlines) - now)

    # -- accepting -----------------------------------------------------------------------------------
    def _listen(self, on: bool) -> None:
        if on and not self._listening:
            self._selector.register(self._listener, selectors.EVENT_READ, _LISTEN)
        elif not on and self._listening:
            self._selector.unregister(self._listener)
        self._listening = on

    def _maybe_listen(self, now: float) -> None:
        idle = not self._listening and not self._stopping
        if idle and self._quotas.slot_available() and now >= self._accept_resume_at:
            self._listen(True)

    def _accept(self, now: float) -> None:
        for _ in range(ACCEPT_BATCH):
            if not self._quotas.slot_available():
                self._listen(False)
                if now >= self._full_next_log:
                    self._full_next_log = now + FULL_LOG_INTERVAL_S
                    logger.warning(
                        "%s: %d connections reach max.connections=%d: not accepting until one closes "
                        "(new peers wait in the listen backlog)",
                        self._name,
                        self._quotas.total,
                        self._quotas.max_connections,
                    )
                return
            try:
                sock, address = self._listener.accept()
            except BlockingIOError:
                return
            except OSError as e:
                if e.errno in _FD_ERRNOS:
                    self._out_of_descriptors(e, now)
                    return
                continue  # e.g. ECONNABORTED: that peer is gone, the next may be there
            self._admit(sock, address, now)

    def _admit(self, sock: socket.socket, address: tuple[str, int], now: float) -> None:
        peer = f"{address[0]}:{address[1]}"
        ip = str(address[0])
        try:
            self._quotas.inc(ip)
        except TooManyConnectionsError as e:
            self._quotas.dec(ip)
            sock.close()
            why = "%s: refused the connection from %s: %s (max.connections.per.ip)"
            logger.info(why, self._name, peer, e)
            return
        try:
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            where = (address[0], address[1])
            if self._tls is None:
                conn = Connection(sock, where, self._new_authenticator(None), now, self._listener_name)
            else:
                channel = TlsChannel(sock, self._tls)
                conn = Connection(channel, where, PendingAuthenticator(), now, self._listener_name)
                conn.state = State.HANDSHAKING
        except OSError as e:
            self._quotas.dec(ip)
            sock.close()
            logger.debug("%s: connection from %s ended at once: %s", self._name, peer, e)
            return
        self._conns.add(conn)
        self._lru[conn] = None
        self._interest(conn, selectors.EVENT_READ)

    def _out_of_descriptors(self, error: OSError, now: float) -> None:
        self._listen(False)
        self._accept_resume_at = now + ACCEPT_BACKOFF_S
        peer = self._shed_one()
        if peer == "":
            return  # nobody was waiting (accept fails on descriptors before it looks): no one refused yet
        if peer is not None:
            self._fd_shed += 1
            self._fd_last_peer = peer
        if now >= self._fd_next_log:
            self._fd_next_log = now + FD_LOG_INTERVAL_S
            latest = f", the latest from {self._fd_last_peer}" if self._fd_last_peer else ""
            logger.warning(
                "%s: out of file descriptors (%s): closed %d connection(s) at once since the last "
                "report%s; accepting pauses %.1fs at a time while this lasts",
                self._name,
                errno.errorcode.get(error.errno or 0, error.strerror),
                self._fd_shed,
                latest,
                ACCEPT_BACKOFF_S,
            )
            self._fd_shed = 0
            self._fd_last_peer = None

    def _shed_one(self) -> str | None:
        """Accept one waiting peer with the reserved descriptor and close it at once: its address,
        "" when nobody was waiting, None when it could not be accepted (no spare descriptor)."""
        if self._reserve_fd is None:
            self._reserve_fd = _open_reserve()
            return None
        os.close(self._reserve_fd)
        self._reserve_fd = None
        try:
            sock, address = self._listener.accept()
        except BlockingIOError:
            self._reserve_fd = _open_reserve()
            return ""
        except OSError:
            self._reserve_fd = _open_reserve()
            return None
        sock.close()  # first: the reserve takes the descriptor back
        self._reserve_fd = _open_reserve()
        return f"{address[0]}:{address[1]}"

    # -- reading -------------------------------------------------------------------------------------
    def _read(self, conn: Connection, now: float) -> None:
        reader = conn.reader
        if reader.length < 0:
            header = reader.read_header(conn.sock)
            if header is None:
                self._close(conn, "closed by the peer", logging.DEBUG)
                return
            self._touch(conn, now)
            if not header or not self._admit_length(conn, now):
                return
        for _ in range(READS_PER_EVENT):  # a big frame in a few wake-ups, others served between
            done = reader.read_body(conn.sock)
            if done is None:
                got = f"{reader.received} of {reader.length + 4} bytes"
                self._close(conn, f"closed by the peer after {got}", logging.DEBUG)
                return
            self._touch(conn, now)
            if done:
                break
        if done:
            self._set_state(conn, State.IN_FLIGHT, 0)
            self._submit(conn, reader.take())
        elif conn.tls is not None and conn.tls.buffered:
            self._ready.add(conn)

    def _admit_length(self, conn: Connection, now: float) -> bool:
        """After a length prefix: refuse it, wait for memory, or go on reading (True)."""
        length = conn.reader.length
        if conn.authenticated:
            limit, setting = self._settings.socket_request_max_bytes, "socket.request.max.bytes"
        else:
            limit, setting = self._settings.sasl_server_max_receive_size, "sasl.server.max.receive.size"
        try:
            framing.check_length(length, limit, setting)
        except framing.FrameTooLargeError as e:
            self._refuse(conn, str(e), now)
            return False
        if not self._pool.try_reserve(length):
            self._set_state(conn, State.WAITING_MEMORY, 0)
            self._memory_waiters.append(conn)
            self.waiting_for_memory += 1
            return False
        conn.reserved = length
        return True

    def _refuse(self, conn: Connection, reason: str, now: float) -> None:
        logger.warning("%s: refused a frame from %s: %s", self._name, conn.peer, reason)
        conn.refusal = reason
        if self._raw_capable:  # which protocol? the frame's first byte says, if it comes soon
            conn.deadline = now + PEEK_SECONDS
            self._timed.add(conn)
            self._set_state(conn, State.REFUSING, selectors.EVENT_READ)
        else:
            self._finish_refusal(conn, False, now)

    def _finish_refusal(self, conn: Connection, kafka_peer: bool, now: float) -> None:
        self._timed.discard(conn)
        if kafka_peer:  # a Kafka client just sees the connection close (Kafka's InvalidReceive)
            self._linger(conn, now)
            return
        error = framing.encode_error(-1, Errors.INVALID_REQUEST, conn.refusal or "refused")
        self._start_write(conn, error, now)

    def _linger(self, conn: Connection, now: float) -> None:
        """Half-close and drain what the peer still sends, bounded in time and bytes: closing a
        socket with unread input makes the kernel send a reset, which can reach the peer before
        it has read the refusal."""
        with contextlib.suppress(OSError):
            conn.sock.shutdown(socket.SHUT_WR)
        self._lru.pop(conn, None)
        conn.deadline = now + LINGER_SECONDS
        self._timed.add(conn)
        self._set_state(conn, State.LINGERING, selectors.EVENT_READ)

    def _drain(self, conn: Connection) -> None:
        chunk = conn.sock.recv(65536)
        conn.drained += len(chunk)
        if not chunk or conn.drained >= LINGER_BYTES:
            self._close(conn, None)

    # -- writing -------------------------------------------------------------------------------------
    def _release_delayed(self, now: float) -> None:
        """Refused authentications whose delay is over join the answers to write (or close)."""
        delay_s = self._settings.connection_failed_authentication_delay_ms / 1000.0
        while self._delayed_in:
            conn, answer = self._delayed_in.popleft()
            self._delayed.append((now + delay_s, conn, answer))
        due = [entry for entry in self._delayed if entry[0] <= now]
        if due:
            self._delayed = [entry for entry in self._delayed if entry[0] > now]
            self._responses.extend((conn, answer) for _, conn, answer in due)

    def _drain_responses(self, now: float) -> None:
        self._release_delayed(now)
        released = False
        while self._responses:
            conn, answer = self._responses.popleft()
            if conn.reserved:
                self._pool.release(conn.reserved)
                conn.reserved = 0
                released = True
            if conn.state is not State.IN_FLIGHT:
                continue  # closed while its request was with a handler (stop)
            if answer is None:
                self._close(conn, "closed by its handler", logging.DEBUG)
                continue
            self._lru[conn] = None
            conn.last_active = now
            if isinstance(answer, memoryview):  # framed, and maybe partly written by its handler
                self._write_out(conn, answer, now)
            else:
                self._start_write(conn, answer, now)
        if released:
            self._admit_memory_waiters(now)

    def _admit_memory_waiters(self, now: float) -> None:
        while self._memory_waiters and not self._pool.out_of_memory:
            conn = self._memory_waiters.popleft()
            if conn.state is not State.WAITING_MEMORY:
                continue
            self._pool.try_reserve(conn.reader.length)
            self.waiting_for_memory -= 1
            conn.reserved = conn.reader.length
            conn.last_active = now
            self._lru[conn] = None
            self._set_state(conn, State.READING, selectors.EVENT_READ)

    def _start_write(self, conn: Connection, payload: bytes, now: float) -> None:
        self._write_out(conn, memoryview(_HEADER.pack(len(payload)) + payload), now)

    def _write_out(self, conn: Connection, out: memoryview, now: float) -> None:
        if not len(out) and conn.tls is None:  # its handler thread wrote it all
            conn.out = None
            if conn.refusal is not None:  # e.g. a failed SASL exchange: answered, now closed
                self._linger(conn, now)
            else:
                self._set_state(conn, State.READING, selectors.EVENT_READ)
            return
        conn.out = out
        self._set_state(conn, State.WRITING, selectors.EVENT_WRITE)
        try:
            self._write(conn, now)
        except BlockingIOError:
            pass
        except OSError as e:
            self._close(conn, f"connection ended: {e.strerror or e}", logging.DEBUG)

    def _write(self, conn: Connection, now: float) -> None:
        out = conn.out
        assert out is not None
        if len(out):
            sent = conn.sock.send(out)
            self._touch(conn, now)
            if sent < len(out):
                conn.out = out[sent:]
                return
        if conn.tls is not None and conn.tls.wants_write:  # TLS: the last records' ciphertext
            conn.out = out[len(out) :]
            conn.tls.flush()  # BlockingIOError: the caller waits for the socket
            self._touch(conn, now)
        conn.out = None
        if conn.refusal is not None:
            self._linger(conn, now)
        else:
            self._set_state(conn, State.READING, selectors.EVENT_READ)

    # -- timers and closing ------------------------------------------------------------------------------
    def _touch(self, conn: Connection, now: float) -> None:
        conn.last_active = now
        if conn in self._lru:
            del self._lru[conn]
            self._lru[conn] = None

    def _expire(self, now: float) -> None:
        idle_ms = self._settings.connections_max_idle_ms
        if idle_ms >= 0:
            idle_s = idle_ms / 1000.0
            while self._lru:
                conn = next(iter(self._lru))
                if now - conn.last_active < idle_s:
                    break
                self._close(conn, f"{_idleness(conn)} for connections.max.idle.ms={idle_ms}", logging.INFO)
        for conn in [c for c in self._timed if now >= c.deadline]:
            if conn.state is State.REFUSING:
                self._finish_refusal(conn, False, now)
            else:
                self._close(conn, None)
        self._maybe_listen(now)

    def _set_state(self, conn: Connection, state: State, events: int) -> None:
        conn.state = state
        if state in (State.IN_FLIGHT, State.WAITING_MEMORY, State.REFUSING):
            self._lru.pop(conn, None)  # the server's time, not the peer's
        elif state is State.READING and conn.tls is not None and conn.tls.buffered:
            self._ready.add(conn)  # its next request is already here, decrypted
        self._interest(conn, events)

    def _interest(self, conn: Connection, events: int) -> None:
        current = self._events.get(conn, 0)
        if events == current:
            return
        if not current:
            self._selector.register(conn.sock, events, conn)
        elif not events:
            self._selector.unregister(conn.sock)
        else:
            self._selector.modify(conn.sock, events, conn)
        if events:
            self._events[conn] = events
        else:
            self._events.pop(conn, None)

    def _close(self, conn: Connection, reason: str | None, level: int = logging.INFO) -> None:
        if conn.state is State.CLOSED:
            return
        if reason is not None:
            logger.log(level, "%s: closed the connection from %s: %s", self._name, conn.peer, reason)
        if conn.state is State.WAITING_MEMORY:
            self.waiting_for_memory -= 1
        if conn.reserved and conn.state is not State.IN_FLIGHT:  # else released with its answer
            self._pool.release(conn.reserved)
            conn.reserved = 0
        self._interest(conn, 0)
        conn.state = State.CLOSED
        self._lru.pop(conn, None)
        self._timed.discard(conn)
        self._ready.discard(conn)
        self._conns.discard(conn)
        with contextlib.suppress(OSError):
            conn.sock.close()
        self._quotas.dec(conn.ip)
        if not self._stopping:
            self._admit_memory_waiters(self._clock())
            self._maybe_listen(self._clock())

    def _shutdown(self) -> None:
        for conn in list(self._conns):
            with contextlib.suppress(OSError):
                conn.sock.shutdown(socket.SHUT_RDWR)
            self._close(conn, None)
        self._listen(False)
        self._selector.close()
        for sock in (self._listener, self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                sock.close()
        if self._reserve_fd is not None:
            os.close(self._reserve_fd)
            self._reserve_fd = None


def _idleness(conn: Connection) -> str:
    if conn.state is State.WRITING and conn.out is not None:
        return f"stalled reading its answer ({len(conn.out)} bytes unsent)"
    if conn.reader.received:
        total = f"{conn.reader.length + 4}" if conn.reader.length >= 0 else "?"
        return f"stalled mid-frame ({conn.reader.received} of {total} bytes)"
    return "idle"


def _open_reserve() -> int | None:
    """A spare descriptor, given up when accept runs out so one peer can be told (and named)."""
    try:
        return os.open(os.devnull, os.O_RDONLY)
    except OSError:
        return None
