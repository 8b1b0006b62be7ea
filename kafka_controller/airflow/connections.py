"""Airflow connection fields -> the project's own settings, with one clear error per mistake.

Pure (no Airflow import): the hooks pass the connection's fields in, so the parsing rules are tested
without an Airflow installation. Two connection types, declared in ``provider.get_provider_info``:

``kafka_controller_cluster``
    *host* ``zk1:2181,zk2:2181`` (or bare hosts with *port*), *schema* the chroot (``/kafka``),
    *login*/*password* digest credentials, *extra* ``{"lifecycle": ..., "broker_defaults": {...},
    "session_timeout_ms": ..., "bootstrap_servers": "k1:9092,k2:9092", TLS options}``; without
    ``bootstrap_servers`` the Kafka admin requests go to the controller found in ZooKeeper.
    ZooKeeper as Kafka secures it: ``zk_jaas_config_file`` (a JAAS file whose ``Client`` section,
    or the one ``zk_sasl_client_config`` names, holds the DIGEST-MD5 login, as Kafka's
    ``-Djava.security.auth.login.config``) and ``zk_tls_config_file`` (Kafka's
    ``--zk-tls-config-file`` properties); the secrets stay in those files on the workers.
    The brokers as Kafka secures them: ``security_protocol`` (PLAINTEXT, SSL, SASL_PLAINTEXT,
    SASL_SSL), ``sasl_mechanism`` (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512), ``ssl_cafile``,
    ``ssl_certfile``, ``ssl_keyfile`` (kafka-python's names); with a SASL protocol *login* and
    *password* are the SASL username and password (and not ZooKeeper digest credentials).
``kafka_controller_audit``
    *extra* ``{"url": "postgresql+psycopg://user@host/db"}`` with the password in *password*, or the
    URL built from the fields: *host*, *port*, *login*, *password*, *schema* (database, or the SQLite
    file when *extra* ``{"driver": "sqlite"}``).

Secrets stay in these objects: ``describe()`` and ``redacted_url`` are what may be logged, put in
XComs or written to the audit store.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kafka_controller.airflow.connection_fields import KAFKA_SECURITY_EXTRAS, _extras, _flag, _int
from kafka_controller.broker.bootstrap import parse_bootstrap_servers
from kafka_controller.controller.config import KafkaConfig
from kafka_controller.domain.errors import InvalidArgumentError
from kafka_controller.security.client_config import PLAINTEXT, ClientSecurity, from_fields
from kafka_controller.zk import client_security as cs
from kafka_controller.zk.paths import split_chroot
from kafka_controller.zk.security import ZkClientConfig

if TYPE_CHECKING:
    from airflow.models.connection import Connection as MetadataDbConnection
    from airflow.sdk import Connection

CLUSTER_CONN_TYPE = "kafka_controller_cluster"
AUDIT_CONN_TYPE = "kafka_controller_audit"
DEFAULT_CLUSTER_CONN_ID = "kafka_controller_default"
DEFAULT_AUDIT_CONN_ID = "kafka_controller_audit_default"

_CLUSTER_EXTRAS = frozenset(
    {
        "session_timeout_ms",
        "connection_timeout_ms",
        "set_acl",
        "use_ssl",
        "certfile",
        "keyfile",
        "ca",
        "verify_certs",
        "lifecycle",
        "broker_defaults",
        "request_timeout_s",
        "bootstrap_servers",
        "zk_jaas_config_file",
        "zk_sasl_client_config",
        "zk_tls_config_file",
        *KAFKA_SECURITY_EXTRAS,
    }
)
_AUDIT_EXTRAS = frozenset({"url", "driver", "query"})


@dataclass(frozen=True)
class ClusterConnection:
    """How to reach one cluster's ZooKeeper, and how to stop and start its brokers."""

    conn_id: str
    connect_string: str  #: hosts and chroot; never credentials
    digest: tuple[str, str] | None = field(default=None, repr=False)
    #: SASL DIGEST-MD5 ``(username, password)`` from ``zk_jaas_config_file``.
    sasl: tuple[str, str] | None = field(default=None, repr=False)
    session_timeout_ms: int = 18_000
    connection_timeout_ms: int = 15_000
    set_acl: bool | None = None
    use_ssl: bool = False
    certfile: str | None = None
    keyfile: str | None = None
    ca: str | None = None
    verify_certs: bool = True
    check_hostname: bool = False
    keyfile_password: str | None = field(default=None, repr=False)
    request_timeout_s: float = 30.0
    #: ``"local"``, ``{"type": "command", "stop": ..., "start": ...}``, or None (not configured).
    lifecycle: Any = None
    #: Broker settings the dry-run controller assumes (e.g. ``unclean.leader.election.enable``).
    broker_defaults: dict[str, str] = field(default_factory=dict)
    #: Kafka brokers (``host:port``) for admin requests; None: the controller from ZooKeeper.
    bootstrap_servers: tuple[str, ...] | None = None
    #: TLS and SASL to the brokers (``security_protocol``... extras; with SASL the connection's
    #: login and password are the SASL username and password).
    kafka_security: ClientSecurity = field(default=PLAINTEXT, repr=False)

    def zk_config(self) -> ZkClientConfig:
        """A ``ZkClientConfig`` that never creates paths: operations read and act, they do not bootstrap."""
        return ZkClientConfig(
            self.connect_string,
            session_timeout_ms=self.session_timeout_ms,
            connection_timeout_ms=self.connection_timeout_ms,
            digest=self.digest,
            sasl=self.sasl,
            set_acl=self._set_acl(),
            use_ssl=self.use_ssl,
            certfile=self.certfile,
            keyfile=self.keyfile,
            ca=self.ca,
            verify_certs=self.verify_certs,
            check_hostname=self.check_hostname,
            keyfile_password=self.keyfile_password,
            create_paths=False,
            request_timeout_s=self.request_timeout_s,
        )

    def _set_acl(self) -> bool | None:
        """The ``set_acl`` extra, else secure ACLs whenever the connection logs in with SASL or a
        client certificate, as Kafka's admin tools do."""
        if self.set_acl is not None:
            return self.set_acl
        return cs.tool_acls(sasl=self.sasl, certfile=self.certfile if self.use_ssl else None) or None

    def describe(self) -> dict[str, Any]:
        """What may be logged or recorded: no password, no key material."""
        return {
            "conn_id": self.conn_id,
            "zookeeper": self.connect_string,
            "digest_user": self.digest[0] if self.digest else None,
            "zk_sasl_user": self.sasl[0] if self.sasl else None,
            "tls": self.use_ssl,
            "bootstrap_servers": ",".join(self.bootstrap_servers) if self.bootstrap_servers else None,
            **self.kafka_security.described(),
        }


