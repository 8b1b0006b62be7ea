"""KafkaConfig: the broker settings the controller reads, with Kafka 2.8's names and defaults.

Values arrive as strings (``--config KEY=VALUE``, a properties file) or as Python values (tests,
embedding); both are parsed the way Kafka's ``ConfigDef`` parses them. Anything unknown or
unparsable is refused with one line naming the key and the problem (docs/external-contract.md §2.2), before a
controller is built, so a bad setting never half-starts a broker.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kafka_controller.core.ibp import InterBrokerProtocolVersion
from kafka_controller.domain.config_keys import AUTO_LEADER_REBALANCE_ENABLE, UNCLEAN_LEADER_ELECTION_ENABLE
from kafka_controller.domain.errors import InvalidArgumentError

LEADER_IMBALANCE_PER_BROKER_PERCENTAGE = "leader.imbalance.per.broker.percentage"
LEADER_IMBALANCE_CHECK_INTERVAL_SECONDS = "leader.imbalance.check.interval.seconds"
DELETE_TOPIC_ENABLE = "delete.topic.enable"
CONTROLLED_SHUTDOWN_ENABLE = "controlled.shutdown.enable"
CONTROLLED_SHUTDOWN_MAX_RETRIES = "controlled.shutdown.max.retries"
CONTROLLED_SHUTDOWN_RETRY_BACKOFF_MS = "controlled.shutdown.retry.backoff.ms"
REPLICA_LAG_TIME_MAX_MS = "replica.lag.time.max.ms"
ZOOKEEPER_SESSION_TIMEOUT_MS = "zookeeper.session.timeout.ms"
CONTROLLER_SOCKET_TIMEOUT_MS = "controller.socket.timeout.ms"
INTER_BROKER_PROTOCOL_VERSION = "inter.broker.protocol.version"
RESERVED_BROKER_MAX_ID = "reserved.broker.max.id"
NUM_PARTITIONS = "num.partitions"
DEFAULT_REPLICATION_FACTOR = "default.replication.factor"
AUTO_CREATE_TOPICS_ENABLE = "auto.create.topics.enable"
# Kafka's SocketServer settings (the broker's listener reads them: ``transport.limits``).
SOCKET_REQUEST_MAX_BYTES = "socket.request.max.bytes"
QUEUED_MAX_REQUEST_BYTES = "queued.max.request.bytes"
SASL_SERVER_MAX_RECEIVE_SIZE = "sasl.server.max.receive.size"
CONNECTIONS_MAX_IDLE_MS = "connections.max.idle.ms"
CONNECTION_FAILED_AUTHENTICATION_DELAY_MS = "connection.failed.authentication.delay.ms"
MAX_CONNECTIONS = "max.connections"
MAX_CONNECTIONS_PER_IP = "max.connections.per.ip"
MAX_CONNECTIONS_PER_IP_OVERRIDES = "max.connections.per.ip.overrides"
NUM_IO_THREADS = "num.io.threads"
_INT_MAX = 2**31 - 1
_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1


def _bool(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise InvalidArgumentError(f"invalid value {value!r} for {key}: expected true or false")


def _int_at_least(minimum: int, maximum: int | None = None) -> Callable[[str, Any], int]:
    def parse(key: str, value: Any) -> int:
        if isinstance(value, bool):
            raise InvalidArgumentError(f"invalid value {value!r} for {key}: expected an integer")
        try:
            number = int(str(value).strip()) if not isinstance(value, int) else value
        except ValueError:
            raise InvalidArgumentError(f"invalid value {value!r} for {key}: expected an integer") from None
        if number < minimum or (maximum is not None and number > maximum):
            bound = f"between {minimum} and {maximum}" if maximum is not None else f"at least {minimum}"
            raise InvalidArgumentError(f"invalid value {number} for {key}: must be {bound}")
        return number

    return parse


def parse_ip_overrides(key: str, value: Any) -> dict[str, int]:
    """Kafka's ``host:N,host2:M`` (KIP-402; the last colon splits, so IPv6 addresses work)."""
    out: dict[str, int] = {}
    for item in str(value).split(","):
        item = item.strip()
        if not item:
            continue
        host, sep, count = item.rpartition(":")
        host = host.strip()
        if not sep or not host or any(c.isspace() for c in host):
            raise InvalidArgumentError(
                f"invalid value {value!r} for {key}: expected host:count[,host:count...]"
            )
        try:
            out[host] = _int_at_least(0, _INT_MAX)(key, count)
        except InvalidArgumentError:
            raise InvalidArgumentError(
                f"invalid value {value!r} for {key}: the count of {host!r} must be an integer >= 0"
            ) from None
    return out


