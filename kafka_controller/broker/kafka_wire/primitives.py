"""Kafka's protocol primitive types: a bounds-checked ``Reader`` and an appending ``Writer``.

Fixed-width integers are big-endian. Classic strings carry an int16 length (-1: null) and arrays an
int32 count (-1: null); the *compact* forms of flexible versions carry an unsigned varint of the
length plus one (0: null). Tagged fields are a varint count, then per field a varint tag, a varint
size and that many bytes. A UUID is 16 raw bytes.

Every malformed input raises ``KafkaDecodeError``, and nothing else: the request decoder is fuzzed
for that.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from kafka_controller.transport.errors import ProtocolError

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U32 = struct.Struct(">I")

#: Longest unsigned varint Kafka writes for a 32-bit value.
_MAX_VARINT_BYTES = 5


class KafkaDecodeError(ProtocolError):
    """A Kafka request could not be decoded; the connection is closed."""


class Reader:
    """Reads from ``data`` starting at ``pos``; every read checks the bytes are there."""

    __slots__ = ("data", "pos")

    def __init__(self, data: bytes | bytearray | memoryview, pos: int = 0) -> None:
        self.data = memoryview(data)
        self.pos = pos

    @property
    def remaining(self) -> int:
        return len(self.data) - self.pos

    def _take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.data):
            raise KafkaDecodeError(f"needs {n} bytes at offset {self.pos}, only {self.remaining} left")
        start = self.pos
        self.pos += n
        return self.data[start : self.pos]

    def int8(self) -> int:
        return int(_I8.unpack(self._take(1))[0])

    def int16(self) -> int:
        return int(_I16.unpack(self._take(2))[0])

    def int32(self) -> int:
        return int(_I32.unpack(self._take(4))[0])

    def int64(self) -> int:
        return int(_I64.unpack(self._take(8))[0])

    def boolean(self) -> bool:
        return self._take(1)[0] != 0

    def uuid(self) -> bytes:
        return bytes(self._take(16))

    def uvarint(self) -> int:
        value = shift = 0
        for _ in range(_MAX_VARINT_BYTES):
            b = self._take(1)[0]
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7
        raise KafkaDecodeError(f"unsigned varint longer than {_MAX_VARINT_BYTES} bytes")

    def _text(self, n: int) -> str:
        raw = self._take(n)
        try:
            return bytes(raw).decode("utf-8")
        except UnicodeDecodeError as e:
            raise KafkaDecodeError(f"string is not UTF-8: {e.reason}") from None

    def nullable_string(self, flexible: bool = False) -> str | None:
        n = self.uvarint() - 1 if flexible else self.int16()
        if n < -1:
            raise KafkaDecodeError(f"string length {n} is negative")
        return None if n == -1 else self._text(n)

    def string(self, flexible: bool = False) -> str:
        s = self.nullable_string(flexible)
        if s is None:
            raise KafkaDecodeError("a non-nullable string is null")
        return s

    def array_length(self, flexible: bool = False) -> int:
        """The element count, or -1 for a null array. A count larger than the bytes left (each
        element takes at least one byte) is refused before anything is allocated."""
        n = self.uvarint() - 1 if flexible else self.int32()
        if n < -1:
            raise KafkaDecodeError(f"array length {n} is negative")
        if n > self.remaining:
            raise KafkaDecodeError(f"array of {n} elements in {self.remaining} bytes")
        return n

    def skip_tagged_fields(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()  # tag: none of the fields this broker reads is tagged
            self._take(self.uvarint())


def _uvarint_bytes(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


#: Varints for the small lengths that make up nearly every compact length on the wire.
_SMALL_UVARINTS = tuple(_uvarint_bytes(n) for n in range(256))
_INT32_ARRAY_FORMATS: dict[int, struct.Struct] = {}


def _int32s(n: int) -> struct.Struct:
    s = _INT32_ARRAY_FORMATS.get(n)
    if s is None:
        s = _INT32_ARRAY_FORMATS.setdefault(n, struct.Struct(f">{n}i"))
    return s


class Writer:
    """Appends to one ``bytearray``; ``flexible`` picks the compact forms of strings and arrays."""

    __slots__ = ("buf",)

    def __init__(self) -> None:
        self.buf = bytearray()

    def int8(self, v: int) -> None:
        self.buf += _I8.pack(v)

    def int16(self, v: int) -> None:
        self.buf += _I16.pack(v)

    def int32(self, v: int) -> None:
        self.buf += _I32.pack(v)

    def int64(self, v: int) -> None:
        self.buf += _I64.pack(v)

    def boolean(self, v: bool) -> None:
        self.buf.append(1 if v else 0)

    def uuid(self, v: bytes) -> None:
        if len(v) != 16:
            raise ValueError(f"a UUID is 16 bytes, got {len(v)}")
        self.buf += v

    def uvarint(self, n: int) -> None:
        self.buf += _SMALL_UVARINTS[n] if n < 256 else _uvarint_bytes(n)

    def array_length(self, n: int | None, flexible: bool = False) -> None:
        if flexible:
            self.uvarint(0 if n is None else n + 1)
        else:
            self.buf += _I32.pack(-1 if n is None else n)

    def nullable_string(self, s: str | None, flexible: bool = False) -> None:
        if s is None:
            self.array_length(None, flexible) if flexible else self.int16(-1)
            return
        raw = s.encode("utf-8")
        if flexible:
            self.uvarint(len(raw) + 1)
        else:
            self.buf += _I16.pack(len(raw))
        self.buf += raw

    def string(self, s: str, flexible: bool = False) -> None:
        self.nullable_string(s, flexible)

    def int32_array(self, values: Sequence[int], flexible: bool = False) -> None:
        n = len(values)
        if flexible:
            self.uvarint(n + 1)
        else:
            self.buf += _I32.pack(n)
        if n:
            self.buf += _int32s(n).pack(*values)

    def empty_tagged_fields(self) -> None:
        self.buf.append(0)

    def getvalue(self) -> bytes:
        return bytes(self.buf)


def frame(payload: bytes | bytearray) -> bytes:
    """``payload`` with its 4-byte big-endian length in front."""
    return _U32.pack(len(payload)) + payload
