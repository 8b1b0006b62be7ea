"""Kafka's listener settings, the TLS contexts they call for, and each connection's authenticator.

A broker reads, with Kafka 2.8's names and checks (``KafkaConfig.validateValues``,
``EndPoint.createEndPoint``):

* ``listeners``: ``NAME://host:port`` list (an empty host binds every address); the names are
  upper-cased, must be distinct and must have a protocol in ``listener.security.protocol.map``
  (by default each of ``PLAINTEXT``, ``SSL``, ``SASL_PLAINTEXT``, ``SASL_SSL`` maps to itself);
* ``advertised.listeners`` (default: ``listeners``): what ``/brokers/ids/N`` and Metadata show; a
  subset of ``listeners`` by name; port 0 becomes the bound port, an unspecified host this
  machine's name;
* ``inter.broker.listener.name``, or ``security.inter.broker.protocol`` (default ``PLAINTEXT``;
  not both): the listener other brokers and the controller reach this one on; it must be advertised;
* ``control.plane.listener.name``: checked as Kafka checks it (a listener, advertised, not the
  inter-broker one); the controller then sends its requests to that listener of every broker.
  They are handled like requests on any listener: the transport gives a controller's requests
  their own handler thread whatever listener they arrive on.

TLS (SSL and SASL_SSL listeners; ``kafka_controller.security.tls``) uses Kafka 2.7's PEM
stores: ``ssl.keystore.type=PEM`` with ``ssl.keystore.location`` (one file: the encrypted PKCS#8
key, then the certificate chain) and ``ssl.key.password``; ``ssl.truststore.type=PEM`` with
``ssl.truststore.location``; ``ssl.client.auth`` ``none``/``requested``/``required`` (an unknown
value is ``none``, as ``SslClientAuth.forConfig``); ``ssl.principal.mapping.rules``;
``ssl.endpoint.identification.algorithm`` (``https``: the inter-broker client checks the broker's
host name). Every ``ssl.*`` key may be given per listener as
``listener.name.<lower-case name>.ssl.*``, which wins. On a SASL_SSL listener only the
listener-prefixed ``ssl.client.auth`` counts (``ChannelBuilders``: SASL authenticates the client
there).

The authenticator seam (``authenticator_factory``): a PLAINTEXT listener's connections are
``User:ANONYMOUS``; an SSL listener's get the client certificate's subject as
``DefaultKafkaPrincipalBuilder`` names it (``User:`` + the mapped RFC 2253 distinguished name), or
``User:ANONYMOUS`` without one; SASL_PLAINTEXT and SASL_SSL listeners get what
``kafka_controller.security.sasl`` makes (``SaslFactory``). A broker with a SASL listener and no
SASL implementation does not start.
"""

from __future__ import annotations

import contextlib
import importlib
import ipaddress
import logging
import re
import socket
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kafka_controller.domain.errors import InvalidArgumentError, brief, cut
from kafka_controller.domain.values import EndPoint
from kafka_controller.security.tls import (
    PrincipalMapper,
    SslAuthenticator,
    SslSettings,
    ssl_principal,
    ssl_settings,
)
from kafka_controller.transport.client import TransportClient
from kafka_controller.transport.connection import Authenticator, PlaintextAuthenticator
from kafka_controller.transport.server import ListenerEndpoint

log = logging.getLogger(__name__)

PLAINTEXT = "PLAINTEXT"
SSL = "SSL"
SASL_PLAINTEXT = "SASL_PLAINTEXT"
SASL_SSL = "SASL_SSL"
PROTOCOLS = (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)
TLS_PROTOCOLS = frozenset({SSL, SASL_SSL})
SASL_PROTOCOLS = frozenset({SASL_PLAINTEXT, SASL_SSL})
DEFAULT_PROTOCOL_MAP: Mapping[str, str] = {p: p for p in PROTOCOLS}
_ENDPOINT = re.compile(r"^(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)$")


