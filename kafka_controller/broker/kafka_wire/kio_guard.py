"""A pre-check of a request body before ``kio``'s native reader sees it: no array may claim more
elements than there are bytes left.

``kio`` 0.6.2's reader (Rust) reserves an array's declared length up front; a body claiming four
billion elements makes it ask for tens of gigabytes, and a failed allocation aborts the whole
process — one crafted request would kill the broker. This walk follows the same generated schema
(fields in order, compact or legacy lengths by the version's flexibility, tagged fields skipped) and
raises ``KafkaDecodeError`` for such a claim. Other malformations are left to ``kio``, which
reports them as errors.
"""

from __future__ import annotations

import dataclasses
import struct
import types
import typing
from functools import cache
from typing import Any

from kafka_controller.broker.kafka_wire.primitives import KafkaDecodeError

_FIXED = {
    "bool": 1,
    "int8": 1,
    "int16": 2,
    "uint16": 2,
    "error_code": 2,
    "int32": 4,
    "timedelta_i32": 4,
    "int64": 8,
    "float64": 8,
    "timedelta_i64": 8,
    "datetime_i64": 8,
    "uuid": 16,
}

#: ``(kafka_type or None, element class or None, is_array, nullable)`` per untagged field.
Plan = tuple[tuple[str | None, type | None, bool, bool], ...]


def _unwrap(hint: Any) -> tuple[Any, bool, bool]:
    """``(inner type, is_array, nullable)`` of a field's hint."""
    nullable = False
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        nullable = type(None) in typing.get_args(hint)
        hint = next(a for a in typing.get_args(hint) if a is not type(None))
    if typing.get_origin(hint) is tuple:
        return typing.get_args(hint)[0], True, nullable
    return hint, False, nullable


@cache
def _plan(cls: type) -> Plan:
    hints = typing.get_type_hints(cls)
    out: list[tuple[str | None, type | None, bool, bool]] = []
    for f in dataclasses.fields(cls):
        if "tag" in f.metadata:
            continue
        inner, is_array, nullable = _unwrap(hints[f.name])
        nested: type | None = inner if isinstance(inner, type) and dataclasses.is_dataclass(inner) else None
        out.append((f.metadata.get("kafka_type"), nested, is_array, nullable))
    return tuple(out)


class _Cursor:
    __slots__ = ("data", "pos")

    def __init__(self, data: memoryview, pos: int) -> None:
        self.data, self.pos = data, pos

    def take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.data):
            raise KafkaDecodeError("truncated request body")
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            byte = self.take(1)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
            if shift > 35:
                raise KafkaDecodeError("varint too long")

    def int16(self) -> int:
        return int(struct.unpack(">h", self.take(2))[0])

    def int32(self) -> int:
        return int(struct.unpack(">i", self.take(4))[0])


def check_request(cls: type, data: memoryview, offset: int) -> None:
    """Raise ``KafkaDecodeError`` when a body of ``cls`` claims an impossible array length, or null
    for an array or string the schema does not let be null (Kafka's parser refuses both)."""
    _entity(cls, _Cursor(data, offset), bool(getattr(cls, "__flexible__", False)))


def _entity(cls: type, cur: _Cursor, flexible: bool) -> None:
    for kind, nested, is_array, nullable in _plan(cls):
        if is_array:
            count = cur.uvarint() - 1 if flexible else cur.int32()
            if count < 0 and not nullable:
                raise KafkaDecodeError("null for an array that cannot be null")
            if count > len(cur.data) - cur.pos:
                raise KafkaDecodeError(
                    f"an array claims {count} elements with {len(cur.data) - cur.pos} bytes left"
                )
            if nested is None and kind in _FIXED:
                cur.take(max(0, count) * _FIXED[kind])  # fixed-size elements: skipped in one step
                continue
            for _ in range(max(0, count)):
                _value(kind, nested, cur, flexible)
        else:
            _value(kind, nested, cur, flexible, nullable)
    if flexible:
        for _ in range(cur.uvarint()):
            cur.uvarint()
            cur.take(cur.uvarint())


def _value(
    kind: str | None, nested: type | None, cur: _Cursor, flexible: bool, nullable: bool = True
) -> None:
    if nested is not None:
        _entity(nested, cur, flexible)
    elif kind in _FIXED:
        cur.take(_FIXED[kind])
    elif kind == "string":
        n = cur.uvarint() - 1 if flexible else cur.int16()
        if n < 0 and not nullable:
            raise KafkaDecodeError("null for a string that cannot be null")
        cur.take(max(0, n))
    elif kind in ("bytes", "records"):
        n = cur.uvarint() - 1 if flexible else cur.int32()
        cur.take(max(0, n))
    else:
        raise KafkaDecodeError(f"unknown field type {kind!r}")
