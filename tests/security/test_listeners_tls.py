"""A broker with a PLAINTEXT and two TLS listeners (one requiring a client certificate), as Kafka's
own clients see it: the registration carries every endpoint in Kafka's format; kcat,
confluent-kafka and kafka-python list metadata over TLS and over mTLS and each sees the endpoints
of the listener it came in on; each is refused without TLS on a TLS listener and without a
client certificate where one is required; an mTLS client's requests are audited with its
principal ``User:CN=client,O=org``; a plaintext peer on a TLS listener costs the network thread
nothing (it keeps serving others)."""

from __future__ import annotations

import json
import shutil
import socket
import sqlite3
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kafka_controller.broker.server import BrokerServer
from kafka_controller.dryrun.memory_zk import InMemoryZooKeeper
from tests.broker.helpers import wait_until
from tests.security.conftest import Pki

pytestmark = [pytest.mark.clients]

LISTENERS = {
    "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,MTLS://127.0.0.1:0",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL",
    "listener.name.mtls.ssl.client.auth": "required",
}


@pytest.fixture
def broker(
    pki: Pki, start_broker: Callable[..., BrokerServer], tmp_path: Path
) -> Iterator[tuple[BrokerServer, InMemoryZooKeeper, Path]]:
    tree = InMemoryZooKeeper()
    db = tmp_path / "audit.db"
    server = start_broker(
        1,
        {**LISTENERS, **pki.broker_tls()},
        tree,
        audit_url=f"sqlite:///{db}",
        audit_spool_dir=tmp_path / "spool",
    )
    wait_until(lambda: server.controller.is_active, "broker 1 to become controller")
    yield server, tree, db


def _address(server: BrokerServer, listener: str) -> str:
    return f"127.0.0.1:{server.transport.ports[listener]}"


def test_every_endpoint_is_registered_in_kafkas_format(
    broker: tuple[BrokerServer, InMemoryZooKeeper, Path],
) -> None:
    server, tree, _ = broker
    got = tree.get("/brokers/ids/1")
    assert got is not None and got[0] is not None
    doc = json.loads(got[0])
    ports = server.transport.ports
    assert doc["version"] == 5
    assert doc["endpoints"] == [
        f"PLAINTEXT://127.0.0.1:{ports['PLAINTEXT']}",
        f"SSL://127.0.0.1:{ports['SSL']}",
        f"MTLS://127.0.0.1:{ports['MTLS']}",
    ]
    assert doc["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT", "SSL": "SSL", "MTLS": "SSL"}
    assert (doc["host"], doc["port"]) == ("127.0.0.1", ports["PLAINTEXT"])  # the first PLAINTEXT one
    assert len(set(ports.values())) == 3


# -- kcat -------------------------------------------------------------------------------------------
def _kcat(bootstrap: str, *settings: str, wait_s: int = 10) -> subprocess.CompletedProcess[str]:
    kcat = shutil.which("kcat")
    assert kcat is not None, "kcat is not installed (Debian's kcat package; .ci/bootstrap installs it)"
    args = [kcat, "-L", "-J", "-b", bootstrap, "-m", str(wait_s)]
    for setting in settings:
        args += ["-X", setting]
    return subprocess.run(args, capture_output=True, text=True, timeout=wait_s + 30)


def _kcat_brokers(result: subprocess.CompletedProcess[str]) -> list[str]:
    assert result.returncode == 0, result.stderr
    return [b["name"] for b in json.loads(result.stdout)["brokers"]]


def test_kcat_over_tls_and_mtls_sees_the_endpoints_of_its_listener(
    broker: tuple[BrokerServer, InMemoryZooKeeper, Path], pki: Pki
) -> None:
    server, _, _ = broker
    tls = ("security.protocol=ssl", f"ssl.ca.location={pki.truststore}")
    client = (f"ssl.certificate.location={pki.client_cert}", f"ssl.key.location={pki.client_key}")
    assert _kcat_brokers(_kcat(_address(server, "PLAINTEXT"))) == [_address(server, "PLAINTEXT")]
    assert _kcat_brokers(_kcat(_address(server, "SSL"), *tls)) == [_address(server, "SSL")]
    assert _kcat_brokers(_kcat(_address(server, "MTLS"), *tls, *client)) == [_address(server, "MTLS")]


