"""Kafka APIs whose bodies are decoded and encoded by ``kio`` (Kafka's own message schemas, generated).

The hot path (Metadata, and the ApiVersions/DescribeCluster it shares types with) has the project's
own codec; every other API a broker answers is a ``KioApi``: a version range and a function from the
decoded request entity to the response entity. ``KafkaProtocolHandler`` looks a key up in its
``apis`` mapping, decodes the body after the header with ``kio``, calls the function and encodes the
answer. A body ``kio`` cannot decode, or one with bytes left over, closes the connection as Kafka
does.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer
from kio.serial.errors import SerialError

from kafka_controller.broker.kafka_wire.header import RequestHeader
from kafka_controller.broker.kafka_wire.kio_guard import check_request
from kafka_controller.broker.kafka_wire.primitives import KafkaDecodeError

#: ``handle(header, request) -> response``: ``request`` is the kio request entity of
#: ``header.api_version``; the response must be the kio response entity of the same version.
KioHandler = Callable[[RequestHeader, Any], Any]


@dataclass(frozen=True, slots=True)
class KioApi:
    """One API answered through ``kio``: its key, Kafka 2.8's version range and first flexible version."""

    api_key: int
    min_version: int
    max_version: int
    first_flexible: int
    handle: KioHandler


@cache
def request_schema(api_key: int, version: int) -> Any:
    return load_request_schema(api_key, version)


@cache
def response_schema(api_key: int, version: int) -> Any:
    return load_response_schema(api_key, version)


@cache
def _reader(api_key: int, version: int) -> Any:
    return entity_reader(request_schema(api_key, version))


@cache
def _writer(api_key: int, version: int) -> Any:
    return entity_writer(response_schema(api_key, version))


def decode_request(api_key: int, version: int, data: memoryview, offset: int) -> Any:
    """The request entity from ``data[offset:]``; every malformed body raises ``KafkaDecodeError``."""
    data = data.toreadonly()  # kio's reader refuses a writable buffer (the listener reads into bytearrays)
    check_request(request_schema(api_key, version), data, offset)  # before kio's reader can abort
    try:
        entity, size = _reader(api_key, version)(data, offset)
    except (SerialError, ValueError, TypeError, OverflowError, UnicodeDecodeError, KeyError, IndexError) as e:
        raise KafkaDecodeError(f"api key {api_key} v{version}: {e}") from e
    if offset + size != len(data):
        raise KafkaDecodeError(f"{len(data) - offset - size} unexpected bytes after the request body")
    return entity


def encode_response(api_key: int, version: int, response: Any) -> bytes:
    buf = io.BytesIO()
    _writer(api_key, version)(buf, response)
    return buf.getvalue()