def _overrides(key: str, value: Any) -> str:
    parse_ip_overrides(key, value)
    return str(value).strip()


def _ibp(key: str, value: Any) -> InterBrokerProtocolVersion:
    try:
        return InterBrokerProtocolVersion.parse(
            value if isinstance(value, InterBrokerProtocolVersion) else str(value)
        )
    except InvalidArgumentError as e:
        raise InvalidArgumentError(f"invalid value {value!r} for {key}: {e}") from None


#: key -> (parser, Kafka's default). The docs/external-contract.md §2.2 list plus what the controller
#: itself uses.
_KEYS: dict[str, tuple[Callable[[str, Any], Any], Any]] = {
    UNCLEAN_LEADER_ELECTION_ENABLE: (_bool, False),
    AUTO_LEADER_REBALANCE_ENABLE: (_bool, True),
    LEADER_IMBALANCE_PER_BROKER_PERCENTAGE: (_int_at_least(0, 100), 10),
    LEADER_IMBALANCE_CHECK_INTERVAL_SECONDS: (_int_at_least(1), 300),
    DELETE_TOPIC_ENABLE: (_bool, True),
    CONTROLLED_SHUTDOWN_ENABLE: (_bool, True),
    CONTROLLED_SHUTDOWN_MAX_RETRIES: (_int_at_least(0), 3),
    CONTROLLED_SHUTDOWN_RETRY_BACKOFF_MS: (_int_at_least(0), 5000),
    REPLICA_LAG_TIME_MAX_MS: (_int_at_least(1), 30000),
    ZOOKEEPER_SESSION_TIMEOUT_MS: (_int_at_least(1), 18000),
    CONTROLLER_SOCKET_TIMEOUT_MS: (_int_at_least(1), 30000),
    INTER_BROKER_PROTOCOL_VERSION: (_ibp, "2.8-IV1"),
    RESERVED_BROKER_MAX_ID: (_int_at_least(0), 1000),
    # Topic creation defaults (CreateTopics asking -1, a Metadata request's auto-creation).
    NUM_PARTITIONS: (_int_at_least(1), 1),
    DEFAULT_REPLICATION_FACTOR: (_int_at_least(1), 1),
    AUTO_CREATE_TOPICS_ENABLE: (_bool, True),
    # The listener's (Kafka's SocketServer settings).
    SOCKET_REQUEST_MAX_BYTES: (_int_at_least(1, _INT_MAX), 104857600),
    QUEUED_MAX_REQUEST_BYTES: (_int_at_least(_LONG_MIN, _LONG_MAX), -1),
    SASL_SERVER_MAX_RECEIVE_SIZE: (_int_at_least(1, _INT_MAX), 524288),
    CONNECTIONS_MAX_IDLE_MS: (_int_at_least(_LONG_MIN, _LONG_MAX), 600000),
    CONNECTION_FAILED_AUTHENTICATION_DELAY_MS: (_int_at_least(0, _INT_MAX), 100),
    MAX_CONNECTIONS: (_int_at_least(0, _INT_MAX), _INT_MAX),
    MAX_CONNECTIONS_PER_IP: (_int_at_least(0, _INT_MAX), _INT_MAX),
    MAX_CONNECTIONS_PER_IP_OVERRIDES: (_overrides, ""),
    NUM_IO_THREADS: (_int_at_least(1, 256), 8),
}

