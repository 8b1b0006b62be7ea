"""Frames and envelopes: a 4-byte big-endian length, then one orjson document.

Requests are ``{"api": NAME, "v": WIRE_VERSION, "cid": N, "body": ...}``; responses are
``{"cid": N, "body": ...}`` or ``{"cid": N, "error": {"code": KAFKA_ERROR, "message": ...}}``.
``cid`` is echoed so a client can tell a late answer from the one it waits for; a response to a
request whose ``cid`` could not be read carries ``cid: -1``.
"""

from __future__ import annotations

import socket
import struct
from typing import Any, Protocol

import orjson

from kafka_controller.transport.errors import ProtocolError, TransportConnectionError

#: Version of the envelope and body encodings; a server answers other versions with INVALID_REQUEST.
WIRE_VERSION = 1
#: Kafka's ``socket.request.max.bytes`` default (100 MiB): a 100,000-partition LeaderAndIsr is ~6 MB.
DEFAULT_MAX_FRAME_BYTES = 100 * 1024 * 1024
_HEADER = struct.Struct(">I")
_CHUNK = 1 << 20
#: The most one non-blocking read takes at once: the network thread moves on to other peers between.
_READ_CHUNK = 1 << 20
#: A payload buffer starts this large (or at the announced length, if smaller) and doubles as bytes
#: arrive, never past the announced length: reallocations copy the payload about twice in all.
_FIRST_BUFFER = 64 << 10


class FrameTooLargeError(ProtocolError):
    """The length prefix is zero or above the limit; the stream cannot be resynchronised."""


def recv_exact(sock: socket.socket, n: int) -> bytearray | None:
    """Read exactly ``n`` bytes; ``None`` if the peer closed cleanly before the first byte.

    The buffer grows with the bytes that arrive, never to ``n`` up front: a length prefix costs
    the reader nothing until the peer actually sends what it announced."""
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(min(n - len(buf), _CHUNK))
        if not chunk:
            if not buf:
                return None
            raise TransportConnectionError(f"connection closed after {len(buf)} of {n} bytes")
        buf += chunk
    return buf


def check_length(length: int, limit: int, setting: str = "max_frame_bytes") -> None:
    """Raise ``FrameTooLargeError`` for a length prefix outside ``1..limit``; ``setting`` names
    the limit in the message."""
    if length == 0 or length > limit:
        raise FrameTooLargeError(f"frame length {length} is outside 1..{limit} bytes ({setting})")


def read_frame(sock: socket.socket, max_frame_bytes: int) -> bytearray | None:
    """One frame's payload, or ``None`` on a clean end of stream between frames."""
    header = recv_exact(sock, _HEADER.size)
    if header is None:
        return None
    (length,) = _HEADER.unpack(header)
    check_length(length, max_frame_bytes)
    payload = recv_exact(sock, length)
    if payload is None:
        raise TransportConnectionError(f"connection closed before a {length}-byte frame")
    return payload


class Receiver(Protocol):
    """What ``FrameReader`` reads from: a socket, or a TLS listener's ``TlsChannel``."""

    def recv(self, bufsize: int, flags: int = ..., /) -> bytes: ...


class FrameReader:
    """One frame at a time from a non-blocking socket, as the bytes arrive (Kafka's ``NetworkReceive``
    reads the size, then the payload; here the payload buffer grows with what is received rather
    than being allocated at the announced size, so 9 bytes cannot make the reader hold 100 MiB).

    ``read_header`` then, once the caller has accepted ``length``, ``read_body`` until it returns
    True, then ``take()``. Both return None on end of stream and let ``BlockingIOError`` (nothing
    to read yet) and other ``OSError`` through."""

    __slots__ = ("_body", "_filled", "_header", "length")

    def __init__(self) -> None:
        self._header = bytearray()
        self._body = bytearray()
        self._filled = 0
        self.length = -1

    @property
    def received(self) -> int:
        """Bytes of the current frame so far, length prefix included."""
        return len(self._header) + self._filled

    @property
    def buffered(self) -> int:
        """Bytes the reader holds for the current payload (at most twice ``received``)."""
        return len(self._body)

    def read_header(self, sock: Receiver) -> bool | None:
        chunk = sock.recv(_HEADER.size - len(self._header))
        if not chunk:
            return None
        self._header += chunk
        if len(self._header) < _HEADER.size:
            return False
        (self.length,) = _HEADER.unpack(self._header)
        return True

    def read_body(self, sock: Receiver, chunk_bytes: int = _READ_CHUNK) -> bool | None:
        chunk = sock.recv(min(self.length - self._filled, chunk_bytes))
        if not chunk:
            return None
        end = self._filled + len(chunk)
        if end > len(self._body):
            capacity = min(self.length, max(end, 2 * len(self._body), _FIRST_BUFFER))
            self._body += bytes(capacity - len(self._body))
        self._body[self._filled : end] = chunk
        self._filled = end
        return end == self.length

    def take(self) -> bytearray:
        """The complete payload; the reader starts over for the next frame."""
        body = self._body
        self._header = bytearray()
        self._body = bytearray()
        self._filled = 0
        self.length = -1
        return body


