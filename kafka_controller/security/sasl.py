"""SASL on SASL_PLAINTEXT and SASL_SSL listeners: Kafka's ``SaslServerAuthenticator`` with PLAIN,
SCRAM-SHA-256 and SCRAM-SHA-512, and the client side a broker uses on its inter-broker connections.

Settings, with Kafka's names (each may be given per listener as ``listener.name.<l>.<key>``):

* ``sasl.enabled.mechanisms`` (Kafka's default GSSAPI, which is not offered here: a SASL listener
  must name PLAIN and/or SCRAM-SHA-256/SCRAM-SHA-512);
* ``listener.name.<listener>.<mechanism>.sasl.jaas.config``, one JAAS entry per enabled mechanism
  (``kafka_controller.security.jaas``): PLAIN's ``PlainLoginModule`` lists its users as
  ``user_<name>="<password>"``; SCRAM's ``ScramLoginModule`` takes its users from ZooKeeper
  (``kafka_controller.security.credentials``). ``username``/``password`` are the broker's own
  credentials for the inter-broker listener. The un-prefixed ``sasl.jaas.config`` is ignored on a
  broker, with a warning, as Kafka ignores it;
* ``sasl.mechanism.inter.broker.protocol``: the mechanism of the broker's own connections when the
  inter-broker (or control-plane) listener is SASL_*; it must be enabled there.

A connection's life, as Kafka's: optionally one ApiVersions request (answered with the broker's
full table), then SaslHandshake (v0 or v1). A mechanism not enabled gets UNSUPPORTED_SASL_MECHANISM
with the enabled list and the connection ends. After v1, every SASL token comes in a
SaslAuthenticate request (v0-2); a failure is answered with SASL_AUTHENTICATION_FAILED and Kafka's
message (PLAIN: "Authentication failed: Invalid username or password"; SCRAM: "Authentication failed
during authentication due to invalid credentials with SASL mechanism <M>"), and the connection
ends with the next frame. After v0 the tokens are raw length-prefixed bytes and a failure closes
the connection without an answer. Any other request before authentication closes the connection.
Every failure is logged (INFO) with the peer, the listener and the mechanism; never a user's
password, nor the token that carried it.

A refused exchange says ``failed``: the transport then holds the answer (or the close) for
``connection.failed.authentication.delay.ms`` (Kafka's default 100) on the network thread, never a
handler thread, and closes the connection once it is written, as Kafka's ``Selector`` does.

Deviation from Kafka 2.8: no re-authentication (KIP-368: ``connections.max.reauth.ms`` is 0,
Kafka's default, so the session lifetime is always 0).
"""

from __future__ import annotations

import enum
import hmac
import logging
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from kafka_controller.domain.errors import InvalidArgumentError
from kafka_controller.security import jaas
from kafka_controller.security import sasl_wire as wire
from kafka_controller.security.credentials import ScramCredentialCache
from kafka_controller.security.listeners import ListenerConfig
from kafka_controller.security.scram import MECHANISMS, ScramClient, ScramError, ScramServer
from kafka_controller.security.tls import PREFIX
from kafka_controller.transport import framing
from kafka_controller.transport.connection import ANONYMOUS, Authenticator
from kafka_controller.transport.errors import TransportConnectionError
from kafka_controller.transport.server import current_peer

log = logging.getLogger(__name__)

PLAIN = "PLAIN"
SUPPORTED_MECHANISMS = (PLAIN, *MECHANISMS)
DEFAULT_MECHANISMS = "GSSAPI"  # Kafka's default for both settings
ENABLED_MECHANISMS = "sasl.enabled.mechanisms"
INTER_BROKER_MECHANISM = "sasl.mechanism.inter.broker.protocol"
JAAS_CONFIG = "sasl.jaas.config"
PLAIN_FAILURE = "Authentication failed: Invalid username or password"
CLIENT_ID = "kafka-controller-broker"
#: ``api_versions(payload) -> answer``: the broker's own ApiVersions answer (Kafka's
#: ``apiVersionSupplier``), for a client that asks before it authenticates.
ApiVersionsAnswer = Callable[[bytes], bytes | None]