def airflow_fields(c: Connection | MetadataDbConnection) -> dict[str, Any]:
    """The fields of an Airflow ``Connection`` (the task SDK's, or the metadata DB's row the api-server
    reads) that ``cluster_connection`` and ``audit_connection`` take."""
    return {
        "host": c.host,
        "port": c.port,
        "schema": c.schema,
        "login": c.login,
        "password": c.password,
        "extra": c.extra_dejson,
    }


def cluster_connection(
    conn_id: str,
    *,
    host: str | None,
    port: int | None = None,
    schema: str | None = None,
    login: str | None = None,
    password: str | None = None,
    extra: Mapping[str, Any] | None = None,
) -> ClusterConnection:
    """Parse a ``kafka_controller_cluster`` connection; ``InvalidArgumentError`` names the connection
    and the bad field."""
    try:
        return _cluster_connection(conn_id, host, port, schema, login, password, extra)
    except InvalidArgumentError as e:
        if str(e).startswith("connection "):
            raise
        raise InvalidArgumentError(f"connection {conn_id!r}: {e}") from None


def _cluster_connection(
    conn_id: str,
    host: str | None,
    port: int | None,
    schema: str | None,
    login: str | None,
    password: str | None,
    extra: Mapping[str, Any] | None,
) -> ClusterConnection:
    if not host or not host.strip():
        raise InvalidArgumentError(f"connection {conn_id!r}: host is empty (expected zk1:2181,zk2:2181)")
    hosts, chroot_in_host = split_chroot(host.strip())
    items = [h.strip() for h in hosts.split(",")]
    if any(not h for h in items):
        raise InvalidArgumentError(f"connection {conn_id!r}: host {host!r} has an empty entry")
    with_port = []
    for h in items:
        name, sep, p = h.rpartition(":")
        if sep and name:
            _int(conn_id, f"port of {h!r}", p)
            with_port.append(h)
        elif port:
            with_port.append(f"{h}:{_int(conn_id, 'port', port)}")
        else:
            raise InvalidArgumentError(
                f"connection {conn_id!r}: host {h!r} has no port and the port field is empty"
            )
    chroot = (schema or "").strip()
    if chroot and chroot_in_host:
        raise InvalidArgumentError(
            f"connection {conn_id!r}: the chroot is given twice "
            f"(in host {chroot_in_host!r} and schema {chroot!r})"
        )
    chroot = chroot or chroot_in_host
    if chroot and not chroot.startswith("/"):
        chroot = "/" + chroot
    connect = ",".join(with_port) + chroot.rstrip("/")
    split_chroot(connect)  # rejects '..', '//' and the like with its own message
    if bool(login) != bool(password):
        raise InvalidArgumentError(f"connection {conn_id!r}: digest credentials need both login and password")
    ex = _extras(conn_id, CLUSTER_CONN_TYPE, extra, _CLUSTER_EXTRAS)
    defaults = ex.get("broker_defaults", {})
    if not isinstance(defaults, Mapping) or not all(isinstance(k, str) for k in defaults):
        raise InvalidArgumentError(f"connection {conn_id!r}: broker_defaults must be an object of settings")
    if defaults:
        KafkaConfig.of(0, dict(defaults))  # unknown keys and bad values refused here, one line
    security = _kafka_security(conn_id, ex, login, password)
    tls = _zk_tls(conn_id, ex) or {
        "use_ssl": _flag(conn_id, "use_ssl", ex.get("use_ssl", False)),
        "certfile": ex.get("certfile"),
        "keyfile": ex.get("keyfile"),
        "ca": ex.get("ca"),
        "verify_certs": _flag(conn_id, "verify_certs", ex.get("verify_certs", True)),
    }
    conn = ClusterConnection(
        conn_id=conn_id,
        connect_string=connect,
        digest=(login, password) if login and password and not security.sasl else None,
        sasl=_zk_sasl(ex),
        session_timeout_ms=_int(conn_id, "session_timeout_ms", ex.get("session_timeout_ms", 18_000)),
        connection_timeout_ms=_int(conn_id, "connection_timeout_ms", ex.get("connection_timeout_ms", 15_000)),
        set_acl=_flag(conn_id, "set_acl", ex["set_acl"]) if "set_acl" in ex else None,
        **tls,
        request_timeout_s=float(ex.get("request_timeout_s", 30.0)),
        lifecycle=ex.get("lifecycle"),
        broker_defaults={str(k): str(v) for k, v in defaults.items()},
        bootstrap_servers=_bootstrap(ex.get("bootstrap_servers")),
        kafka_security=security,
    )
    conn.zk_config()  # every remaining rule (timeouts, TLS pairs, ACL needs digest)
    return conn