def test_kcat_is_refused_without_tls_and_without_a_client_certificate(
    broker: tuple[BrokerServer, InMemoryZooKeeper, Path], pki: Pki
) -> None:
    server, _, _ = broker
    tls = ("security.protocol=ssl", f"ssl.ca.location={pki.truststore}")
    stranger = (f"ssl.certificate.location={pki.stranger_cert}", f"ssl.key.location={pki.stranger_key}")
    for result in (
        _kcat(_address(server, "SSL"), wait_s=3),
        _kcat(_address(server, "MTLS"), *tls, wait_s=3),
        _kcat(_address(server, "MTLS"), *tls, *stranger, wait_s=3),
    ):
        assert result.returncode != 0 and '"brokers"' not in result.stdout


# -- confluent-kafka --------------------------------------------------------------------------------
def _confluent(bootstrap: str, **settings: Any) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap, "client.id": "tls-probe", **settings})


def test_confluent_kafka_over_tls_and_mtls_and_its_principal_is_audited(
    broker: tuple[BrokerServer, InMemoryZooKeeper, Path], pki: Pki
) -> None:
    from confluent_kafka.admin import NewTopic

    server, _, db = broker
    tls = {"security.protocol": "ssl", "ssl.ca.location": str(pki.truststore)}
    metadata = _confluent(_address(server, "SSL"), **tls).list_topics(timeout=15)
    assert [f"{b.host}:{b.port}" for b in metadata.brokers.values()] == [_address(server, "SSL")]

    mtls = {**tls, "ssl.certificate.location": str(pki.client_cert), "ssl.key.location": str(pki.client_key)}
    admin = _confluent(_address(server, "MTLS"), **mtls)
    metadata = admin.list_topics(timeout=15)
    assert [f"{b.host}:{b.port}" for b in metadata.brokers.values()] == [_address(server, "MTLS")]
    for future in admin.create_topics([NewTopic("over-mtls", 1, 1)], request_timeout=15).values():
        future.result(timeout=30)

    def rows() -> list[dict[str, Any]]:
        try:
            with sqlite3.connect(db) as conn:
                conn.row_factory = sqlite3.Row
                return [
                    dict(r) for r in conn.execute("select * from operations where finished_ms is not null")
                ]
        except sqlite3.OperationalError:
            return []

    (row,) = wait_until(rows, "the CreateTopics operations row")
    assert row["kind"] == "CreateTopics" and row["client_id"] == "tls-probe"
    assert row["principal"] == "User:CN=client,O=org"


def test_confluent_kafka_is_refused_without_tls_and_without_a_client_certificate(
    broker: tuple[BrokerServer, InMemoryZooKeeper, Path], pki: Pki
) -> None:
    from confluent_kafka import KafkaException

    server, _, _ = broker
    tls = {"security.protocol": "ssl", "ssl.ca.location": str(pki.truststore)}
    for address, settings in ((_address(server, "SSL"), {}), (_address(server, "MTLS"), tls)):
        with pytest.raises(KafkaException):
            _confluent(address, **settings).list_topics(timeout=3)


# -- kafka-python -----------------------------------------------------------------------------------
def _kafka_python(bootstrap: str, **settings: Any) -> Any:
    from kafka.admin import KafkaAdminClient

    return KafkaAdminClient(
        bootstrap_servers=bootstrap, client_id="tls-probe", request_timeout_ms=10_000, **settings
    )