def scram_failure(mechanism: str) -> str:
    return (
        "Authentication failed during authentication due to invalid credentials "
        f"with SASL mechanism {mechanism}"
    )


class SaslAuthenticationError(Exception):
    """The mechanism refused the peer: ``message`` is what the client is told, ``reason`` (never a
    secret) what the log adds."""

    def __init__(self, message: str, reason: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.reason = reason

    def __str__(self) -> str:
        return self.message

    @property
    def logged(self) -> str:
        return f"{self.message} ({self.reason})" if self.reason else self.message


# -- mechanisms (server side) ---------------------------------------------------------------------------
class PlainServer:
    """Kafka's ``PlainSaslServer`` with ``PlainServerCallbackHandler``: ``[authzid] NUL user NUL
    password`` checked against the JAAS entry's ``user_<name>`` in constant time."""

    mechanism = PLAIN

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self.username: str | None = None
        self.complete = False

    def evaluate(self, message: bytes) -> bytes:
        parts = message.split(b"\0")
        if len(parts) != 3:
            raise SaslAuthenticationError("Invalid SASL/PLAIN response: expected 3 tokens")
        try:
            authzid, user, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError:
            raise SaslAuthenticationError("Invalid SASL/PLAIN response: not UTF-8") from None
        if not user:
            raise SaslAuthenticationError("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationError("Authentication failed: password not specified")
        expected = self._users.get(user)
        # compare even for an unknown user, so the time taken does not tell who exists
        matches = hmac.compare_digest(
            password.encode(), (expected if expected is not None else "\0").encode()
        )
        if expected is None or not matches:
            raise SaslAuthenticationError(PLAIN_FAILURE)
        if authzid and authzid != user:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different from username"
            )
        self.username = user
        self.complete = True
        return b""


class _Scram:
    """``ScramServer`` behind the same face as ``PlainServer``: every refusal is Kafka's fixed text."""

    def __init__(self, mechanism: str, cache: ScramCredentialCache) -> None:
        self.mechanism = mechanism
        self._server = ScramServer(mechanism, lambda user: cache.get(mechanism, user))

    @property
    def username(self) -> str | None:
        return self._server.username

    @property
    def complete(self) -> bool:
        return self._server.complete

    def evaluate(self, message: bytes) -> bytes:
        try:
            return self._server.evaluate(message)
        except ScramError as e:  # the client is told Kafka's fixed text; the log says why
            raise SaslAuthenticationError(scram_failure(self.mechanism), str(e)) from e


# -- the listener's settings -----------------------------------------------------------------------------
@dataclass(frozen=True)
class SaslServerSettings:
    """One SASL listener's mechanisms and PLAIN users (passwords kept out of ``repr``)."""

    listener: str
    mechanisms: tuple[str, ...]
    plain_users: Mapping[str, str] = field(default_factory=dict, repr=False)
    credentials: ScramCredentialCache = field(default_factory=ScramCredentialCache, repr=False)
    api_versions: ApiVersionsAnswer | None = field(default=None, repr=False)

    def mechanism(self, name: str) -> PlainServer | _Scram:
        if name == PLAIN:
            return PlainServer(self.plain_users)
        return _Scram(name, self.credentials)


def _setting(props: Mapping[str, str], listener: str, key: str) -> str | None:
    prefixed = props.get(f"{PREFIX}{listener.lower()}.{key}")
    return prefixed if prefixed is not None else props.get(key)


def enabled_mechanisms(props: Mapping[str, str], listener: ListenerConfig) -> tuple[str, ...]:
    text = _setting(props, listener.name, ENABLED_MECHANISMS)
    names = tuple(dict.fromkeys(m.strip() for m in (text or DEFAULT_MECHANISMS).split(",") if m.strip()))
    unsupported = [m for m in names if m not in SUPPORTED_MECHANISMS]
    if unsupported or not names:
        raise InvalidArgumentError(
            f"listener {listener.name}: {ENABLED_MECHANISMS}={text or DEFAULT_MECHANISMS} names "
            f"{', '.join(unsupported) or 'nothing'}; supported: {', '.join(SUPPORTED_MECHANISMS)}"
        )
    return names


def jaas_key(listener: ListenerConfig, mechanism: str) -> str:
    return f"{PREFIX}{listener.name.lower()}.{mechanism.lower()}.{JAAS_CONFIG}"


def jaas_entry(props: Mapping[str, str], listener: ListenerConfig, mechanism: str) -> jaas.JaasEntry:
    key = jaas_key(listener, mechanism)
    text = props.get(key)
    if text is None:
        raise InvalidArgumentError(
            f"listener {listener.name}: SASL mechanism {mechanism} needs {key} "
            f"(a JAAS entry: {_module(mechanism)} required ...;)"
        )
    entry = jaas.parse(text, key)
    if entry.login_module != _module(mechanism):
        raise InvalidArgumentError(
            f"{key}: expected login module {_module(mechanism)}, not {entry.login_module}"
        )
    return entry


def _module(mechanism: str) -> str:
    return jaas.PLAIN_LOGIN_MODULE if mechanism == PLAIN else jaas.SCRAM_LOGIN_MODULE


def server_settings(
    props: Mapping[str, str],
    listener: ListenerConfig,
    credentials: ScramCredentialCache | None = None,
    api_versions: ApiVersionsAnswer | None = None,
) -> SaslServerSettings:
    """A SASL listener's settings, checked (a one-line error names what is wrong)."""
    if props.get(JAAS_CONFIG) is not None:
        log.warning(
            "%s without a listener.name.<listener>.<mechanism>. prefix is ignored on a broker, as Kafka "
            "ignores it",
            JAAS_CONFIG,
        )
    mechanisms = enabled_mechanisms(props, listener)
    users: dict[str, str] = {}
    for mechanism in mechanisms:
        entry = jaas_entry(props, listener, mechanism)
        if mechanism == PLAIN:
            users = {k[len("user_") :]: v for k, v in entry.options.items() if k.startswith("user_")}
    return SaslServerSettings(
        listener.name, mechanisms, users, credentials or ScramCredentialCache(), api_versions
    )


# -- the server authenticator ----------------------------------------------------------------------------
class _State(enum.Enum):
    HANDSHAKE_OR_VERSIONS = "waiting for ApiVersions or SaslHandshake"
    HANDSHAKE = "waiting for SaslHandshake"
    AUTHENTICATE = "authenticating"
    COMPLETE = "complete"
    FAILED = "failed"


class SaslServerAuthenticator:
    """One connection's SASL exchange (an ``Authenticator``): ``receive`` gets each frame read
    before ``complete`` on a request-handler thread, one at a time, and returns the answer."""

    def __init__(self, settings: SaslServerSettings) -> None:
        self._settings = settings
        self._state = _State.HANDSHAKE_OR_VERSIONS
        self._legacy = False  # SaslHandshake v0: raw tokens
        self._mechanism: PlainServer | _Scram | None = None
        self.principal = ANONYMOUS

    @property
    def complete(self) -> bool:
        return self._state is _State.COMPLETE

    @property
    def failed(self) -> bool:
        """The exchange is over without success: the transport closes the connection once the
        refusal (if any) is written."""
        return self._state is _State.FAILED

    def receive(self, payload: bytearray) -> bytes | None:
        try:
            if self._state is _State.AUTHENTICATE and self._legacy:
                return self._token(bytes(payload))
            reader = wire.SaslReader(payload)
            header = wire.read_header(reader)
            return self._request(header, reader, payload)
        except wire.SaslFrameError as e:
            self._fail(f"invalid request before authentication: {e}")
        return None

    def _request(self, header: wire.Header, reader: wire.SaslReader, payload: bytearray) -> bytes | None:
        key, version, cid = header.api_key, header.api_version, header.correlation_id
        state = self._state
        if key == wire.API_VERSIONS and state is _State.HANDSHAKE_OR_VERSIONS:
            answer = self._settings.api_versions(bytes(payload)) if self._settings.api_versions else None
            if answer is not None and version <= 3:
                self._state = _State.HANDSHAKE
            return answer
        if key == wire.SASL_HANDSHAKE and state in (_State.HANDSHAKE_OR_VERSIONS, _State.HANDSHAKE):
            if not wire.HANDSHAKE_VERSIONS[0] <= version <= wire.HANDSHAKE_VERSIONS[1]:
                self._fail(f"SaslHandshake v{version} is not supported")
                return None
            return self._handshake(cid, version, wire.read_handshake(reader))
        if key == wire.SASL_AUTHENTICATE and state is _State.AUTHENTICATE:
            if not wire.AUTHENTICATE_VERSIONS[0] <= version <= wire.AUTHENTICATE_VERSIONS[1]:
                self._fail(f"SaslAuthenticate v{version} is not supported")
                return None
            return self._authenticate(cid, version, wire.read_authenticate(reader, version))
        if key == wire.SASL_HANDSHAKE and state is _State.AUTHENTICATE and version <= 1:
            self._fail("a second SaslHandshake")
            return wire.handshake_response(cid, wire.ILLEGAL_SASL_STATE, ())
        self._fail(f"api key {key} v{version} is not allowed while {state.value}")
        return None

    def _handshake(self, cid: int, version: int, mechanism: str) -> bytes:
        enabled = self._settings.mechanisms
        if mechanism not in enabled:
            self._fail(f"unsupported SASL mechanism {mechanism[:64]!r}")
            return wire.handshake_response(cid, wire.UNSUPPORTED_SASL_MECHANISM, enabled)
        self._mechanism = self._settings.mechanism(mechanism)
        self._legacy = version == 0
        self._state = _State.AUTHENTICATE
        return wire.handshake_response(cid, wire.NONE, enabled)

    def _evaluate(self, token: bytes) -> bytes:
        mechanism = self._mechanism
        assert mechanism is not None
        answer = mechanism.evaluate(token)
        if mechanism.complete:
            self.principal = f"User:{mechanism.username}"
            self._state = _State.COMPLETE
            log.debug(
                "%s authenticated as %s with %s on listener %s",
                current_peer(),
                self.principal,
                mechanism.mechanism,
                self._settings.listener,
            )
        return answer

    def _token(self, token: bytes) -> bytes | None:
        """After SaslHandshake v0: a raw token in, a raw token out; a refusal closes at once."""
        try:
            return self._evaluate(token)
        except SaslAuthenticationError as e:
            self._fail(e.logged)
            return None

    def _authenticate(self, cid: int, version: int, token: bytes) -> bytes:
        try:
            answer = self._evaluate(token)
        except SaslAuthenticationError as e:
            self._fail(e.logged)
            return wire.authenticate_response(cid, version, wire.SASL_AUTHENTICATION_FAILED, str(e), b"")
        return wire.authenticate_response(cid, version, wire.NONE, None, answer)

    def _fail(self, why: str) -> None:
        mechanism = self._mechanism.mechanism if self._mechanism is not None else "none chosen"
        if self._state is not _State.FAILED:
            log.info(
                "Failed authentication with %s on listener %s (SASL mechanism %s): %s",
                current_peer(),
                self._settings.listener,
                mechanism,
                why,
            )
        self._state = _State.FAILED


def listener_authenticator_factory(
    props: Mapping[str, str],
    listener: ListenerConfig,
    credentials: object = None,
    api_versions: ApiVersionsAnswer | None = None,
) -> Callable[[], Authenticator]:
    """The seam ``kafka_controller.security.listeners.sasl_factory`` calls for each SASL listener:
    a factory of fresh authenticators. ``credentials`` is the broker's ``ScramCredentialCache``
    (anything else: an empty cache, so SCRAM refuses everyone)."""
    cache = credentials if isinstance(credentials, ScramCredentialCache) else ScramCredentialCache()
    settings = server_settings(props, listener, cache, api_versions)

    def make() -> Authenticator:
        return SaslServerAuthenticator(settings)

    return make


# -- the client side ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SaslClientSettings:
    mechanism: str
    username: str
    password: str = field(repr=False)


def client_settings(props: Mapping[str, str], listener: ListenerConfig) -> SaslClientSettings:
    """The broker's own credentials on ``listener``: ``sasl.mechanism.inter.broker.protocol`` and
    the username/password options of that mechanism's JAAS entry on the listener."""
    mechanism = (props.get(INTER_BROKER_MECHANISM) or DEFAULT_MECHANISMS).strip()
    if mechanism not in SUPPORTED_MECHANISMS:
        raise InvalidArgumentError(
            f"{INTER_BROKER_MECHANISM}={mechanism} is not supported: "
            f"use one of {', '.join(SUPPORTED_MECHANISMS)}"
        )
    enabled = enabled_mechanisms(props, listener)
    if mechanism not in enabled:
        raise InvalidArgumentError(
            f"{INTER_BROKER_MECHANISM}={mechanism} must be enabled on the inter-broker listener "
            f"{listener.name} ({ENABLED_MECHANISMS}={','.join(enabled)})"
        )
    entry = jaas_entry(props, listener, mechanism)
    username, password = entry.options.get("username"), entry.options.get("password")
    if not username or password is None:
        raise InvalidArgumentError(
            f"{jaas_key(listener, mechanism)} needs username and password: the broker's own "
            "credentials on the inter-broker listener"
        )
    return SaslClientSettings(mechanism, username, password)


def client_exchange(sock: socket.socket, settings: SaslClientSettings, max_frame_bytes: int = 524288) -> None:
    """SaslHandshake v1 then SaslAuthenticate v1 frames on a fresh blocking socket; raises
    ``TransportConnectionError`` when the broker refuses (the caller retries after a back-off)."""
    where = _peer_name(sock)

    def call(cid: int, payload: bytes) -> wire.SaslReader:
        framing.write_frame(sock, payload)
        answer = framing.read_frame(sock, max_frame_bytes)
        if answer is None:
            raise TransportConnectionError(f"{where} closed the connection during SASL authentication")
        return wire.SaslReader(answer)

    try:
        reader = call(0, wire.handshake_request(0, settings.mechanism, CLIENT_ID))
        _, error, enabled = wire.read_handshake_response(reader)
        if error:
            raise TransportConnectionError(
                f"{where} does not enable SASL mechanism {settings.mechanism} "
                f"(it offers {', '.join(enabled)})"
            )
        if settings.mechanism == PLAIN:
            token = f"\0{settings.username}\0{settings.password}".encode()
            _authenticate(call, 1, token, where)
            return
        client = ScramClient(settings.mechanism, settings.username, settings.password)
        server_first = _authenticate(call, 1, client.first(), where)
        server_final = _authenticate(call, 2, client.final(server_first), where)
        client.verify(server_final)
    except (wire.SaslFrameError, ScramError) as e:
        raise TransportConnectionError(f"SASL authentication with {where} failed: {e}") from None


def _authenticate(call: Callable[[int, bytes], wire.SaslReader], cid: int, token: bytes, where: str) -> bytes:
    _, error, message, answer = wire.read_authenticate_response(
        call(cid, wire.authenticate_request(cid, token, CLIENT_ID))
    )
    if error:
        raise TransportConnectionError(f"SASL authentication with {where} failed: {message or error}")
    return answer


def _peer_name(sock: socket.socket) -> str:
    try:
        host, port = sock.getpeername()[:2]
    except OSError:
        return "the broker"
    return f"{host}:{port}"


def inter_broker_authenticate(
    props: Mapping[str, str], listener: ListenerConfig
) -> Callable[[socket.socket], None]:
    """The seam ``BrokerListeners.client_authenticate`` calls when the listener is SASL_*."""
    settings = client_settings(props, listener)

    def authenticate(sock: socket.socket) -> None:
        client_exchange(sock, settings)

    return authenticate


__all__ = [
    "PLAIN",
    "SUPPORTED_MECHANISMS",
    "PlainServer",
    "SaslAuthenticationError",
    "SaslClientSettings",
    "SaslServerAuthenticator",
    "SaslServerSettings",
    "client_exchange",
    "client_settings",
    "inter_broker_authenticate",
    "listener_authenticator_factory",
    "scram_failure",
    "server_settings",
]