#: Listener and TLS keys: kept as given (``originals()``) and parsed, with their cross-checks, by
#: ``kafka_controller.security.listeners`` when a broker starts; ``listener.name.<name>.*`` are
#: Kafka's per-listener overrides of them.
LISTENER_KEYS: frozenset[str] = frozenset(
    {
        "listeners",
        "advertised.listeners",
        "listener.security.protocol.map",
        "inter.broker.listener.name",
        "security.inter.broker.protocol",
        "control.plane.listener.name",
        "ssl.keystore.type",
        "ssl.keystore.location",
        "ssl.key.password",
        "ssl.truststore.type",
        "ssl.truststore.location",
        "ssl.client.auth",
        "ssl.principal.mapping.rules",
        "ssl.endpoint.identification.algorithm",
        # SASL (kafka_controller.security.sasl); JAAS: listener.name.<l>.<mechanism>.sasl.jaas.config
        "sasl.enabled.mechanisms",
        "sasl.mechanism.inter.broker.protocol",
        "sasl.jaas.config",
    }
)
LISTENER_PREFIX = "listener.name."

KNOWN_KEYS: tuple[str, ...] = tuple(sorted(_KEYS))


#: Kafka's ZooKeeper client security keys: kept as given and read by
#: ``kafka_controller.zk.client_security`` (its ``ZK_CLIENT_KEYS`` is the same set).
ZOOKEEPER_CLIENT_KEYS: frozenset[str] = frozenset(
    {
        "zookeeper.set.acl",
        "zookeeper.ssl.client.enable",
        "zookeeper.clientCnxnSocket",
        *(
            f"zookeeper.ssl.{s}.{k}"
            for s in ("keystore", "truststore")
            for k in ("location", "password", "type")
        ),
        "zookeeper.ssl.protocol",
        "zookeeper.ssl.enabled.protocols",
        "zookeeper.ssl.cipher.suites",
        "zookeeper.ssl.endpoint.identification.algorithm",
        "zookeeper.ssl.crl.enable",
        "zookeeper.ssl.ocsp.enable",
    }
)


#: Authorizer keys: kept as given and parsed by ``kafka_controller.security.authorizer``.
AUTHORIZER_KEYS: frozenset[str] = frozenset(
    {"authorizer.class.name", "super.users", "allow.everyone.if.no.acl.found"}
)


def is_known_key(key: str) -> bool:
    return (
        key in _KEYS
        or key in AUTHORIZER_KEYS
        or key in LISTENER_KEYS
        or key.startswith(LISTENER_PREFIX)
        or key in ZOOKEEPER_CLIENT_KEYS
    )


def is_sensitive_key(key: str) -> bool:
    """Kafka's PASSWORD-type settings (``ssl.key.password``, ``sasl.jaas.config``, also under
    ``listener.name.<name>.``): their values are never shown, logged or audited."""
    return key.endswith(".password") or key.endswith("sasl.jaas.config")


