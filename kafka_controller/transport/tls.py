"""TLS on a listener's non-blocking sockets (Kafka's ``SslTransportLayer``).

The network thread owns every socket and never blocks, so TLS runs on memory buffers: Python's
``SSLContext.wrap_bio`` gives an ``SSLObject`` that reads ciphertext from one ``MemoryBIO`` and
writes it to another, and ``TlsChannel`` moves bytes between those and the socket whenever the
selector says the socket is ready. A ``TlsChannel`` looks like the socket it wraps to the
processor (``recv``, ``send``, ``fileno``, ``shutdown``, ``close``), with three additions:

* ``handshake()`` advances the handshake as far as the bytes at hand allow (True once done);
  a failure raises ``ssl.SSLError`` (a plaintext client's first bytes fail at once: OpenSSL
  sees no TLS record) or ``ConnectionError`` (the peer left);
* ``buffered``: plaintext already decrypted but not yet taken. OpenSSL decrypts record by
  record, so one socket read can hold more than the frame the processor asked for; the selector
  cannot see those bytes, so the processor asks this before waiting for the socket again;
* ``flush()``: ciphertext still waiting for room in the socket's send buffer (a ``send`` accepts
  plaintext as soon as it is encrypted), True once it is all out.

Memory stays bounded whatever the peer sends: ciphertext is read 64 KiB at a time and only once
the decrypted bytes of the previous read are taken, and one TLS record is at most 16 KiB.
"""

from __future__ import annotations

import contextlib
import socket
import ssl

#: Bytes read from the socket, and asked of OpenSSL, at a time.
CHUNK = 65536
#: Plaintext encrypted per ``send``: one TLS record.
RECORD = 16384


class TlsChannel:
    """The server side of one TLS connection over a non-blocking socket."""

    __slots__ = ("_cipher_out", "_eof", "_incoming", "_obj", "_outgoing", "_plain", "handshaken", "sock")

    def __init__(self, sock: socket.socket, context: ssl.SSLContext) -> None:
        self.sock = sock
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self._obj = context.wrap_bio(self._incoming, self._outgoing, server_side=True)
        self._cipher_out = bytearray()  # encrypted, not yet accepted by the socket
        self._plain = bytearray()  # decrypted, not yet taken
        self._eof = False
        self.handshaken = False

    # -- the handshake ----------------------------------------------------------------------------------
    def handshake(self) -> bool:
        """Advance the handshake; True when it is complete. Raises ``ssl.SSLError`` when it fails
        (the alert OpenSSL prepared is sent, best effort) and ``ConnectionError`` when the peer
        closes first; ``BlockingIOError`` never escapes (False means: wait for the socket)."""
        while True:
            try:
                self._obj.do_handshake()
            except ssl.SSLWantReadError:
                self._queue_outgoing()
                with contextlib.suppress(BlockingIOError):
                    self.flush()
                try:
                    raw = self.sock.recv(CHUNK)
                except BlockingIOError:
                    return False
                if not raw:
                    raise ConnectionError("the peer closed the connection during the TLS handshake") from None
                self._incoming.write(raw)
                continue
            except ssl.SSLError:
                self._queue_outgoing()
                with contextlib.suppress(OSError):
                    self.flush()
                raise
            self._queue_outgoing()
            with contextlib.suppress(BlockingIOError):
                self.flush()
            self.handshaken = True
            self._decrypt()  # a TLS 1.3 client may send its first request with its Finished
            return True

    @property
    def wants_write(self) -> bool:
        """Ciphertext is waiting for room in the socket's send buffer."""
        return bool(self._cipher_out)

    def peer_certificate(self) -> bytes | None:
        """The client's certificate (DER) when it presented one that verified, else None."""
        return self._obj.getpeercert(binary_form=True)

    @property
    def version(self) -> str | None:
        return self._obj.version()

    # -- application data -----------------------------------------------------------------------------
    @property
    def buffered(self) -> bool:
        """Decrypted bytes are waiting to be taken (the selector cannot know)."""
        return bool(self._plain)

    def recv(self, n: int, flags: int = 0) -> bytes:
        """Up to ``n`` plaintext bytes; b"" at the end of the stream; ``BlockingIOError`` when
        nothing is decrypted yet. ``socket.MSG_PEEK`` leaves the bytes to be read again."""
        if not self._plain and not self._eof:
            self._fill()
            if not self._plain and not self._eof:
                raise BlockingIOError("no complete TLS record yet")
        data = bytes(self._plain[:n])
        if not flags & socket.MSG_PEEK:
            del self._plain[:n]
        return data

    def send(self, data: bytes | bytearray | memoryview) -> int:
        """Encrypt up to one record of ``data``; how much of it was taken. The ciphertext goes out
        now as far as the socket takes it, the rest with ``flush``; ``BlockingIOError`` while the
        previous ciphertext still waits."""
        if self._cipher_out and not self.flush():
            raise BlockingIOError("the previous TLS records are still being sent")
        taken = self._obj.write(memoryview(data)[:RECORD])
        self._queue_outgoing()
        with contextlib.suppress(BlockingIOError):
            self.flush()
        return taken

    def flush(self) -> bool:
        """Send queued ciphertext as far as the socket takes it; True when none is left."""
        while self._cipher_out:
            sent = self.sock.send(self._cipher_out)
            del self._cipher_out[:sent]
        return True

    # -- the socket's other faces -------------------------------------------------------------------------
    def fileno(self) -> int:
        return self.sock.fileno()

    def shutdown(self, how: int) -> None:
        self.sock.shutdown(how)

    def close(self) -> None:
        self.sock.close()

    # -- plumbing -----------------------------------------------------------------------------------------
    def _fill(self) -> None:
        raw = self.sock.recv(CHUNK)  # BlockingIOError: nothing there yet
        if not raw:
            self._eof = True
            return
        self._incoming.write(raw)
        self._decrypt()

    def _decrypt(self) -> None:
        """Take every complete record out of the incoming buffer (what is left is a partial one)."""
        while True:
            try:
                data = self._obj.read(CHUNK)
            except ssl.SSLWantReadError:
                break
            except ssl.SSLZeroReturnError:  # the peer's close_notify
                self._eof = True
                break
            if not data:
                self._eof = True
                break
            self._plain += data
        self._queue_outgoing()  # e.g. a TLS 1.3 key update's answer

    def _queue_outgoing(self) -> None:
        if self._outgoing.pending:
            self._cipher_out += self._outgoing.read()

    def __repr__(self) -> str:
        return f"TlsChannel({self.fileno()}, handshaken={self.handshaken})"


__all__ = ["CHUNK", "RECORD", "TlsChannel"]
