"""A private certificate authority and the PEM files Kafka's TLS settings point at.

``cluster up --security ssl|sasl_ssl`` and the tests need a CA, a certificate per broker and one
per client without an operator's PKI. Kafka 2.7+ reads PEM directly (KIP-651): a keystore file
holding an *encrypted* PKCS#8 private key followed by the certificate chain (a keystore location
requires ``ssl.key.password``, ``DefaultSslEngineFactory``), and a truststore file of CA
certificates. ``write_keystore`` and ``write_truststore`` write exactly those; ``write_client_files``
writes the separate key and certificate librdkafka's ``ssl.key.location`` and
``ssl.certificate.location`` take. Keys are ECDSA P-256: quick to make, and every client here
(librdkafka, kafka-python, Python's ssl, Java) speaks it.

Private keys are written with mode 0600 before any byte is written, so a key is never readable by
others even for a moment.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import secrets
import ssl
import string
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

#: How long generated certificates are valid: long enough for any test or trial cluster.
VALIDITY = datetime.timedelta(days=825)
_BACKDATE = datetime.timedelta(minutes=5)  # a peer's clock a little behind still accepts them


@dataclass(frozen=True)
class Issued:
    """A private key and its certificate (a CA's too)."""

    key: ec.EllipticCurvePrivateKey
    certificate: x509.Certificate

    @property
    def certificate_pem(self) -> bytes:
        return self.certificate.public_bytes(serialization.Encoding.PEM)

    def key_pem(self, password: str | None = None) -> bytes:
        """PKCS#8, encrypted when ``password`` is given (Kafka refuses PKCS#1 ``RSA PRIVATE KEY``)."""
        encryption: serialization.KeySerializationEncryption = (
            serialization.BestAvailableEncryption(password.encode())
            if password
            else serialization.NoEncryption()
        )
        return self.key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption
        )


def _name(common_name: str, organization: str | None) -> x509.Name:
    """Most general attribute first in the encoding, as ``openssl -subj /O=org/CN=name`` makes it,
    so Java (and Kafka's principal) print it most specific first: ``CN=name,O=org``."""
    attributes = []
    if organization:
        attributes.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    attributes.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    return x509.Name(attributes)


def make_ca(common_name: str = "kafka-controller CA", organization: str | None = None) -> Issued:
    """A self-signed CA that may sign end-entity certificates only (path length 0)."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    name = _name(common_name, organization)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return Issued(key, certificate)


def issue(
    ca: Issued,
    common_name: str,
    *,
    organization: str | None = None,
    hosts: Iterable[str] = ("localhost", "127.0.0.1"),
) -> Issued:
    """A certificate signed by ``ca`` for both server and client use (a broker is a client of the
    other brokers), with ``hosts`` (names or IP addresses) as subject alternative names, which is
    what hostname verification (``ssl.endpoint.identification.algorithm=https``) checks."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    alt_names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            alt_names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            alt_names.append(x509.DNSName(host))
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name, organization))
        .issuer_name(ca.certificate.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
            critical=False,
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key()), critical=False
        )
    )
    if alt_names:
        builder = builder.add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
    return Issued(key, builder.sign(ca.key, hashes.SHA256()))


def new_password() -> str:
    """A random password (a key's ``ssl.key.password``, a SCRAM user's, a ZooKeeper login's).

    Never with a leading ``-``: an operator pastes it after an option (``airflow connections add
    --conn-password PW``, ``kafka-acls --password PW``), where a leading dash makes it read as an
    option of its own (one password in 64 of ``token_urlsafe``'s did)."""
    token = secrets.token_urlsafe(18)
    return token if not token.startswith("-") else secrets.choice(string.ascii_letters) + token[1:]


