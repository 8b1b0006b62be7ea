"""The frames of Kafka's SASL exchange, read and written by hand with every length checked.

These are the only Kafka requests a broker parses from a peer that has not authenticated
(``SaslServerAuthenticator``), so nothing here trusts a length prefix: a string, byte array or
tagged field longer than what is left of the frame is refused before anything is allocated (the
lesson of CVE-2022-34917). Versions as Kafka 2.8: SaslHandshake v0-1 (never flexible),
SaslAuthenticate v0-2 (v2 flexible: compact fields, tagged fields, response header v1).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
API_VERSIONS = 18
HANDSHAKE_VERSIONS = (0, 1)
AUTHENTICATE_VERSIONS = (0, 2)

NONE = 0
UNSUPPORTED_SASL_MECHANISM = 33
ILLEGAL_SASL_STATE = 34
SASL_AUTHENTICATION_FAILED = 58


class SaslFrameError(Exception):
    """A frame that is not a well-formed request of the expected kind."""


@dataclass(frozen=True)
class Header:
    api_key: int
    api_version: int
    correlation_id: int


class SaslReader:
    def __init__(self, data: bytes | bytearray | memoryview) -> None:
        self.data = memoryview(data)
        self.pos = 0

    def take(self, n: int) -> memoryview:
        if n < 0 or n > len(self.data) - self.pos:
            raise SaslFrameError(f"a field of {n} bytes where {len(self.data) - self.pos} are left")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def int16(self) -> int:
        return int(struct.unpack(">h", self.take(2))[0])

    def int32(self) -> int:
        return int(struct.unpack(">i", self.take(4))[0])

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            byte = self.take(1)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
            if shift > 28:
                raise SaslFrameError("a varint longer than 5 bytes")

    def nullable_string(self) -> str | None:
        n = self.int16()
        return None if n == -1 else self._utf8(self.take(n))

    def string(self) -> str:
        value = self.nullable_string()
        if value is None:
            raise SaslFrameError("a null string")
        return value

    def bytes32(self) -> bytes:
        return bytes(self.take(self.int32()))

    def compact_bytes(self) -> bytes:
        n = self.uvarint() - 1
        if n < 0:
            raise SaslFrameError("null bytes")
        return bytes(self.take(n))

    def skip_tagged_fields(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.take(self.uvarint())

    def end(self) -> None:
        if self.pos != len(self.data):
            raise SaslFrameError(f"{len(self.data) - self.pos} unexpected bytes after the request")

    @staticmethod
    def _utf8(raw: memoryview) -> str:
        try:
            return bytes(raw).decode("utf-8")
        except UnicodeDecodeError:
            raise SaslFrameError("a string that is not UTF-8") from None


def read_header(reader: SaslReader) -> Header:
    """Request header v1 (v2, with tagged fields, for SaslAuthenticate v2)."""
    header = Header(reader.int16(), reader.int16(), reader.int32())
    reader.nullable_string()  # client id
    if header.api_key == SASL_AUTHENTICATE and header.api_version >= 2:
        reader.skip_tagged_fields()
    return header


def read_handshake(reader: SaslReader) -> str:
    mechanism = reader.string()
    reader.end()
    return mechanism


def read_authenticate(reader: SaslReader, version: int) -> bytes:
    if version >= 2:
        token = reader.compact_bytes()
        reader.skip_tagged_fields()
    else:
        token = reader.bytes32()
    reader.end()
    return token


def _string(value: str) -> bytes:
    raw = value.encode("utf-8")
    return struct.pack(">h", len(raw)) + raw


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def handshake_response(correlation_id: int, error: int, mechanisms: tuple[str, ...]) -> bytes:
    body = struct.pack(">ihi", correlation_id, error, len(mechanisms))
    return body + b"".join(_string(m) for m in mechanisms)


def authenticate_response(
    correlation_id: int, version: int, error: int, message: str | None, token: bytes, lifetime_ms: int = 0
) -> bytes:
    if version >= 2:
        out = struct.pack(">i", correlation_id) + b"\0" + struct.pack(">h", error)
        if message is None:
            out += b"\0"
        else:
            raw = message.encode("utf-8")
            out += _uvarint(len(raw) + 1) + raw
        return out + _uvarint(len(token) + 1) + token + struct.pack(">q", lifetime_ms) + b"\0"
    out = struct.pack(">ih", correlation_id, error)
    out += struct.pack(">h", -1) if message is None else _string(message)
    out += struct.pack(">i", len(token)) + token
    return out + (struct.pack(">q", lifetime_ms) if version >= 1 else b"")


# -- the client side (a broker's inter-broker connections) -----------------------------------------------
def handshake_request(correlation_id: int, mechanism: str, client_id: str) -> bytes:
    return struct.pack(">hhi", SASL_HANDSHAKE, 1, correlation_id) + _string(client_id) + _string(mechanism)


def authenticate_request(correlation_id: int, token: bytes, client_id: str) -> bytes:
    head = struct.pack(">hhi", SASL_AUTHENTICATE, 1, correlation_id) + _string(client_id)
    return head + struct.pack(">i", len(token)) + token


def read_handshake_response(reader: SaslReader) -> tuple[int, int, list[str]]:
    correlation_id, error = reader.int32(), reader.int16()
    count = reader.int32()
    if count < 0 or count > len(reader.data):
        raise SaslFrameError("a bad mechanism count")
    return correlation_id, error, [reader.string() for _ in range(count)]


def read_authenticate_response(reader: SaslReader) -> tuple[int, int, str | None, bytes]:
    """v1: correlation id, error code, error message, auth bytes (the lifetime is read and dropped)."""
    correlation_id, error = reader.int32(), reader.int16()
    message = reader.nullable_string()
    token = reader.bytes32()
    reader.take(8)
    return correlation_id, error, message, token
