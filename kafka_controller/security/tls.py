"""TLS for a listener: Kafka's ``ssl.*`` settings (per listener under ``listener.name.<name>.``),
the server and client ``SSLContext`` they make, and the principal of a client certificate.

``SslSettings`` holds one listener's settings once checked (``ssl_settings``); its
``server_context`` serves the listener and its ``client_context`` is how this broker connects to
another's listener of that name (Kafka builds its inter-broker client from the inter-broker
listener's settings). ``ssl_principal`` is ``DefaultKafkaPrincipalBuilder`` on a TLS connection:
``User:`` + the subject as Java's ``X500Principal.getName()`` prints it (RFC 2253), mapped by
``ssl.principal.mapping.rules`` (``PrincipalMapper``, Kafka's ``SslPrincipalMapper``).
"""

from __future__ import annotations

import os
import re
import ssl
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from cryptography import x509

from kafka_controller.domain.errors import InvalidArgumentError
from kafka_controller.transport.connection import ANONYMOUS

#: Kafka's ``listener.name.<name>.`` prefix (``ListenerName.configPrefix``).
PREFIX = "listener.name."
_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


class SslAuthenticator:
    """A TLS connection's authenticator: complete at once (the handshake authenticated the peer,
    or it presented no certificate and is anonymous)."""

    complete = True

    def __init__(self, principal: str) -> None:
        self.principal = principal

    def receive(self, payload: bytearray) -> bytes | None:  # pragma: no cover - never called
        return None


# -- ssl.principal.mapping.rules (Kafka's SslPrincipalMapper) ---------------------------------------------
_RULE = re.compile(r"\s*(?:(DEFAULT)|RULE:((?:[^/\\]|\\.)*)/((?:[^/\\]|\\.)*)/([LU]?))\s*(?:,|$)")


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        if self.pattern.fullmatch(dn) is None:
            return None
        mapped = self.pattern.sub(self.replacement, dn)
        return mapped.lower() if self.case == "L" else mapped.upper() if self.case == "U" else mapped


class PrincipalMapper:
    """``ssl.principal.mapping.rules``: ``DEFAULT`` (the whole distinguished name) and
    ``RULE:<regex>/<replacement>/[L|U]``, comma-separated; the first rule whose regex matches the
    whole name gives the principal's name (``$1`` in a replacement is the first group)."""

    def __init__(self, rules: str = "DEFAULT") -> None:
        self.rules = tuple(self._parse(rules))

    @staticmethod
    def _parse(text: str) -> Iterable[_Rule]:
        position, text = 0, text.strip() or "DEFAULT"
        while position < len(text):
            match = _RULE.match(text, position)
            if match is None or match.end() == position:
                raise InvalidArgumentError(f"invalid ssl.principal.mapping.rules at {text[position:]!r}")
            position = match.end()
            if match.group(1):
                yield _Rule(None)
                continue
            try:
                pattern = re.compile(match.group(2))
            except re.error as e:
                raise InvalidArgumentError(
                    f"invalid ssl.principal.mapping.rules regex {match.group(2)!r}: {e}"
                ) from None
            replacement = re.sub(r"\$(\d+)", r"\\g<\1>", match.group(3))
            yield _Rule(pattern, replacement, match.group(4))

    def name(self, dn: str) -> str:
        for rule in self.rules:
            mapped = rule.apply(dn)
            if mapped is not None:
                return mapped
        raise InvalidArgumentError(f"no ssl.principal.mapping.rules rule matches {dn!r}")


def subject_dn(certificate_der: bytes) -> str:
    """The subject as Java's ``X500Principal.getName()`` prints it (RFC 2253: most specific first,
    no spaces, e.g. ``CN=client,O=org``); RFC 4514 is RFC 2253's successor with the same form."""
    return x509.load_der_x509_certificate(certificate_der).subject.rfc4514_string()


def ssl_principal(certificate_der: bytes | None, mapper: PrincipalMapper) -> str:
    """``DefaultKafkaPrincipalBuilder`` on a TLS connection: ``User:ANONYMOUS`` without a client
    certificate, else ``User:`` + the mapped subject."""
    if certificate_der is None:
        return ANONYMOUS
    return f"User:{mapper.name(subject_dn(certificate_der))}"


