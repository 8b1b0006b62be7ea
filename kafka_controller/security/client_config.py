"""How this package's own Kafka clients reach a secured cluster: one ``ClientSecurity`` made from
Kafka's tools' client properties (``--command-config FILE``, as ``kafka-topics.sh
--command-config``), librdkafka's names for the same things, or the Airflow connection's fields,
and turned into kafka-python's settings, librdkafka's, or the private admin client's TLS context
and SASL exchange. Every mapping lives here, so the CLI, the Airflow hooks and ``cluster up``
cannot disagree about what ``sasl.jaas.config`` or ``ssl.truststore.location`` means.

Kafka's names (``CommonClientConfigs``, ``SaslConfigs``, ``SslConfigs``): ``security.protocol``,
``sasl.mechanism``, ``sasl.jaas.config`` (``PlainLoginModule`` or ``ScramLoginModule`` with
``username``/``password``), ``ssl.truststore.location`` + ``ssl.truststore.type=PEM``,
``ssl.keystore.location`` (key and chain in one PEM file) + ``ssl.keystore.type=PEM`` +
``ssl.key.password``, ``ssl.endpoint.identification.algorithm`` (empty: no host name check).
librdkafka's: ``sasl.mechanisms``, ``sasl.username``, ``sasl.password``, ``ssl.ca.location``,
``ssl.certificate.location``, ``ssl.key.location``. Keys outside these are ignored, as Kafka's
tools ignore unknown client settings. Errors name the key and never print a value that could
be a secret.
"""

from __future__ import annotations

import os
import socket
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafka_controller.domain.errors import InvalidArgumentError, brief
from kafka_controller.security import jaas
from kafka_controller.security.properties import read_properties

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
_MODULES = {"PLAIN": jaas.PLAIN_LOGIN_MODULE, "SCRAM-SHA-256": jaas.SCRAM_LOGIN_MODULE}
_MODULES["SCRAM-SHA-512"] = jaas.SCRAM_LOGIN_MODULE
_INLINE_PEM = ("ssl.truststore.certificates", "ssl.keystore.key", "ssl.keystore.certificate.chain")


@dataclass(frozen=True)
class ClientSecurity:
    """A client's protocol and credentials; ``repr`` hides the passwords."""

    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    cafile: str | None = None
    certfile: str | None = None
    keyfile: str | None = None
    key_password: str | None = field(default=None, repr=False)
    check_hostname: bool = True

    @property
    def tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.security_protocol.startswith("SASL_")

    @property
    def listener_name(self) -> str:
        """The listener to look for in ``/brokers/ids/N`` (Kafka's default names are the
        protocols' own; a broker with one listener is reached on it whatever its name)."""
        return self.security_protocol

    def kafka_python(self) -> dict[str, Any]:
        """kafka-python's keyword arguments (``KafkaAdminClient``, ``KafkaConsumer``...)."""
        out: dict[str, Any] = {"security_protocol": self.security_protocol}
        if self.sasl:
            out["sasl_mechanism"] = self.sasl_mechanism
            out["sasl_plain_username"] = self.username
            out["sasl_plain_password"] = self.password
        if self.tls:
            out["ssl_check_hostname"] = self.check_hostname
            for key, value in (
                ("ssl_cafile", self.cafile),
                ("ssl_certfile", self.certfile),
                ("ssl_keyfile", self.keyfile),
                ("ssl_password", self.key_password),
            ):
                if value is not None:
                    out[key] = value
        return out

    def librdkafka(self) -> dict[str, str]:
        """librdkafka's properties (confluent-kafka, ``kcat -X``)."""
        out = {"security.protocol": self.security_protocol.lower()}
        if self.sasl:
            out["sasl.mechanism"] = str(self.sasl_mechanism)
            out["sasl.username"] = str(self.username)
            out["sasl.password"] = str(self.password)
        if self.tls:
            for key, value in (
                ("ssl.ca.location", self.cafile),
                ("ssl.certificate.location", self.certfile),
                ("ssl.key.location", self.keyfile or (self.certfile if self.key_password else None)),
                ("ssl.key.password", self.key_password),
            ):
                if value is not None:
                    out[key] = value
            if not self.check_hostname:
                out["ssl.endpoint.identification.algorithm"] = "none"
        return out

    def ssl_context(self) -> ssl.SSLContext | None:
        """The TLS client side of the private admin client (None on a plaintext protocol)."""
        if not self.tls:
            return None
        context = ssl.create_default_context(cafile=self.cafile)
        context.check_hostname = self.check_hostname
        if self.certfile is not None:
            try:
                context.load_cert_chain(self.certfile, self.keyfile, password=self.key_password)
            except (ssl.SSLError, ValueError) as e:
                raise InvalidArgumentError(
                    f"cannot load the client certificate {self.certfile} (is the key password right?): "
                    f"{e.__class__.__name__}"
                ) from None
        return context

    def authenticate(self) -> Callable[[socket.socket], None] | None:
        """The SASL exchange the private admin client runs on each new connection."""
        if not self.sasl:
            return None
        # Imported on use: cryptography loads only when used (start-up time).
        from kafka_controller.security.sasl import SaslClientSettings, client_exchange

        settings = SaslClientSettings(str(self.sasl_mechanism), str(self.username), str(self.password))

        def run(sock: socket.socket) -> None:
            client_exchange(sock, settings)

        return run

    def described(self) -> dict[str, Any]:
        """What may be shown (logs, ``--json``, the audit): never a password."""
        return {
            "security_protocol": self.security_protocol,
            "sasl_mechanism": self.sasl_mechanism if self.sasl else None,
            "sasl_username": self.username if self.sasl else None,
            "ssl_cafile": self.cafile if self.tls else None,
        }


