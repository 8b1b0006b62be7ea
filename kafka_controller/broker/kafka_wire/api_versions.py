"""ApiVersions (key 18), versions 0-3; v3 is flexible.

Request: nothing before v3; v3 has compact strings ClientSoftwareName and ClientSoftwareVersion.
Response: int16 ErrorCode, array ApiKeys of (int16 ApiKey, int16 MinVersion, int16 MaxVersion),
int32 ThrottleTimeMs from v1. Its header is always v0. A request for a version above 3 gets a v0
body with UNSUPPORTED_VERSION and the supported ranges, so that the client retries with a version
both sides know (kafka-python asks v4 first).
"""

from __future__ import annotations

from dataclasses import dataclass

from kafka_controller.broker.kafka_wire.primitives import Reader, Writer

MAX_VERSION = 3


@dataclass(frozen=True, slots=True)
class ApiVersionsRequest:
    client_software_name: str = ""
    client_software_version: str = ""


@dataclass(frozen=True, slots=True)
class ApiVersionsResponse:
    error_code: int
    api_keys: tuple[tuple[int, int, int], ...] = ()  # (api_key, min_version, max_version)
    throttle_time_ms: int = 0


def decode_request(reader: Reader, version: int) -> ApiVersionsRequest:
    if version < 3:
        return ApiVersionsRequest()
    name = reader.string(flexible=True)
    software_version = reader.string(flexible=True)
    reader.skip_tagged_fields()
    return ApiVersionsRequest(name, software_version)


def encode_request(writer: Writer, request: ApiVersionsRequest, version: int) -> None:
    if version >= 3:
        writer.string(request.client_software_name, flexible=True)
        writer.string(request.client_software_version, flexible=True)
        writer.empty_tagged_fields()


def encode_response(writer: Writer, response: ApiVersionsResponse, version: int) -> None:
    flexible = version >= 3
    writer.int16(response.error_code)
    writer.array_length(len(response.api_keys), flexible)
    for key, lo, hi in response.api_keys:
        writer.int16(key)
        writer.int16(lo)
        writer.int16(hi)
        if flexible:
            writer.empty_tagged_fields()
    if version >= 1:
        writer.int32(response.throttle_time_ms)
    if flexible:
        writer.empty_tagged_fields()


def decode_response(reader: Reader, version: int) -> ApiVersionsResponse:
    flexible = version >= 3
    error_code = reader.int16()
    keys = []
    for _ in range(max(reader.array_length(flexible), 0)):
        keys.append((reader.int16(), reader.int16(), reader.int16()))
        if flexible:
            reader.skip_tagged_fields()
    throttle = reader.int32() if version >= 1 else 0
    if flexible:
        reader.skip_tagged_fields()
    return ApiVersionsResponse(error_code, tuple(keys), throttle)
