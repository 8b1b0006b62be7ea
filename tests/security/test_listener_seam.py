"""The seam SASL plugs into: a SASL_PLAINTEXT or SASL_SSL listener gives each connection the
authenticator its factory makes (after the TLS handshake on SASL_SSL), every frame goes to it
until it is complete, and then the peer's requests reach the handlers with its principal; without
a SASL implementation a SASL listener is refused at start, saying so. The inter-broker client
runs its ``authenticate`` exchange on each new connection before the first request."""

from __future__ import annotations

import socket
import ssl
import struct

import pytest

from kafka_controller.domain.errors import InvalidArgumentError
from kafka_controller.security.listeners import BrokerListeners, ListenerConfig
from kafka_controller.transport import framing
from kafka_controller.transport.client import TransportClient
from kafka_controller.transport.codec import DEFAULT_APIS
from kafka_controller.transport.errors import TransportConnectionError
from kafka_controller.transport.server import TransportServer, current_connection
from tests.security.conftest import Pki

APIS = DEFAULT_APIS.copy()
APIS.register_json("Ping")

SETTINGS = {
    "listeners": "SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0,SSL://127.0.0.1:0",
    "security.inter.broker.protocol": "SSL",
}


class PasswordAuthenticator:
    """A stand-in mechanism: the first frame must be b"let-me-in"."""

    def __init__(self, listener: ListenerConfig) -> None:
        self.listener = listener
        self.complete = False
        self.principal = "User:ANONYMOUS"

    def receive(self, payload: bytearray) -> bytes | None:
        if bytes(payload) != b"let-me-in":
            return None
        self.complete = True
        self.principal = f"User:sasl-{self.listener.name.lower()}"
        return b"welcome"


def _exchange(sock: socket.socket, payload: bytes) -> bytes | None:
    sock.sendall(struct.pack(">I", len(payload)) + payload)
    header = framing.recv_exact(sock, 4)
    if header is None:
        return None
    (length,) = struct.unpack(">I", header)
    body = framing.recv_exact(sock, length)
    return None if body is None else bytes(body)


def test_without_sasl_a_sasl_listener_is_refused_at_start(pki: Pki) -> None:
    listeners = BrokerListeners.of({**SETTINGS, **pki.broker_tls()})
    with pytest.raises(
        InvalidArgumentError, match="SASL_PLAINTEXT is SASL_PLAINTEXT, but SASL is not available"
    ):
        listeners.endpoints(None)


def test_sasl_listeners_authenticate_with_the_factorys_authenticator_then_serve(pki: Pki) -> None:
    listeners = BrokerListeners.of({**SETTINGS, **pki.broker_tls()})
    made: list[str] = []

    def sasl(listener: ListenerConfig):  # type: ignore[no-untyped-def]
        made.append(listener.name)
        return lambda: PasswordAuthenticator(listener)

    seen: list[tuple[str, str]] = []

    def handler(api: str, request: object) -> object:
        conn = current_connection()
        assert conn is not None
        seen.append((conn.listener, conn.principal))
        return {"ok": True}

    endpoints = listeners.endpoints(sasl)
    server = TransportServer("", 0, handler, listeners=endpoints, name="seam", apis=APIS).start()
    try:
        assert made == ["SASL_PLAINTEXT", "SASL_SSL"]
        context = ssl.create_default_context(cafile=str(pki.truststore))
        for name, tls in (("SASL_PLAINTEXT", False), ("SASL_SSL", True)):
            raw = socket.create_connection(("127.0.0.1", server.ports[name]), timeout=10)
            sock = context.wrap_socket(raw, server_hostname="127.0.0.1") if tls else raw
            with sock:
                assert _exchange(sock, b"let-me-in") == b"welcome"
                answer = _exchange(sock, framing.encode_request("Ping", 1, {}))
                assert answer is not None and b'"ok":true' in answer
        assert seen == [("SASL_PLAINTEXT", "User:sasl-sasl_plaintext"), ("SASL_SSL", "User:sasl-sasl_ssl")]
        # a wrong first frame: the authenticator says no, the connection closes, no handler runs
        with socket.create_connection(("127.0.0.1", server.ports["SASL_PLAINTEXT"]), timeout=10) as sock:
            assert _exchange(sock, b"guess") is None
        assert len(seen) == 2
    finally:
        server.stop()


def test_the_client_authenticates_each_new_connection_before_its_first_request() -> None:
    exchanges: list[int] = []

    def handler(api: str, request: object) -> object:
        conn = current_connection()
        assert conn is not None
        return {"principal": conn.principal}

    def authenticator() -> PasswordAuthenticator:
        return PasswordAuthenticator(ListenerConfig("SASL_PLAINTEXT", "127.0.0.1", 0, "SASL_PLAINTEXT"))

    def authenticate(sock: socket.socket) -> None:
        exchanges.append(1)
        if _exchange(sock, b"let-me-in") != b"welcome":
            raise TransportConnectionError("refused")

    server = TransportServer("127.0.0.1", 0, handler, authenticator_factory=authenticator, apis=APIS).start()
    client = TransportClient("127.0.0.1", server.port, timeout_s=10, authenticate=authenticate, apis=APIS)
    try:
        assert client.request("Ping", {}) == {"principal": "User:sasl-sasl_plaintext"}
        assert client.request("Ping", {}) == {"principal": "User:sasl-sasl_plaintext"}
        assert exchanges == [1]  # once per connection, not per request
    finally:
        client.close()
        server.stop()