def write_frame(sock: socket.socket, payload: bytes) -> None:
    sock.sendall(_HEADER.pack(len(payload)) + payload)


class EncodedObject(dict[str, Any]):
    """A JSON object whose bytes are already written (``json``): a body holding one as a top-level
    value is framed with those bytes, not serialized again. The UpdateMetadata columns after a
    failover (100,000 partitions) go to every live broker: written once, framed per broker. Still
    a ``dict`` for readers and for a plain ``orjson.dumps``; never mutated once written."""

    __slots__ = ("json",)

    def __init__(self, value: dict[str, Any]) -> None:
        super().__init__(value)
        self.json: bytes = orjson.dumps(value)


def _spliced(body: Any) -> Any:
    if type(body) is dict and EncodedObject in map(type, body.values()):
        return {k: orjson.Fragment(v.json) if type(v) is EncodedObject else v for k, v in body.items()}
    return body


def encode_request(api: str, cid: int, body: Any) -> bytes:
    return orjson.dumps({"api": api, "v": WIRE_VERSION, "cid": cid, "body": _spliced(body)})


def encode_response(cid: int, body: Any) -> bytes:
    return orjson.dumps({"cid": cid, "body": body})


def encode_error(cid: int, code: str, message: str) -> bytes:
    return orjson.dumps({"cid": cid, "error": {"code": code, "message": message}})


def _load(payload: bytes | bytearray, what: str) -> dict[str, Any]:
    try:
        doc = orjson.loads(payload)
    except orjson.JSONDecodeError as e:
        raise ProtocolError(f"{what} frame is not valid JSON: {e}") from None
    if not isinstance(doc, dict):
        raise ProtocolError(f"{what} frame is a JSON {type(doc).__name__}, not an object")
    return doc


def peek_cid(doc: dict[str, Any]) -> int:
    cid = doc.get("cid")
    return cid if type(cid) is int else -1


def decode_request(payload: bytes | bytearray) -> tuple[str, int, Any]:
    """``(api, cid, body)``; raises ``ProtocolError`` carrying the ``cid`` when it could be read."""
    doc = _load(payload, "request")
    cid = peek_cid(doc)
    missing = [key for key in ("api", "v", "cid", "body") if key not in doc]
    if missing:
        raise ProtocolError(f"request envelope has no {missing[0]!r} field", cid=cid)
    api, version = doc["api"], doc["v"]
    if type(doc["cid"]) is not int:
        raise ProtocolError("request 'cid' must be an integer")
    if type(api) is not str:
        raise ProtocolError("request 'api' must be a string", cid=cid)
    if version != WIRE_VERSION:
        raise ProtocolError(f"wire version {version!r} is not supported (only {WIRE_VERSION})", cid=cid)
    return api, cid, doc["body"]


def decode_response(payload: bytes | bytearray) -> tuple[int, Any, tuple[str, str] | None]:
    """``(cid, body, error)`` where ``error`` is ``(code, message)`` for an error envelope."""
    doc = _load(payload, "response")
    if type(doc.get("cid")) is not int:
        raise ProtocolError("response envelope has no integer 'cid'")
    error = doc.get("error")
    if error is not None:
        if not isinstance(error, dict) or type(error.get("code")) is not str:
            raise ProtocolError("response 'error' must be an object with a string 'code'")
        return doc["cid"], None, (error["code"], str(error.get("message", "")))
    if "body" not in doc:
        raise ProtocolError("response envelope has neither 'body' nor 'error'")
    return doc["cid"], doc["body"], None