@dataclass(frozen=True)
class ListenerConfig:
    """One of Kafka's endpoints: ``NAME://host:port`` with its security protocol."""

    name: str
    host: str
    port: int
    security_protocol: str = PLAINTEXT

    @property
    def tls(self) -> bool:
        return self.security_protocol in TLS_PROTOCOLS

    @property
    def sasl(self) -> bool:
        return self.security_protocol in SASL_PROTOCOLS

    def connection_string(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


#: ``authenticate(sock)``: a client's SASL exchange on a new connection (raises to refuse it).
ClientAuthenticate = Callable[[socket.socket], None]
#: ``sasl(listener)`` -> a factory of fresh server-side SASL authenticators for that listener
#: (``kafka_controller.security.sasl`` supplies it).
SaslFactory = Callable[[ListenerConfig], Callable[[], Authenticator]]


def authenticator_factory(
    listener: ListenerConfig,
    peer_certificate: bytes | None,
    *,
    mapper: PrincipalMapper | None = None,
    sasl: Callable[[], Authenticator] | None = None,
) -> Authenticator:
    """The authenticator of one new connection on ``listener`` (after its TLS handshake, if any)."""
    if listener.sasl:
        if sasl is None:
            raise InvalidArgumentError(f"listener {listener.name}: SASL is not available")
        return sasl()
    if listener.tls:
        return SslAuthenticator(ssl_principal(peer_certificate, mapper or PrincipalMapper()))
    return PlaintextAuthenticator()


# -- the listener settings ---------------------------------------------------------------------------------
def parse_protocol_map(text: str | None) -> dict[str, str]:
    """``listener.security.protocol.map``: ``NAME:PROTOCOL,...`` (Kafka's default when unset)."""
    if text is None or not text.strip():
        return dict(DEFAULT_PROTOCOL_MAP)
    out: dict[str, str] = {}
    for item in text.split(","):
        name, sep, protocol = item.strip().partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not sep or not name or protocol not in PROTOCOLS:
            raise InvalidArgumentError(
                f"invalid listener.security.protocol.map entry {brief(item.strip())}: expected NAME:PROTOCOL "
                f"with PROTOCOL one of {', '.join(PROTOCOLS)}"
            )
        if name in out:
            raise InvalidArgumentError(f"listener.security.protocol.map names {cut(name)} twice")
        out[name] = protocol
    return out


def parse_endpoints(key: str, text: str, protocol_map: Mapping[str, str]) -> tuple[ListenerConfig, ...]:
    """``NAME://host:port,...`` (Kafka's ``EndPoint.createEndPoint`` for each)."""
    out: list[ListenerConfig] = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        match = _ENDPOINT.match(item)
        if match is None:
            raise InvalidArgumentError(f"invalid {key} entry {brief(item)}: expected NAME://HOST:PORT")
        name, host, port = match.group(1).upper(), match.group(2), int(match.group(3))
        if not 0 <= port <= 65535:
            raise InvalidArgumentError(f"invalid {key} entry {brief(item)}: port must be 0-65535")
        protocol = protocol_map.get(name)
        if protocol is None:
            raise InvalidArgumentError(
                f"invalid {key} entry {brief(item)}: no security protocol defined for listener {cut(name)} "
                f"(listener.security.protocol.map)"
            )
        if any(existing.name == name for existing in out):
            raise InvalidArgumentError(
                f"{key} names listener {name} twice: each listener must have a different name"
            )
        if port and any(existing.port == port for existing in out):
            raise InvalidArgumentError(
                f"{key} uses port {port} twice: each listener must have a different port"
            )
        out.append(ListenerConfig(name, host, port, protocol))
    if not out:
        raise InvalidArgumentError(f"{key} is empty")
    return tuple(out)


@dataclass(frozen=True)
class BrokerListeners:
    """A broker's listeners, advertised listeners, inter-broker and control-plane listener names,
    and each TLS listener's settings: everything checked when built (``of``)."""

    listeners: tuple[ListenerConfig, ...]
    advertised: tuple[ListenerConfig, ...]
    inter_broker_listener_name: str
    control_plane_listener_name: str | None = None
    tls_settings: Mapping[str, SslSettings] = field(default_factory=dict)

    @staticmethod
    def of(props: Mapping[str, str], shorthand: tuple[str, int] | None = None) -> BrokerListeners:
        """From Kafka's settings (``KafkaConfig.security_originals()``); ``shorthand`` is
        ``--listener HOST:PORT`` (``PLAINTEXT://HOST:PORT``), refused together with ``listeners``;
        neither: ``PLAINTEXT://127.0.0.1:0``."""
        protocol_map = parse_protocol_map(props.get("listener.security.protocol.map"))
        text = props.get("listeners")
        if text is not None and shorthand is not None:
            raise InvalidArgumentError(
                "--listener and the listeners setting both say where to listen: give one"
            )
        if text is None:
            host, port = shorthand if shorthand is not None else ("127.0.0.1", 0)
            shown = f"[{host}]" if ":" in host else host
            text = f"PLAINTEXT://{shown}:{port}"
            protocol_map.setdefault(PLAINTEXT, PLAINTEXT)
        listeners = parse_endpoints("listeners", text, protocol_map)
        advertised_text = props.get("advertised.listeners")
        advertised = (
            parse_endpoints("advertised.listeners", advertised_text, protocol_map)
            if advertised_text is not None
            else listeners
        )
        names = [listener.name for listener in listeners]
        for listener in advertised:
            if listener.name not in names:
                raise InvalidArgumentError(
                    f"advertised.listeners names {listener.name}, "
                    f"which is not one of listeners ({', '.join(names)})"
                )
        advertised_names = [listener.name for listener in advertised]
        inter_name = props.get("inter.broker.listener.name")
        inter_protocol = props.get("security.inter.broker.protocol")
        if inter_name is not None and inter_protocol is not None:
            raise InvalidArgumentError(
                "only one of inter.broker.listener.name and security.inter.broker.protocol may be set"
            )
        if inter_name is None:
            inter_name = (inter_protocol or PLAINTEXT).strip().upper()
            if inter_name not in PROTOCOLS:
                raise InvalidArgumentError(
                    f"invalid security.inter.broker.protocol {inter_protocol!r}: "
                    f"expected one of {', '.join(PROTOCOLS)}"
                )
        inter_name = inter_name.strip().upper()
        if inter_name not in advertised_names:
            raise InvalidArgumentError(
                f"inter.broker.listener.name must be a listener name defined in advertised.listeners: "
                f"{inter_name} is not one of {', '.join(advertised_names)}"
            )
        control = props.get("control.plane.listener.name")
        if control is not None:
            control = control.strip().upper()
            if control not in names or control not in advertised_names:
                raise InvalidArgumentError(
                    f"control.plane.listener.name {control} must be a listener "
                    "in listeners and advertised.listeners"
                )
            if control == inter_name:
                raise InvalidArgumentError(
                    "control.plane.listener.name must differ from the inter-broker listener "
                    f"(both are {control})"
                )
        settings = {
            listener.name: ssl_settings(props, listener.name, sasl_ssl=listener.security_protocol == SASL_SSL)
            for listener in listeners
            if listener.tls
        }
        return BrokerListeners(listeners, advertised, inter_name, control, settings)

    def check(self) -> None:
        """Load every TLS store now (a wrong path or ``ssl.key.password`` is a one-line error
        before anything starts)."""
        for settings in self.tls_settings.values():
            settings.server_context()
        self.client_context()

    # -- what the broker binds and registers ---------------------------------------------------------------
    @property
    def inter_broker(self) -> ListenerConfig:
        return next(
            listener for listener in self.advertised if listener.name == self.inter_broker_listener_name
        )

    def endpoints(self, sasl: SaslFactory | None = None) -> list[ListenerEndpoint]:
        """What the transport binds: each listener with its TLS context and authenticators.
        Raises ``InvalidArgumentError`` for a TLS listener whose stores do not load, or a SASL
        listener without ``sasl``."""
        out: list[ListenerEndpoint] = []
        for listener in self.listeners:
            context: ssl.SSLContext | None = None
            mapper = PrincipalMapper()
            if listener.tls:
                settings = self.tls_settings[listener.name]
                context = settings.server_context()
                mapper = PrincipalMapper(settings.principal_mapping_rules)
            make_sasl: Callable[[], Authenticator] | None = None
            if listener.sasl:
                if sasl is None:
                    raise InvalidArgumentError(
                        f"listener {listener.name} is {listener.security_protocol}, but SASL is not available"
                    )
                make_sasl = sasl(listener)
            out.append(
                ListenerEndpoint(
                    listener.name,
                    listener.host or "0.0.0.0",
                    listener.port,
                    context,
                    _factory(listener, mapper, make_sasl),
                )
            )
        return out

    def registered(self, ports: Mapping[str, int]) -> tuple[EndPoint, ...]:
        """The advertised endpoints for ``/brokers/ids/N``: port 0 becomes the bound port, an
        unspecified host this machine's name (Kafka's ``KafkaServer.startup``)."""
        out = []
        for listener in self.advertised:
            host = listener.host
            if host in ("", "0.0.0.0", "::"):
                host = socket.getfqdn()
            port = listener.port or ports.get(listener.name, 0)
            out.append(EndPoint(host, port, listener.name, listener.security_protocol))
        return tuple(out)

    def exposed_plaintext(self) -> list[ListenerConfig]:
        """PLAINTEXT listeners bound to an address other machines can reach."""
        return [
            listener
            for listener in self.listeners
            if listener.security_protocol == PLAINTEXT and not _loopback(listener.host)
        ]

    def warn_exposed(self, logger: logging.Logger = log) -> str | None:
        """One warning line when a PLAINTEXT listener is reachable from other machines; the line."""
        exposed = self.exposed_plaintext()
        if not exposed:
            return None
        where = ", ".join(listener.connection_string() for listener in exposed)
        line = (
            f"PLAINTEXT listener {where} binds an address other machines can reach: anyone who reaches it "
            "is User:ANONYMOUS, unencrypted (use an SSL or SASL_SSL listener, or bind 127.0.0.1)"
        )
        logger.warning("%s", line)
        return line

    # -- the inter-broker client ---------------------------------------------------------------------------
    @property
    def controller_listener_name(self) -> str:
        """Where the controller sends LeaderAndIsr, UpdateMetadata and StopReplica: the
        control-plane listener when there is one, else the inter-broker listener (Kafka's
        ``ControllerChannelManager``)."""
        return self.control_plane_listener_name or self.inter_broker_listener_name

    def _listener(self, name: str | None) -> ListenerConfig:
        wanted = name or self.inter_broker_listener_name
        return next(listener for listener in self.advertised if listener.name == wanted)

    def client_context(self, listener_name: str | None = None) -> ssl.SSLContext | None:
        """TLS for connections to other brokers' listener of that name (default: the
        inter-broker one), built from this broker's settings for it (None: plaintext)."""
        listener = self._listener(listener_name)
        if not listener.tls:
            return None
        return self.tls_settings[listener.name].client_context()

    def client_factory(
        self, context: ssl.SSLContext | None, authenticate: ClientAuthenticate | None = None
    ) -> Callable[[str, int, float], Any]:
        """``client_factory(host, port, timeout_s)`` for the channel manager, the controller link
        and the replica fetchers: TLS with ``context``, then ``authenticate`` (SASL) if given."""

        def make(host: str, port: int, timeout_s: float) -> TransportClient:
            return TransportClient(
                host, port, timeout_s=timeout_s, ssl_context=context, authenticate=authenticate
            )

        return make

    def client_authenticate(
        self, props: Mapping[str, str], listener_name: str | None = None
    ) -> ClientAuthenticate | None:
        """The inter-broker client's SASL exchange when the inter-broker listener is SASL_*
        (``kafka_controller.security.sasl.inter_broker_authenticate(props, listener)`` supplies it,
        with ``sasl.mechanism.inter.broker.protocol`` and the listener's JAAS credentials); None
        on a PLAINTEXT or SSL inter-broker listener. Raises ``InvalidArgumentError`` when SASL is
        needed and not available."""
        inter = self._listener(listener_name)
        if not inter.sasl:
            return None
        make = getattr(_sasl_module(), "inter_broker_authenticate", None)
        if make is None:
            raise InvalidArgumentError(
                f"inter-broker listener {inter.name} is {inter.security_protocol}, but SASL is not available"
            )
        authenticate: ClientAuthenticate = make(props, inter)
        return authenticate


def sasl_factory(
    props: Mapping[str, str], store: Any = None, api_versions: Callable[[bytes], bytes | None] | None = None
) -> SaslFactory | None:
    """The SASL seam: ``kafka_controller.security.sasl.listener_authenticator_factory(props,
    listener, store, api_versions)`` returns a factory of fresh server authenticators for one SASL
    listener (``props``: the broker's settings, secrets included; ``store``: the broker's
    ``ScramCredentialCache`` of the SCRAM credentials in ZooKeeper; ``api_versions``: the broker's
    ApiVersions answer, for a client that asks before it authenticates). None while no SASL
    implementation is installed, and then a broker with a SASL listener refuses to start, saying so."""
    make = getattr(_sasl_module(), "listener_authenticator_factory", None)
    if make is None:
        return None

    def for_listener(listener: ListenerConfig) -> Callable[[], Authenticator]:
        factory: Callable[[], Authenticator] = make(props, listener, store, api_versions)
        return factory

    return for_listener


def _sasl_module() -> Any:
    """``kafka_controller.security.sasl`` (imported late: it builds on this module), or None."""
    try:
        return importlib.import_module("kafka_controller.security.sasl")
    except ImportError:
        return None


def _factory(
    listener: ListenerConfig, mapper: PrincipalMapper, sasl: Callable[[], Authenticator] | None
) -> Callable[[bytes | None], Authenticator]:
    def make(peer_certificate: bytes | None) -> Authenticator:
        return authenticator_factory(listener, peer_certificate, mapper=mapper, sasl=sasl)

    return make


def _loopback(host: str) -> bool:
    if not host or host in ("0.0.0.0", "::"):
        return False
    if host == "localhost":
        return True
    with contextlib.suppress(ValueError):
        return ipaddress.ip_address(host).is_loopback
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    return bool(infos) and all(ipaddress.ip_address(str(info[4][0])).is_loopback for info in infos)


__all__ = [
    "DEFAULT_PROTOCOL_MAP",
    "PLAINTEXT",
    "PROTOCOLS",
    "SASL_PLAINTEXT",
    "SASL_SSL",
    "SSL",
    "BrokerListeners",
    "ClientAuthenticate",
    "ListenerConfig",
    "SaslFactory",
    "authenticator_factory",
    "parse_endpoints",
    "parse_protocol_map",
    "sasl_factory",
]
