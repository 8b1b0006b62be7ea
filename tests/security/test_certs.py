"""The private CA ``cluster up --security ssl`` and the tests use: Kafka's PEM keystore (an
encrypted PKCS#8 key, then the chain) that loads only with its password, private files of mode
0600, certificates valid for their hosts and signed by the CA, and settings a broker accepts."""

from __future__ import annotations

import ssl
import stat
from pathlib import Path

import pytest

from kafka_controller.domain.errors import InvalidArgumentError
from kafka_controller.security import certs
from kafka_controller.security.listeners import BrokerListeners
from kafka_controller.security.tls import PrincipalMapper, ssl_principal


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_cluster_pki_files_load_as_kafka_expects_them(tmp_path: Path) -> None:
    pki = certs.make_cluster_pki(tmp_path / "pki", [1, 2])
    keystore = pki.keystores[1].read_text()
    assert keystore.startswith("-----BEGIN ENCRYPTED PRIVATE KEY-----")  # PKCS#8, as Kafka requires
    assert keystore.count("-----BEGIN CERTIFICATE-----") == 2  # the broker's, then the CA's
    assert _mode(pki.keystores[1]) == 0o600 and _mode(pki.client_key) == 0o600
    assert pki.key_password not in repr(pki)

    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(pki.keystores[2], password=pki.key_password)
    with pytest.raises(ssl.SSLError):
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(pki.keystores[2], password="wrong")

    settings = {"listeners": "SSL://127.0.0.1:0", "security.inter.broker.protocol": "SSL"}
    BrokerListeners.of({**settings, **pki.broker_settings(1)}).check()
    BrokerListeners.of({**settings, **pki.broker_settings(1, "SSL")}).check()
    with pytest.raises(InvalidArgumentError, match=r"needs ssl\.keystore\.location"):
        BrokerListeners.of({**settings, **pki.broker_settings(1, "OTHER")}).check()

    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    client = x509.load_pem_x509_certificate(pki.client_certificate.read_bytes())
    der = client.public_bytes(serialization.Encoding.DER)
    assert ssl_principal(der, PrincipalMapper()) == "User:CN=admin,O=kafka-controller"
    assert pki.client_settings(certificate=True)["ssl.certificate.location"] == str(pki.client_certificate)


def test_broker_certificates_verify_against_the_ca_for_their_hosts_only(tmp_path: Path) -> None:
    ca = certs.make_ca()
    broker = certs.issue(ca, "broker-1", hosts=("kafka-1.internal", "10.0.0.7"))
    truststore = certs.write_truststore(tmp_path / "ca.pem", ca)
    keystore = certs.write_keystore(tmp_path / "ks.pem", broker, ca, "pw-123456")
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(keystore, password="pw-123456")
    client = ssl.create_default_context(cafile=str(truststore))
    for host, ok in (("kafka-1.internal", True), ("10.0.0.7", True), ("kafka-2.internal", False)):
        c_in, c_out, s_in, s_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
        client_side = client.wrap_bio(c_in, c_out, server_hostname=host)
        server_side = server.wrap_bio(s_in, s_out, server_side=True)
        error = None
        for _ in range(10):  # pump the handshake between the two memory pairs
            for side in (client_side, server_side):
                try:
                    side.do_handshake()
                except ssl.SSLWantReadError:
                    pass
                except ssl.SSLError as e:
                    error = e
            s_in.write(c_out.read())
            c_in.write(s_out.read())
            if error is not None:
                break
        assert (error is None) is ok, (host, error)
        assert (client_side.version() is not None) is ok  # the handshake completed, or failed


def test_a_new_password_never_begins_with_a_dash() -> None:
    """Pasted after an option (``--conn-password PW``), a leading dash reads as an option: one of
    ``token_urlsafe``'s passwords in 64 began with one, and CI's secured Airflow deployment failed
    to add its connection."""
    passwords = [certs.new_password() for _ in range(4000)]
    assert not [p for p in passwords if p.startswith("-")]
    assert len(set(passwords)) == len(passwords) and {len(p) for p in passwords} == {24}