PLAINTEXT = ClientSecurity()


def _protocol(value: str, where: str, key: str) -> str:
    protocol = value.strip().upper()
    if protocol not in PROTOCOLS:
        raise InvalidArgumentError(f"{where}: {key} {brief(value)} is not one of {', '.join(PROTOCOLS)}")
    return protocol


def _mechanism(value: str | None, where: str, key: str) -> str:
    mechanism = (value or "GSSAPI").strip().upper()
    if mechanism not in MECHANISMS:
        raise InvalidArgumentError(
            f"{where}: {key} {brief(mechanism)} is not supported: use one of {', '.join(MECHANISMS)}"
        )
    return mechanism


def _file(path: str | None, where: str, key: str) -> str | None:
    if path is None or not path.strip():
        return None
    path = path.strip()
    if not os.path.isfile(path) or not os.access(path, os.R_OK):
        raise InvalidArgumentError(f"{where}: {key} {path} is not a readable file")
    return path


def from_properties(props: Mapping[str, str], where: str = "client config") -> ClientSecurity:
    """A ``ClientSecurity`` from Kafka's (or librdkafka's) client property names."""
    protocol = _protocol(props.get("security.protocol", "PLAINTEXT"), where, "security.protocol")
    for key in _INLINE_PEM:
        if props.get(key):
            raise InvalidArgumentError(
                f"{where}: {key} (inline PEM) is not supported: give the file's location"
            )
    for key in ("ssl.truststore.type", "ssl.keystore.type"):
        kind = props.get(key)
        if kind is not None and kind.strip().upper() != "PEM":
            raise InvalidArgumentError(f"{where}: {key} {brief(kind)} is not supported: only PEM")
    mechanism = username = password = None
    if protocol.startswith("SASL_"):
        key = "sasl.mechanism" if "sasl.mechanism" in props else "sasl.mechanisms"
        mechanism = _mechanism(props.get(key), where, key)
        username, password = props.get("sasl.username"), props.get("sasl.password")
        text = props.get("sasl.jaas.config")
        if text is not None:
            entry = jaas.parse(text, f"{where}: sasl.jaas.config")
            if entry.login_module != _MODULES[mechanism]:
                raise InvalidArgumentError(
                    f"{where}: sasl.jaas.config uses {brief(entry.login_module)}, but "
                    f"sasl.mechanism {mechanism} needs {_MODULES[mechanism]}"
                )
            username, password = entry.options.get("username"), entry.options.get("password")
        if not username or password is None:
            raise InvalidArgumentError(
                f"{where}: security.protocol {protocol} needs a username and password "
                '(sasl.jaas.config with username="..." password="...", or sasl.username and sasl.password)'
            )
    cafile = certfile = keyfile = key_password = None
    check_hostname = True
    if protocol in ("SSL", "SASL_SSL"):
        ca_key = "ssl.truststore.location" if "ssl.truststore.location" in props else "ssl.ca.location"
        cafile = _file(props.get(ca_key), where, ca_key)
        if props.get("ssl.keystore.location"):
            certfile = _file(props["ssl.keystore.location"], where, "ssl.keystore.location")
        else:
            certfile = _file(props.get("ssl.certificate.location"), where, "ssl.certificate.location")
            keyfile = _file(props.get("ssl.key.location"), where, "ssl.key.location")
            if (certfile is None) != (keyfile is None):
                raise InvalidArgumentError(
                    f"{where}: ssl.certificate.location and ssl.key.location go together"
                )
        key_password = props.get("ssl.key.password") or None
        algorithm = props.get("ssl.endpoint.identification.algorithm", "https").strip().lower()
        if algorithm not in ("", "https", "none"):
            raise InvalidArgumentError(
                f"{where}: ssl.endpoint.identification.algorithm {brief(algorithm)} is not https or empty"
            )
        check_hostname = algorithm == "https"
    return ClientSecurity(
        protocol, mechanism, username, password, cafile, certfile, keyfile, key_password, check_hostname
    )


