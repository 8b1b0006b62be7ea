"""Building ``kio`` response entities for any version from one set of values.

Each version of a Kafka message is its own ``kio`` dataclass, and fields come and go between
versions (``error_message`` from CreateTopics v1, ``topic_id`` from v7). ``build`` keeps only the
values the version's class has, so the admin APIs describe an answer once and every version encodes
its own slice of it, as Kafka's generated ``write(version)`` does.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import importlib
import uuid
from functools import cache
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i32Timedelta

NO_THROTTLE = i32Timedelta.parse(datetime.timedelta(0))


@cache
def _field_names(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in dataclasses.fields(cls))


def build(cls: type, **values: Any) -> Any:
    """``cls(**values)`` without the values ``cls`` has no field for."""
    names = _field_names(cls)
    return cls(**{k: v for k, v in values.items() if k in names})


@cache
def nested(schema: type, name: str) -> type:
    """A nested entity class (``CreatableTopicResult``) of ``schema``'s version."""
    cls: type = getattr(importlib.import_module(schema.__module__), name)
    return cls


def error_code(code: int) -> ErrorCode:
    return ErrorCode(code)


def timeout_ms(value: datetime.timedelta) -> int:
    """A request's ``timeout`` field (an ``i32Timedelta``) in milliseconds; may be <= 0."""
    return int(value.total_seconds() * 1000)


def topic_id_uuid(topic_id: str | None) -> uuid.UUID | None:
    """A topic id as ZooKeeper holds it (Kafka's ``Uuid.toString``) as kio's uuid; None for none."""
    if not topic_id:
        return None
    try:
        raw = base64.urlsafe_b64decode(topic_id + "=" * (-len(topic_id) % 4))
    except (ValueError, TypeError):
        return None
    return uuid.UUID(bytes=raw) if len(raw) == 16 else None


def topic_id_from_uuid(value: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode("ascii")