def test_kafka_python_over_tls_and_mtls(
    broker: tuple[BrokerServer, InMemoryZooKeeper, Path], pki: Pki
) -> None:
    server, _, _ = broker
    tls = {"security_protocol": "SSL", "ssl_cafile": str(pki.truststore)}
    mtls = {**tls, "ssl_certfile": str(pki.client_cert), "ssl_keyfile": str(pki.client_key)}
    for listener, settings in (("SSL", tls), ("MTLS", mtls)):
        admin = _kafka_python(_address(server, listener), **settings)
        try:
            assert admin.list_topics() == []
            brokers = [f"{b.host}:{b.port}" for b in admin._client.cluster.brokers()]
            assert brokers == [_address(server, listener)]
        finally:
            admin.close()


def test_kafka_python_is_refused_without_tls_and_without_a_client_certificate(
    broker: tuple[BrokerServer, InMemoryZooKeeper, Path], pki: Pki
) -> None:
    from kafka.errors import KafkaTimeoutError

    server, _, _ = broker
    tls = {"security_protocol": "SSL", "ssl_cafile": str(pki.truststore)}
    # KafkaTimeoutError (no bootstrap), not any KafkaError: a misspelt client setting is a
    # KafkaError too, raised before the client ever connects, which would pass untested
    for address, settings in ((_address(server, "SSL"), {}), (_address(server, "MTLS"), tls)):
        with pytest.raises(KafkaTimeoutError):
            _kafka_python(address, bootstrap_timeout_ms=3000, **settings).list_topics()
    # the same client with the credentials each listener wants is served (the control)
    mtls = {**tls, "ssl_certfile": str(pki.client_cert), "ssl_keyfile": str(pki.client_key)}
    for address, settings in ((_address(server, "SSL"), tls), (_address(server, "MTLS"), mtls)):
        admin = _kafka_python(address, bootstrap_timeout_ms=10_000, **settings)
        try:
            assert isinstance(admin.list_topics(), list)
        finally:
            admin.close()


# -- the network thread -----------------------------------------------------------------------------
def test_a_plaintext_peer_on_a_tls_listener_is_closed_and_named_and_others_are_served(
    broker: tuple[BrokerServer, InMemoryZooKeeper, Path], pki: Pki, caplog: pytest.LogCaptureFixture
) -> None:
    server, _, _ = broker
    # a Kafka ApiVersions v3 request (client id "probe"), in the clear, to the TLS listener
    with socket.create_connection(("127.0.0.1", server.transport.ports["SSL"]), timeout=10) as peer:
        peer.sendall(bytes.fromhex("0000000f 0012 0003 00000001 0005 70726f6265 00".replace(" ", "")))
        host, port = peer.getsockname()
        local = f"{host}:{port}"
        assert peer.recv(4096) == b""  # closed, not left hanging
    wait_until(
        lambda: [
            r for r in caplog.records if local in r.getMessage() and "TLS handshake failed" in r.getMessage()
        ],
        "one line naming the peer",
    )
    # a silent peer mid-handshake holds a connection, not the thread: TLS clients are still served
    with socket.create_connection(("127.0.0.1", server.transport.ports["SSL"]), timeout=10):
        tls = {"security.protocol": "ssl", "ssl.ca.location": str(pki.truststore)}
        client = _confluent(_address(server, "SSL"), **tls)
        assert client.list_topics(timeout=15).brokers
        # destroyed now, while its broker runs: left to the garbage collector, librdkafka's destroy
        # ran in the next test and held the GIL that test's in-process broker needed
        del client


def test_describe_configs_never_shows_the_key_password(
    broker: tuple[BrokerServer, InMemoryZooKeeper, Path], pki: Pki
) -> None:
    from confluent_kafka.admin import ConfigResource

    server, _, _ = broker
    tls = {"security.protocol": "ssl", "ssl.ca.location": str(pki.truststore)}
    admin = _confluent(_address(server, "SSL"), **tls)
    (future,) = admin.describe_configs([ConfigResource(ConfigResource.Type.BROKER, "1")]).values()
    entries = future.result(timeout=30)
    assert entries["ssl.truststore.location"].value == str(pki.truststore)  # static settings are shown
    assert all(entry.value != pki.key_password for entry in entries.values())
    assert "ssl.key.password" not in entries or entries["ssl.key.password"].value is None