def _kafka_security(
    conn_id: str, ex: Mapping[str, Any], login: str | None, password: str | None
) -> ClientSecurity:
    """The brokers' TLS and SASL from the extras, mapped as ``--command-config`` is
    (``security.client_config``): with a SASL protocol the login and password are SASL's."""
    protocol = str(ex.get("security_protocol") or "PLAINTEXT")
    sasl = protocol.strip().upper().startswith("SASL_")
    return from_fields(
        security_protocol=protocol,
        sasl_mechanism=ex.get("sasl_mechanism"),
        username=login or None if sasl else None,
        password=password or None if sasl else None,
        ssl_cafile=ex.get("ssl_cafile"),
        ssl_certfile=ex.get("ssl_certfile"),
        ssl_keyfile=ex.get("ssl_keyfile"),
        where=f"connection {conn_id!r}",
    )


def _zk_sasl(ex: Mapping[str, Any]) -> tuple[str, str] | None:
    """The DIGEST-MD5 login of ``zk_jaas_config_file``'s client section, as Kafka reads it."""
    path = ex.get("zk_jaas_config_file")
    if not path:
        return None
    section = str(ex.get("zk_sasl_client_config") or cs.DEFAULT_CLIENT_SECTION)
    login = cs.sasl_from_jaas_file(str(path), section)
    if login is None:
        raise InvalidArgumentError(f"zk_jaas_config_file {path} has no {section} section")
    return login


