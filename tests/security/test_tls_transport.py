"""TLS in the listener's selector loop, byte by byte: requests that arrive together in one TLS
write are all answered (the second waits decrypted, where the selector cannot see it); a frame
split over many tiny records is reassembled; a large answer goes out whole through a full send
buffer; a client without a certificate on an SSL listener is ``User:ANONYMOUS``; a peer that
stops mid-handshake is closed at ``connections.max.idle.ms`` and named."""

from __future__ import annotations

import logging
import socket
import ssl
import struct
from collections.abc import Iterator

import pytest

from kafka_controller.security.listeners import BrokerListeners
from kafka_controller.transport import framing
from kafka_controller.transport.codec import DEFAULT_APIS
from kafka_controller.transport.limits import SocketSettings
from kafka_controller.transport.server import TransportServer, current_connection
from tests.broker.helpers import wait_until
from tests.security.conftest import Pki

APIS = DEFAULT_APIS.copy()
APIS.register_json("Echo")


def _handler(api: str, request: object) -> object:
    conn = current_connection()
    assert conn is not None
    return {"echo": request, "principal": conn.principal}


@pytest.fixture
def server(pki: Pki) -> Iterator[TransportServer]:
    listeners = BrokerListeners.of(
        {"listeners": "SSL://127.0.0.1:0", "security.inter.broker.protocol": "SSL", **pki.broker_tls()}
    )
    settings = SocketSettings(connections_max_idle_ms=1500)
    srv = TransportServer("", 0, _handler, listeners=listeners.endpoints(), apis=APIS, settings=settings)
    srv.start()
    yield srv
    srv.stop()


def _tls(pki: Pki, port: int) -> ssl.SSLSocket:
    context = ssl.create_default_context(cafile=str(pki.truststore))
    raw = socket.create_connection(("127.0.0.1", port), timeout=10)
    return context.wrap_socket(raw, server_hostname="127.0.0.1")


def _frame(cid: int, body: object) -> bytes:
    payload = framing.encode_request("Echo", cid, body)
    return struct.pack(">I", len(payload)) + payload


def _answer(sock: socket.socket) -> tuple[int, object]:
    payload = framing.read_frame(sock, 1 << 30)
    assert payload is not None
    cid, body, error = framing.decode_response(payload)
    assert error is None
    return cid, body


def test_requests_sent_together_are_all_answered_in_order(server: TransportServer, pki: Pki) -> None:
    with _tls(pki, server.port) as sock:
        sock.sendall(b"".join(_frame(cid, {"n": cid}) for cid in range(5)))  # one TLS write
        answers = [_answer(sock) for _ in range(5)]
    assert [cid for cid, _ in answers] == [0, 1, 2, 3, 4]
    assert [body["echo"] for _, body in answers] == [{"n": n} for n in range(5)]  # type: ignore[index]


def test_a_frame_in_tiny_records_and_a_big_answer(server: TransportServer, pki: Pki) -> None:
    big = "x" * (3 << 20)  # answered in many records, through a send buffer that fills
    frame = _frame(7, {"big": big})
    with _tls(pki, server.port) as sock:
        for i in range(0, 64):  # the first 64 bytes one TLS record at a time
            sock.sendall(frame[i : i + 1])
        sock.sendall(frame[64:])
        cid, body = _answer(sock)
    assert cid == 7 and body["echo"] == {"big": big}  # type: ignore[index]
    assert body["principal"] == "User:ANONYMOUS"  # type: ignore[index]  # no client certificate


def test_a_peer_silent_mid_handshake_is_closed_when_idle_and_named(
    server: TransportServer, caplog: pytest.LogCaptureFixture
) -> None:
    with (
        caplog.at_level(logging.INFO),
        socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock,
    ):
        sock.sendall(b"\x16\x03\x01")  # the start of a ClientHello, and then nothing
        host, port = sock.getsockname()
        wait_until(lambda: server.connection_count == 1, "the connection to be counted")
        assert sock.recv(1) == b""  # closed by the server, not hanging
    wait_until(
        lambda: [
            r for r in caplog.records if f"{host}:{port}" in r.getMessage() and "idle" in r.getMessage()
        ],
        "one line naming the idle peer",
    )
    wait_until(lambda: server.connection_count == 0, "its slot to be freed")


def test_the_channel_keeps_ciphertext_the_socket_cannot_take_until_flushed(pki: Pki) -> None:
    """What the network thread relies on: ``send`` takes plaintext as soon as it is encrypted,
    ``wants_write`` says ciphertext still waits for the socket, ``flush`` sends it."""
    import threading

    from kafka_controller.transport.tls import TlsChannel

    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(pki.keystore, password=pki.key_password)
    client_context = ssl.create_default_context(cafile=str(pki.truststore))
    ours, theirs = socket.socketpair()
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    ours.setblocking(False)
    channel = TlsChannel(ours, server_context)
    client: list[ssl.SSLSocket] = []
    shaker = threading.Thread(
        target=lambda: client.append(client_context.wrap_socket(theirs, server_hostname="127.0.0.1"))
    )
    shaker.start()
    wait_until(channel.handshake, "the handshake")
    shaker.join(10)
    (peer,) = client

    data = bytes(range(256)) * 4096  # 1 MiB, far more than the socket pair buffers
    taken, refused = 0, 0
    while taken < len(data) and refused < 1000:
        try:
            taken += channel.send(data[taken : taken + 65536])
        except BlockingIOError:
            refused += 1
            break
    assert channel.wants_write  # the peer reads nothing yet: ciphertext waits here
    received = bytearray()
    reader = threading.Thread(target=lambda: received.extend(_read_exactly(peer, len(data))))
    reader.start()
    while taken < len(data) or channel.wants_write:
        try:
            if channel.flush() and taken < len(data):
                taken += channel.send(data[taken : taken + 65536])
        except BlockingIOError:
            wait_until(lambda: not _full(ours), "room in the socket", 10)
    reader.join(30)
    assert bytes(received) == data and not channel.wants_write
    peer.close()
    ours.close()


def _full(sock: socket.socket) -> bool:
    import select

    return not select.select([], [sock], [], 0.05)[1]


def _read_exactly(sock: ssl.SSLSocket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(min(65536, n - len(out)))
        if not chunk:
            break
        out += chunk
    return bytes(out)


def test_requested_client_auth_names_a_client_with_a_certificate_and_lets_others_in_anonymously(
    pki: Pki,
) -> None:
    listeners = BrokerListeners.of(
        {
            "listeners": "SSL://127.0.0.1:0",
            "security.inter.broker.protocol": "SSL",
            **pki.broker_tls(**{"listener.name.ssl.ssl.client.auth": "requested"}),
        }
    )
    srv = TransportServer("", 0, _handler, listeners=listeners.endpoints(), apis=APIS).start()
    try:
        principals = []
        for certificate in (True, False):
            context = ssl.create_default_context(cafile=str(pki.truststore))
            if certificate:
                context.load_cert_chain(pki.client_cert, pki.client_key)
            raw = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
            with context.wrap_socket(raw, server_hostname="127.0.0.1") as sock:
                sock.sendall(_frame(1, {}))
                principals.append(_answer(sock)[1]["principal"])  # type: ignore[index]
        assert principals == ["User:CN=client,O=org", "User:ANONYMOUS"]
    finally:
        srv.stop()