def read_command_config(path: str | Path) -> ClientSecurity:
    """Kafka's tools' ``--command-config FILE``."""
    return from_properties(read_properties(path, "--command-config"), f"--command-config {path}")


def from_fields(
    *,
    security_protocol: str | None = None,
    sasl_mechanism: str | None = None,
    username: str | None = None,
    password: str | None = None,
    ssl_cafile: str | None = None,
    ssl_certfile: str | None = None,
    ssl_keyfile: str | None = None,
    ssl_password: str | None = None,
    ssl_check_hostname: bool = True,
    where: str = "connection",
) -> ClientSecurity:
    """From kafka-python's names (the Airflow connection's fields), checked as the properties are."""
    props = {"security.protocol": security_protocol or "PLAINTEXT"}
    optional = {
        "sasl.mechanism": sasl_mechanism,
        "sasl.username": username,
        "sasl.password": password,
        "ssl.ca.location": ssl_cafile,
        "ssl.certificate.location": ssl_certfile,
        "ssl.key.location": ssl_keyfile,
        "ssl.key.password": ssl_password,
    }
    props.update({k: v for k, v in optional.items() if v is not None})
    if not ssl_check_hostname:
        props["ssl.endpoint.identification.algorithm"] = ""
    names = {"ssl.ca.location": "ssl_cafile", "ssl.certificate.location": "ssl_certfile"}
    names.update({"ssl.key.location": "ssl_keyfile", "sasl.mechanism": "sasl_mechanism"})
    try:
        return from_properties(props, where)
    except InvalidArgumentError as e:  # the connection's own field names, not Kafka's
        message = str(e)
        for kafka_name, field_name in names.items():
            message = message.replace(kafka_name, field_name)
        message = message.replace("security.protocol", "security_protocol")
        message = message.replace(
            '(sasl.jaas.config with username="..." password="...", or sasl.username and sasl.password)',
            "(the connection's login and password)",
        )
        raise InvalidArgumentError(message) from None


__all__ = [
    "MECHANISMS",
    "PLAINTEXT",
    "PROTOCOLS",
    "ClientSecurity",
    "from_fields",
    "from_properties",
    "read_command_config",
]