def _zk_tls(conn_id: str, ex: Mapping[str, Any]) -> dict[str, Any]:
    """Kafka's ``--zk-tls-config-file`` settings, in place of the ``use_ssl``/``certfile``/... extras."""
    path = ex.get("zk_tls_config_file")
    if not path:
        return {}
    clash = sorted({"use_ssl", "certfile", "keyfile", "ca", "verify_certs"} & set(ex))
    if clash:
        raise InvalidArgumentError(f"connection {conn_id!r}: give zk_tls_config_file or {clash[0]}, not both")
    return cs.tls_config_file(str(path))


def _bootstrap(value: Any) -> tuple[str, ...] | None:
    if value is not None and not isinstance(value, str | list):
        raise InvalidArgumentError(f"bootstrap_servers must be host:port[,host:port], got {value!r}")
    return parse_bootstrap_servers(value)


@dataclass(frozen=True)
class AuditConnection:
    """An audit store reached by a SQLAlchemy URL; ``url`` holds the password, ``redacted_url`` not."""

    conn_id: str
    url: str = field(repr=False)
    redacted_url: str = ""


def audit_connection(
    conn_id: str,
    *,
    host: str | None = None,
    port: int | None = None,
    schema: str | None = None,
    login: str | None = None,
    password: str | None = None,
    extra: Mapping[str, Any] | None = None,
) -> AuditConnection:
    """Parse a ``kafka_controller_audit`` connection into a checked SQLAlchemy URL."""
    # Imported on use: SQLAlchemy is optional (the 'audit' extra).
    from sqlalchemy.engine import URL, make_url

    from kafka_controller.audit.engine import parse_url, redacted

    ex = _extras(conn_id, AUDIT_CONN_TYPE, extra, _AUDIT_EXTRAS)
    try:
        if "url" in ex:
            url = make_url(str(ex["url"]))
            if password and not url.password:
                url = url.set(password=password)
        else:
            driver = str(ex.get("driver", "postgresql+psycopg"))
            if driver.startswith("sqlite"):
                if not schema:
                    raise InvalidArgumentError(
                        f"connection {conn_id!r}: a SQLite audit store needs the file path in schema"
                    )
                url = URL.create(driver, database=schema)
            else:
                if not host:
                    raise InvalidArgumentError(f"connection {conn_id!r}: host is empty")
                url = URL.create(
                    driver,
                    username=login or None,
                    password=password or None,
                    host=host,
                    port=_int(conn_id, "port", port) if port else None,
                    database=schema or None,
                    query=dict(ex.get("query", {})),
                )
    except InvalidArgumentError:
        raise
    except Exception as e:  # SQLAlchemy's ArgumentError/ValueError: the URL text is at fault
        raise InvalidArgumentError(f"connection {conn_id!r}: bad audit URL ({type(e).__name__})") from None
    try:
        parse_url(url)
    except InvalidArgumentError as e:
        raise InvalidArgumentError(f"connection {conn_id!r}: {e}") from None
    return AuditConnection(conn_id, url.render_as_string(hide_password=False), redacted(url))


# -- as environment variables ------------------------------------------------------------------------


def conn_env_var(conn_id: str) -> str:
    """The variable Airflow reads a connection from: ``AIRFLOW_CONN_<ID in upper case>``."""
    return "AIRFLOW_CONN_" + conn_id.upper()


def cluster_conn_json(
    connect_string: str,
    chroot: str = "",
    *,
    login: str | None = None,
    password: str | None = None,
    **extra: Any,
) -> str:
    """A ``kafka_controller_cluster`` connection in Airflow's JSON form, for ``AIRFLOW_CONN_*``
    (how a script or a demo hands Airflow a cluster without touching its metadata DB)."""
    conn: dict[str, Any] = {
        "conn_type": CLUSTER_CONN_TYPE,
        "host": connect_string,
        "schema": chroot,
        "extra": extra,
    }
    if login:
        conn.update(login=login, password=password)
    return json.dumps(conn)


def audit_conn_json(url: str) -> str:
    """A ``kafka_controller_audit`` connection in Airflow's JSON form, the URL in *extra*."""
    return json.dumps({"conn_type": AUDIT_CONN_TYPE, "extra": {"url": url}})