def _stringify(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@dataclass(frozen=True)
class KafkaConfig:
    """A broker's settings, parsed. Build it with ``KafkaConfig.of(broker_id, {...})``.

    ``originals()`` is Kafka's ``config.originals()``: the settings as given, as strings; the
    partition state machine merges topic configs over them when deciding on unclean election.
    """

    broker_id: int
    unclean_leader_election_enable: bool = False
    auto_leader_rebalance_enable: bool = True
    leader_imbalance_per_broker_percentage: int = 10
    leader_imbalance_check_interval_seconds: int = 300
    delete_topic_enable: bool = True
    controlled_shutdown_enable: bool = True
    controlled_shutdown_max_retries: int = 3
    controlled_shutdown_retry_backoff_ms: int = 5000
    replica_lag_time_max_ms: int = 30000
    zookeeper_session_timeout_ms: int = 18000
    controller_socket_timeout_ms: int = 30000
    inter_broker_protocol_version: InterBrokerProtocolVersion = field(
        default_factory=lambda: InterBrokerProtocolVersion.parse("2.8-IV1")
    )
    reserved_broker_max_id: int = 1000
    num_partitions: int = 1
    default_replication_factor: int = 1
    auto_create_topics_enable: bool = True
    socket_request_max_bytes: int = 104857600
    queued_max_request_bytes: int = -1
    sasl_server_max_receive_size: int = 524288
    connections_max_idle_ms: int = 600000
    connection_failed_authentication_delay_ms: int = 100
    max_connections: int = _INT_MAX
    max_connections_per_ip: int = _INT_MAX
    max_connections_per_ip_overrides: str = ""
    num_io_threads: int = 8
    _originals: tuple[tuple[str, str], ...] = field(default=(), repr=False)

    @staticmethod
    def of(broker_id: int, props: Mapping[str, Any] | None = None) -> KafkaConfig:
        """Parse ``props`` (Kafka key -> string or value); unknown keys and bad values raise
        ``InvalidArgumentError`` with a one-line message, and nothing is built."""
        if isinstance(broker_id, bool) or not isinstance(broker_id, int) or broker_id < 0:
            raise InvalidArgumentError(f"invalid broker id {broker_id!r}: expected an integer >= 0")
        given = dict(props or {})
        unknown = sorted(k for k in given if not is_known_key(k))
        if unknown:
            raise InvalidArgumentError(
                f"unknown broker config {unknown[0]!r} (known: {', '.join(KNOWN_KEYS)})"
            )
        values: dict[str, Any] = {}
        for key, (parse, default) in _KEYS.items():
            values[key.replace(".", "_")] = parse(key, given[key]) if key in given else parse(key, default)
        _check_socket_settings(values)
        originals = tuple(sorted((k, _stringify(v)) for k, v in given.items()))
        return KafkaConfig(broker_id=broker_id, _originals=originals, **values)

    def with_overrides(self, props: Mapping[str, Any]) -> KafkaConfig:
        """A copy with ``props`` applied on top (Kafka's dynamic broker config)."""
        merged: dict[str, Any] = dict(self._originals)
        merged.update(props)
        return KafkaConfig.of(self.broker_id, merged)

    def originals(self) -> dict[str, str]:
        """The settings as given, secrets left out (``is_sensitive_key``): DescribeConfigs shows these."""
        return {k: v for k, v in self._originals if not is_sensitive_key(k)}

    def security_originals(self) -> dict[str, str]:
        """Every setting as given, secrets included: for ``kafka_controller.security`` only."""
        return dict(self._originals)

    @property
    def max_connections_per_ip_overrides_map(self) -> dict[str, int]:
        return parse_ip_overrides(MAX_CONNECTIONS_PER_IP_OVERRIDES, self.max_connections_per_ip_overrides)

    @property
    def is_alter_isr_enabled(self) -> bool:
        return self.inter_broker_protocol_version.is_alter_isr_supported

    @property
    def uses_topic_id(self) -> bool:
        return self.inter_broker_protocol_version.uses_topic_id

    @property
    def is_feature_versioning_supported(self) -> bool:
        return self.inter_broker_protocol_version.is_feature_versioning_supported


def _check_socket_settings(values: Mapping[str, Any]) -> None:
    """The cross-checks of Kafka's ``KafkaConfig.validateValues`` on the socket-server settings."""
    queued, request_max = values["queued_max_request_bytes"], values["socket_request_max_bytes"]
    if 0 < queued < request_max:
        raise InvalidArgumentError(
            f"invalid value {queued} for {QUEUED_MAX_REQUEST_BYTES}: must be <= 0 (no bound) "
            f"or at least {SOCKET_REQUEST_MAX_BYTES} ({request_max})"
        )
    if values["max_connections_per_ip"] == 0 and not values["max_connections_per_ip_overrides"]:
        raise InvalidArgumentError(
            f"invalid value 0 for {MAX_CONNECTIONS_PER_IP}: "
            f"it can be zero only if {MAX_CONNECTIONS_PER_IP_OVERRIDES} is set"
        )
