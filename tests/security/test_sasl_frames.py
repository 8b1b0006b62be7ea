"""The SASL server authenticator on hostile and out-of-order frames, without sockets: every length
is checked against the frame before anything is read or allocated, a request out of turn ends the
exchange, and PLAIN checks what Kafka's PlainSaslServer checks."""

from __future__ import annotations

import struct

import pytest

from kafka_controller.security import sasl_wire as wire
from kafka_controller.security.credentials import ScramCredentialCache
from kafka_controller.security.sasl import (
    PlainServer,
    SaslAuthenticationError,
    SaslServerAuthenticator,
    SaslServerSettings,
)
from kafka_controller.security.scram import SCRAM_SHA_256, ScramClient, ScramFormatter

USERS = {"carol": "carol-pw"}


def _authenticator(api_versions: bool = True) -> SaslServerAuthenticator:
    cache = ScramCredentialCache()
    cache.update(
        "alice", {SCRAM_SHA_256: ScramFormatter(SCRAM_SHA_256).credential("alice-pw", 4096).to_config()}
    )
    return SaslServerAuthenticator(
        SaslServerSettings(
            "SASL_PLAINTEXT",
            ("PLAIN", SCRAM_SHA_256),
            USERS,
            cache,
            (lambda payload: b"api-versions-answer") if api_versions else None,
        )
    )


def _header(key: int, version: int, cid: int = 1) -> bytes:
    return struct.pack(">hhih", key, version, cid, 1) + b"t"


def _handshake(auth: SaslServerAuthenticator, mechanism: str, version: int = 1) -> int:
    answer = auth.receive(
        bytearray(
            _header(wire.SASL_HANDSHAKE, version) + struct.pack(">h", len(mechanism)) + mechanism.encode()
        )
    )
    assert answer is not None
    return wire.read_handshake_response(wire.SaslReader(answer))[1]


def _token(
    auth: SaslServerAuthenticator, token: bytes, version: int = 1
) -> tuple[int, str | None, bytes] | None:
    answer = auth.receive(bytearray(wire.authenticate_request(2, token, "t")))
    if answer is None:
        return None
    _, code, message, reply = wire.read_authenticate_response(wire.SaslReader(answer))
    return code, message, reply


@pytest.mark.parametrize(
    "frame",
    [
        _header(wire.SASL_HANDSHAKE, 1) + struct.pack(">h", 32767) + b"PLAIN",  # string longer than the frame
        _header(wire.SASL_HANDSHAKE, 1) + struct.pack(">h", -2),  # negative length
        struct.pack(">hhih", wire.SASL_HANDSHAKE, 1, 1, 30000),  # client id longer than the frame
        _header(wire.SASL_HANDSHAKE, 1) + struct.pack(">h", 5) + b"PLAIN" + b"extra",  # bytes left over
        _header(3, 12),  # Metadata before authenticating
        b'{"api":"ShutdownBroker"}',  # the private protocol before authenticating
        b"\x00",  # not even a header
    ],
)
def test_hostile_or_out_of_turn_first_frames_close_the_connection(frame: bytes) -> None:
    auth = _authenticator()
    assert auth.receive(bytearray(frame)) is None
    assert not auth.complete
    assert auth.receive(bytearray(_header(wire.SASL_HANDSHAKE, 1) + struct.pack(">h", 5) + b"PLAIN")) is None


@pytest.mark.parametrize(
    "body",
    [
        struct.pack(">i", 0x7FFFFFFF) + b"x",  # v1 bytes claiming 2 GiB
        struct.pack(">i", -1),  # null bytes
    ],
)
def test_a_token_length_beyond_the_frame_closes(body: bytes) -> None:
    auth = _authenticator()
    assert _handshake(auth, "PLAIN") == 0
    assert auth.receive(bytearray(_header(wire.SASL_AUTHENTICATE, 1) + body)) is None


def test_a_v2_varint_longer_than_five_bytes_closes() -> None:
    auth = _authenticator()
    assert _handshake(auth, "PLAIN") == 0
    frame = struct.pack(">hhih", wire.SASL_AUTHENTICATE, 2, 1, 1) + b"t" + b"\0" + b"\xff" * 6 + b"\x01"
    assert auth.receive(bytearray(frame)) is None


def test_api_versions_once_and_only_before_the_handshake() -> None:
    auth = _authenticator()
    assert auth.receive(bytearray(_header(wire.API_VERSIONS, 3))) == b"api-versions-answer"
    assert auth.receive(bytearray(_header(wire.API_VERSIONS, 3))) is None  # a second one closes
    auth = _authenticator()
    assert _handshake(auth, "PLAIN") == 0
    assert auth.receive(bytearray(_header(wire.API_VERSIONS, 3))) is None


def test_an_unknown_mechanism_gets_kafkas_error_then_the_connection_ends() -> None:
    auth = _authenticator()
    assert _handshake(auth, "OAUTHBEARER") == wire.UNSUPPORTED_SASL_MECHANISM
    assert _token(auth, b"\0carol\0carol-pw") is None


def test_a_second_handshake_while_authenticating_is_illegal_sasl_state() -> None:
    auth = _authenticator()
    assert _handshake(auth, "PLAIN") == 0
    assert _handshake(auth, "PLAIN") == wire.ILLEGAL_SASL_STATE
    assert _token(auth, b"\0carol\0carol-pw") is None


def test_plain_success_and_kafkas_refusal() -> None:
    auth = _authenticator()
    assert _handshake(auth, "PLAIN") == 0
    assert _token(auth, b"\0carol\0carol-pw") == (0, None, b"")
    assert auth.complete and auth.principal == "User:carol"
    auth = _authenticator()
    assert _handshake(auth, "PLAIN") == 0
    assert _token(auth, b"\0carol\0nope") == (
        wire.SASL_AUTHENTICATION_FAILED,
        "Authentication failed: Invalid username or password",
        b"",
    )
    assert not auth.complete and auth.principal == "User:ANONYMOUS"
    assert auth.failed  # the transport closes once the refusal is written
    assert _token(auth, b"\0carol\0carol-pw") is None  # failed for good


@pytest.mark.parametrize(
    ("message", "why"),
    [
        (b"carol-pw", "3 tokens"),
        (b"\0\0carol-pw", "username"),
        (b"\0carol\0", "password"),
        (b"\0nobody\0carol-pw", "Invalid username or password"),
        (b"dave\0carol\0carol-pw", "authorization id"),
        (b"\0carol\0carol-pw\0more", "3 tokens"),
    ],
)
def test_plain_checks_what_kafka_checks(message: bytes, why: str) -> None:
    with pytest.raises(SaslAuthenticationError, match=why):
        PlainServer(USERS).evaluate(message)


def test_scram_over_authenticate_frames() -> None:
    auth = _authenticator()
    assert _handshake(auth, SCRAM_SHA_256) == 0
    client = ScramClient(SCRAM_SHA_256, "alice", "alice-pw")
    first = _token(auth, client.first())
    assert first is not None and first[0] == 0
    final = _token(auth, client.final(first[2]))
    assert final is not None and final[0] == 0
    client.verify(final[2])
    assert auth.complete and auth.principal == "User:alice"
