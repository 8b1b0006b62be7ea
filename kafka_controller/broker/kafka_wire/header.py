"""Request and response headers, and the APIs (with their version ranges) this broker answers.

Request header v1: int16 api_key, int16 api_version, int32 correlation_id, nullable string client_id
(always the classic int16-length form); v2 adds tagged fields, and is used by an API's flexible
versions. Response header v0 is the correlation id alone; v1 adds tagged fields, for flexible
versions — except ApiVersions, whose response always has header v0 so that a client can read it
whatever version it asked for.

Every Kafka API key (0-92 today) is below 256, so the first byte of a Kafka request is 0x00; a
private-protocol frame starts with ``{`` (0x7B), and no JSON text holds a zero byte at all. A
request for a key of 256 or more still has one in its first four bytes (its api_version's high
byte), so the listener routes on that (``is_kafka_frame``, ``transport.server.is_raw_frame``) and
such a request reaches this handler, which closes the connection as Kafka does for a key it does
not know.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kafka_controller.broker.kafka_wire.primitives import KafkaDecodeError, Reader, Writer

API_VERSIONS = 18
METADATA = 3
DESCRIBE_CLUSTER = 60

#: api_key -> (min version, max version, first flexible version), as in Kafka 2.8.
SUPPORTED: dict[int, tuple[int, int, int]] = {
    METADATA: (0, 11, 9),
    API_VERSIONS: (0, 3, 3),
    DESCRIBE_CLUSTER: (0, 0, 0),
}

#: First byte of every Kafka request (its api_key's high byte); a private-protocol frame starts with ``{``.
KAFKA_FRAME_FIRST_BYTE = 0x00


def is_kafka_frame(payload: bytes | bytearray) -> bool:
    """A zero byte among the first four: any Kafka request's, never JSON's."""
    return KAFKA_FRAME_FIRST_BYTE in payload[:4]


#: A supported-API table: api_key -> (min version, max version, first flexible version).
Table = Mapping[int, tuple[int, int, int]]


def is_flexible(api_key: int, api_version: int, table: Table = SUPPORTED) -> bool:
    entry = table.get(api_key)
    return entry is not None and api_version >= entry[2]


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None = None
    #: Not on the wire: the audit operation the request was made part of when it arrived outside
    #: any (``broker.admin_audit``); its transitions are stamped with it.
    operation_id: str | None = None


def decode_request_header(reader: Reader, table: Table = SUPPORTED) -> RequestHeader:
    """Header v1 fields, then the tagged fields of v2 when the API's version is flexible.

    For a version above the supported range (ApiVersions v4, say) the tagged fields are still
    read when the API is flexible at its highest known version: newer versions stay flexible."""
    api_key = reader.int16()
    api_version = reader.int16()
    correlation_id = reader.int32()
    client_id = reader.nullable_string()
    header = RequestHeader(api_key, api_version, correlation_id, client_id)
    if is_flexible(api_key, api_version, table):
        reader.skip_tagged_fields()
    return header


def encode_request_header(writer: Writer, header: RequestHeader, table: Table = SUPPORTED) -> None:
    writer.int16(header.api_key)
    writer.int16(header.api_version)
    writer.int32(header.correlation_id)
    writer.nullable_string(header.client_id)
    if is_flexible(header.api_key, header.api_version, table):
        writer.empty_tagged_fields()


def encode_response_header(
    writer: Writer, api_key: int, api_version: int, correlation_id: int, table: Table = SUPPORTED
) -> None:
    writer.int32(correlation_id)
    if api_key != API_VERSIONS and is_flexible(api_key, api_version, table):
        writer.empty_tagged_fields()


def decode_response_header(reader: Reader, api_key: int, api_version: int, table: Table = SUPPORTED) -> int:
    """The correlation id (for tests and clients of this codec)."""
    correlation_id = reader.int32()
    if api_key != API_VERSIONS and is_flexible(api_key, api_version, table):
        reader.skip_tagged_fields()
    return correlation_id


def check_consumed(reader: Reader, what: str) -> None:
    if reader.remaining:
        raise KafkaDecodeError(f"{reader.remaining} unexpected bytes after the {what}")