def _write_private(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        os.fchmod(f.fileno(), 0o600)  # an existing file keeps its mode through O_CREAT
        f.write(data)
    return path


def write_keystore(path: str | Path, issued: Issued, ca: Issued, password: str) -> Path:
    """Kafka's PEM keystore file (``ssl.keystore.type=PEM`` + ``ssl.keystore.location``): the key,
    encrypted with ``password`` (``ssl.key.password``), then the certificate and the CA's."""
    data = issued.key_pem(password) + issued.certificate_pem + ca.certificate_pem
    return _write_private(Path(path), data)


def write_truststore(path: str | Path, *cas: Issued) -> Path:
    """Kafka's PEM truststore file (``ssl.truststore.type=PEM`` + ``ssl.truststore.location``),
    also librdkafka's ``ssl.ca.location`` and kafka-python's ``ssl_cafile``."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(b"".join(ca.certificate_pem for ca in cas))
    return target


def write_client_files(directory: str | Path, stem: str, issued: Issued) -> tuple[Path, Path]:
    """``<stem>.crt`` and ``<stem>.key`` (unencrypted, mode 0600), the shape librdkafka
    (``ssl.certificate.location``, ``ssl.key.location``) and kafka-python (``ssl_certfile``,
    ``ssl_keyfile``) load; returns (certificate, key)."""
    base = Path(directory)
    base.mkdir(parents=True, exist_ok=True)
    cert_path = base / f"{stem}.crt"
    cert_path.write_bytes(issued.certificate_pem)
    key_path = _write_private(base / f"{stem}.key", issued.key_pem())
    return cert_path, key_path


@dataclass(frozen=True)
class ClusterPki:
    """The files of a private cluster's TLS (``make_cluster_pki``). ``key_password`` is the
    brokers' ``ssl.key.password``; the directory holds it nowhere else."""

    directory: Path
    truststore: Path
    keystores: dict[int, Path]
    key_password: str = field(repr=False)
    client_certificate: Path
    client_key: Path

    def broker_settings(self, broker_id: int, listener: str | None = None) -> dict[str, str]:
        """Kafka's settings for one broker's TLS listeners (``listener``: only that listener,
        with Kafka's ``listener.name.<name>.`` prefix)."""
        prefix = "" if listener is None else f"listener.name.{listener.lower()}."
        return {
            f"{prefix}ssl.keystore.type": "PEM",
            f"{prefix}ssl.keystore.location": str(self.keystores[broker_id]),
            f"{prefix}ssl.key.password": self.key_password,
            f"{prefix}ssl.truststore.type": "PEM",
            f"{prefix}ssl.truststore.location": str(self.truststore),
        }

    def client_context(self) -> ssl.SSLContext:
        """Python's TLS client side with the client certificate (this package's own clients)."""
        context = ssl.create_default_context(cafile=str(self.truststore))
        context.load_cert_chain(self.client_certificate, self.client_key)
        return context

    def write_client_properties(self, path: str | Path | None = None) -> Path:
        """A librdkafka properties file (``key=value`` lines) with ``client_settings(certificate=True)``,
        what ``kcat -F FILE`` reads; nothing in it is secret but the key file it names."""
        target = Path(path) if path is not None else self.directory / "client.properties"
        lines = [f"{k}={v}" for k, v in self.client_settings(certificate=True).items()]
        target.write_text("\n".join(lines) + "\n")
        return target

    def client_settings(self, *, certificate: bool = False) -> dict[str, str]:
        """librdkafka's (kcat ``-X``, confluent-kafka) TLS settings; ``certificate``: with the
        client's certificate and key, for a listener with ``ssl.client.auth=required``."""
        out = {"security.protocol": "ssl", "ssl.ca.location": str(self.truststore)}
        if certificate:
            out["ssl.certificate.location"] = str(self.client_certificate)
            out["ssl.key.location"] = str(self.client_key)
        return out


def make_cluster_pki(
    directory: str | Path,
    broker_ids: Iterable[int],
    *,
    hosts: Iterable[str] = ("localhost", "127.0.0.1"),
    organization: str = "kafka-controller",
    client: str = "admin",
) -> ClusterPki:
    """A CA, one keystore per broker (subject ``CN=broker-<id>,O=<organization>``, valid for
    ``hosts``), a truststore, and one client certificate (``CN=<client>,O=<organization>``):
    everything a cluster on SSL listeners and its first client need."""
    base = Path(directory)
    ca = make_ca(f"{organization} CA", organization=organization)
    password = new_password()
    names = tuple(hosts)
    keystores = {
        broker_id: write_keystore(
            base / f"broker-{broker_id}.keystore.pem",
            issue(ca, f"broker-{broker_id}", organization=organization, hosts=names),
            ca,
            password,
        )
        for broker_id in broker_ids
    }
    truststore = write_truststore(base / "ca.pem", ca)
    certificate, key = write_client_files(
        base, client, issue(ca, client, organization=organization, hosts=())
    )
    return ClusterPki(base, truststore, keystores, password, certificate, key)


__all__ = [
    "VALIDITY",
    "ClusterPki",
    "Issued",
    "issue",
    "make_ca",
    "make_cluster_pki",
    "new_password",
    "write_client_files",
    "write_keystore",
    "write_truststore",
]