# -- TLS settings -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SslSettings:
    """One listener's ``ssl.*`` settings, prefixed overrides applied. ``repr`` hides the password."""

    listener: str
    keystore_location: str | None = None
    key_password: str | None = field(default=None, repr=False)
    truststore_location: str | None = None
    client_auth: str = "none"
    principal_mapping_rules: str = "DEFAULT"
    endpoint_identification_algorithm: str = "https"

    def server_context(self) -> ssl.SSLContext:
        """The listener's server side: its certificate, the CAs its clients' certificates must
        chain to, and whether a client certificate is asked for or required."""
        if not self.keystore_location:
            raise InvalidArgumentError(
                f"listener {self.listener}: a TLS listener needs ssl.keystore.location"
            )
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        self._load(context)
        context.verify_mode = _CLIENT_AUTH[self.client_auth]
        return context

    def client_context(self) -> ssl.SSLContext:
        """How this broker connects to another's listener (Kafka builds the inter-broker client
        from the inter-broker listener's settings): verify it, present our certificate."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.check_hostname = self.endpoint_identification_algorithm.lower() == "https"
        self._load(context)
        return context

    def _load(self, context: ssl.SSLContext) -> None:
        where = f"listener {self.listener}"
        if self.keystore_location:
            _readable(where, "ssl.keystore.location", self.keystore_location)
            try:
                context.load_cert_chain(self.keystore_location, password=self.key_password or None)
            except (ssl.SSLError, ValueError) as e:  # never the password: only what failed
                raise InvalidArgumentError(
                    f"{where}: cannot load ssl.keystore.location {self.keystore_location} "
                    f"(key and certificate chain, PEM; is ssl.key.password right?): {_why(e)}"
                ) from None
        if self.truststore_location:
            _readable(where, "ssl.truststore.location", self.truststore_location)
            try:
                context.load_verify_locations(cafile=self.truststore_location)
            except ssl.SSLError as e:
                raise InvalidArgumentError(
                    f"{where}: cannot load ssl.truststore.location {self.truststore_location} (PEM "
                    f"certificates): {_why(e)}"
                ) from None
        else:
            context.load_default_certs(
                ssl.Purpose.CLIENT_AUTH
                if context.protocol == ssl.PROTOCOL_TLS_SERVER
                else ssl.Purpose.SERVER_AUTH
            )


def _why(error: Exception) -> str:
    return str(getattr(error, "reason", None) or error)


def _readable(where: str, key: str, path: str) -> None:
    if not os.path.isfile(path) or not os.access(path, os.R_OK):
        raise InvalidArgumentError(f"{where}: {key} {path} is not a readable file")


def _setting(props: Mapping[str, str], listener: str, key: str) -> str | None:
    """Kafka's per-listener lookup: ``listener.name.<lower>.<key>`` first, then ``<key>``."""
    prefixed = props.get(f"{PREFIX}{listener.lower()}.{key}")
    return prefixed if prefixed is not None else props.get(key)


def ssl_settings(props: Mapping[str, str], name: str, *, sasl_ssl: bool = False) -> SslSettings:
    """Listener ``name``'s TLS settings (``sasl_ssl``: a SASL_SSL listener, where only the
    listener-prefixed ``ssl.client.auth`` counts), checked: PEM only, a keystore location with its
    ``ssl.key.password``, mapping rules that parse."""
    where = f"listener {name}"
    for key in ("ssl.keystore.type", "ssl.truststore.type"):
        kind = _setting(props, name, key)
        if kind is not None and kind.strip().upper() != "PEM":
            raise InvalidArgumentError(f"{where}: {key}={kind} is not supported: only PEM (Kafka 2.7+) is")
    for key in ("ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.truststore.certificates"):
        if _setting(props, name, key) is not None:
            raise InvalidArgumentError(
                f"{where}: inline PEM ({key}) is not supported: use the .location settings"
            )
    keystore = _setting(props, name, "ssl.keystore.location")
    password = _setting(props, name, "ssl.key.password")
    if keystore and not password:
        raise InvalidArgumentError(
            f"{where}: ssl.keystore.location of type PEM requires ssl.key.password "
            "(an encrypted key), as Kafka does"
        )
    if sasl_ssl:  # only a listener-prefixed setting counts there
        auth = props.get(f"{PREFIX}{name.lower()}.ssl.client.auth")
    else:
        auth = _setting(props, name, "ssl.client.auth")
    client_auth = (auth or "none").strip().lower()
    if client_auth not in _CLIENT_AUTH:
        client_auth = "none"  # SslClientAuth.forConfig: anything else is none
    rules = _setting(props, name, "ssl.principal.mapping.rules") or "DEFAULT"
    algorithm = _setting(props, name, "ssl.endpoint.identification.algorithm")  # "": no host check
    PrincipalMapper(rules)  # refuse bad rules at start, not at the first client
    return SslSettings(
        listener=name,
        keystore_location=keystore,
        key_password=password,
        truststore_location=_setting(props, name, "ssl.truststore.location"),
        client_auth=client_auth,
        principal_mapping_rules=rules,
        endpoint_identification_algorithm="https" if algorithm is None else algorithm,
    )


__all__ = [
    "PREFIX",
    "PrincipalMapper",
    "SslAuthenticator",
    "SslSettings",
    "ssl_principal",
    "ssl_settings",
    "subject_dn",
]
