"""A length check of a request body against its ``kio`` schema, before ``kio``'s native reader sees it.

``kio`` 0.6.2's native reader reserves memory for an array or string from the length prefix on
the wire before reading its elements: a four-byte prefix claiming two billion elements makes it
ask for hundreds of gigabytes, and the allocation failure aborts the whole broker process (Rust's
``handle_alloc_error``, no Python exception). A hypothesis fuzz of ElectLeaders found it.

``check_lengths`` walks the same schema in Python and refuses, with ``KafkaDecodeError``, any
length prefix that claims more bytes than are left, so every allocation the native reader makes is
bounded by the frame it was given. It checks lengths only; the native reader still decides
everything else (nullability, tags, values). It is O(body) and runs only for ``kio`` APIs, none of
which is on a hot path.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from functools import cache
from typing import Any

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)

from kafka_controller.broker.kafka_wire.primitives import KafkaDecodeError

#: ``skip(data, pos) -> new pos``, raising KafkaDecodeError when the bytes are not there.
Skip = Callable[[memoryview, int], int]

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


def _need(data: memoryview, pos: int, n: int) -> int:
    if n < 0 or pos + n > len(data):
        raise KafkaDecodeError(f"a length of {n} bytes at offset {pos} runs past the end of the body")
    return pos + n


def _uvarint(data: memoryview, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data) or shift > 28:
            raise KafkaDecodeError(f"a bad unsigned varint at offset {pos}")
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7


def _signed(data: memoryview, pos: int, size: int) -> tuple[int, int]:
    end = _need(data, pos, size)
    return int.from_bytes(data[pos:end], "big", signed=True), end


def _count(data: memoryview, pos: int, flexible: bool) -> tuple[int, int]:
    """An array's element count (-1: null), compact (uvarint n+1) or legacy (int32)."""
    if flexible:
        n, pos = _uvarint(data, pos)
        return n - 1, pos
    return _signed(data, pos, 4)


def _primitive(kafka_type: str, flexible: bool, nullable: bool) -> Skip:
    size = _FIXED.get(kafka_type)
    if size is not None:
        return lambda data, pos: _need(data, pos, size)
    if kafka_type not in ("string", "bytes", "records"):
        raise KafkaDecodeError(f"no length check for kafka type {kafka_type!r}")
    legacy = 2 if kafka_type == "string" else 4

    def skip(data: memoryview, pos: int) -> int:
        if flexible:
            n, pos = _uvarint(data, pos)
            n -= 1
        else:
            n, pos = _signed(data, pos, legacy)
        if n < 0 and not nullable:  # kio would hand the handler a None it never expects
            raise KafkaDecodeError(f"a null {kafka_type} at offset {pos} where the schema allows none")
        return pos if n < 0 else _need(data, pos, n)  # -1: null

    return skip


def _array(inner: Skip, flexible: bool, nullable: bool) -> Skip:
    def skip(data: memoryview, pos: int) -> int:
        n, pos = _count(data, pos, flexible)
        if n < 0 and not nullable:
            raise KafkaDecodeError(f"a null array at offset {pos} where the schema allows none")
        if n > len(data) - pos:  # every element takes at least one byte
            raise KafkaDecodeError(f"an array of {n} elements at offset {pos} is longer than the body")
        for _ in range(max(n, 0)):
            pos = inner(data, pos)
        return pos

    return skip


def _field(field: Any, flexible: bool, tagged: bool) -> Skip:
    kind = classify_field(field)
    if isinstance(kind, EntityField | EntityTupleField):
        inner = entity_skipper(kind.type_)
        if isinstance(kind, EntityField) and is_optional(field) and not tagged:
            entity = inner

            def inner(data: memoryview, pos: int) -> int:
                marker, pos = _signed(data, pos, 1)
                return pos if marker < 0 else entity(data, pos)

        return _array(inner, flexible, is_optional(field)) if isinstance(kind, EntityTupleField) else inner
    if isinstance(kind, PrimitiveTupleField):
        element = _primitive(get_schema_field_type(field), flexible, nullable=True)
        return _array(element, flexible, is_optional(field))
    return _primitive(get_schema_field_type(field), flexible, is_optional(field))


@cache
def entity_skipper(entity_type: type) -> Skip:
    """The length check of one ``kio`` entity (request, or nested structure)."""
    flexible = bool(entity_type.__flexible__)  # type: ignore[attr-defined]
    plain: list[Skip] = []
    tagged: dict[int, Skip] = {}
    for f in fields(entity_type):
        tag = get_field_tag(f)
        if tag is None:
            plain.append(_field(f, flexible, False))
        else:
            tagged[int(tag)] = _field(f, flexible, True)

    def skip(data: memoryview, pos: int) -> int:
        for s in plain:
            pos = s(data, pos)
        if not flexible:
            return pos
        n, pos = _uvarint(data, pos)
        for _ in range(n):
            tag, pos = _uvarint(data, pos)
            size, pos = _uvarint(data, pos)
            end = _need(data, pos, size)
            known = tagged.get(tag)
            if known is not None and known(data[:end], pos) != end:
                raise KafkaDecodeError(f"tagged field {tag} does not fill its {size} bytes")
            pos = end
        return pos

    return skip


def check_lengths(entity_type: type, data: memoryview, offset: int) -> None:
    """Raise KafkaDecodeError when any length in ``data[offset:]`` claims bytes that are not there."""
    entity_skipper(entity_type)(data, offset)
