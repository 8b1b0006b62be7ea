"""How to reach ZooKeeper: connect string (with chroot), session timeout, credentials (SASL
DIGEST-MD5 as Kafka's JAAS ``Client`` section gives it, or the ``digest`` scheme) and ACLs, TLS,
and the adapter's tuning knobs. Validated up front, one clear error per mistake.

ACLs follow Kafka's ``zookeeper.set.acl``: when on, every znode we create gets "creator has all"
(every identity the session authenticated as: ``sasl:<user>``, ``digest:<user>:<hash>``, or
``x509:<subject>`` for a client certificate) plus world-read, except under Kafka's sensitive roots
(``/config/users``, ``/config/brokers``, ``/delegation_token``), which get no world-read
(``ZkData.defaultAcls``). Where Kafka's settings come from (``$KAFKA_OPTS``, ``zookeeper.ssl.*``)
is ``client_security``'s business; this object only holds the result.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kafka_controller.domain.errors import InvalidArgumentError
from kafka_controller.zk.paths import SENSITIVE_ROOT_PATHS, parse_connect_string, split_chroot

# ZooKeeper permission bits.
PERM_READ = 1
PERM_ALL = 31

#: ACL triples ``(perms, scheme, id)``.
AclTriple = tuple[int, str, str]
OPEN_ACL_UNSAFE: tuple[AclTriple, ...] = ((PERM_ALL, "world", "anyone"),)
CREATOR_ALL_ACL: tuple[AclTriple, ...] = ((PERM_ALL, "auth", ""),)
READ_ACL_UNSAFE: tuple[AclTriple, ...] = ((PERM_READ, "world", "anyone"),)


#: Digest credentials ``USER:PASSWORD`` for every process of the project (brokers, CLI, local
#: clusters). An environment variable, as Kafka takes them from a JAAS file and not from its command
#: line: arguments are visible to every user in ``ps``.
ZK_DIGEST_ENV = "KAFKA_CONTROLLER_ZK_DIGEST"


def digest_from_env(environ: Mapping[str, str] | None = None) -> tuple[str, str] | None:
    """The credentials in ``$KAFKA_CONTROLLER_ZK_DIGEST``, or None when it is unset or empty."""
    raw = (os.environ if environ is None else environ).get(ZK_DIGEST_ENV, "")
    if not raw:
        return None
    user, sep, password = raw.partition(":")
    if not sep or not user or not password:
        raise InvalidArgumentError(f"${ZK_DIGEST_ENV} must be USER:PASSWORD (both non-empty)")
    return user, password


#: Paths per multi-read (``ZkClientConfig.read_chunk``).
DEFAULT_READ_CHUNK = 1000


@dataclass(frozen=True, slots=True)
class ZkClientConfig:
    """Everything the kazoo store needs to connect. Defaults are Kafka's where Kafka has one."""

    connect_string: str
    session_timeout_ms: int = 18_000  # zookeeper.session.timeout.ms
    connection_timeout_ms: int = 18_000  # zookeeper.connection.timeout.ms (defaults to the session's)
    #: ``(user, password)`` for digest authentication, or None.
    digest: tuple[str, str] | None = field(default=None, repr=False)  # never in a log line
    #: ``(username, password)`` for SASL DIGEST-MD5 (Kafka's JAAS ``Client`` section), or None.
    sasl: tuple[str, str] | None = field(default=None, repr=False)  # never in a log line
    #: Kafka's ``zookeeper.set.acl``; None = on exactly when ``digest`` is set (the project's
    #: ``$KAFKA_CONTROLLER_ZK_DIGEST`` always meant ACLs); Kafka's own default is off.
    set_acl: bool | None = None
    use_ssl: bool = False
    certfile: str | None = None
    keyfile: str | None = None
    keyfile_password: str | None = field(default=None, repr=False)
    ca: str | None = None
    verify_certs: bool = True
    #: ``zookeeper.ssl.endpoint.identification.algorithm=HTTPS``: the server's certificate must name
    #: the host connected to.
    check_hostname: bool = False
    #: Create the chroot and Kafka's top-level paths when missing (Kafka's broker does).
    create_paths: bool = True
    #: Multi-read (opcode 22): None = use it and fall back if the server rejects it; False = never.
    multi_read: bool | None = None
    read_chunk: int = DEFAULT_READ_CHUNK
    max_in_flight: int = 8
    request_timeout_s: float = 30.0

    def __post_init__(self) -> None:
        parse_connect_string(self.connect_string)  # raises on an empty or malformed string
        if self.session_timeout_ms < 1000:
            raise InvalidArgumentError(f"session timeout {self.session_timeout_ms} ms is below 1000 ms")
        if self.connection_timeout_ms < 100:
            raise InvalidArgumentError(f"connection timeout {self.connection_timeout_ms} ms is below 100 ms")
        if self.digest is not None:
            user, password = self.digest
            if not user or ":" in user:
                raise InvalidArgumentError(f"digest user {user!r} must be non-empty and contain no ':'")
            if not password:
                raise InvalidArgumentError("digest password is empty")
        if self.sasl is not None:
            user, password = self.sasl
            if not user:
                raise InvalidArgumentError("ZooKeeper SASL username is empty")
            if not password:
                raise InvalidArgumentError("ZooKeeper SASL password is empty")
        if self.acl_enabled and not self.authenticated:
            # Kafka's KafkaServer refuses zookeeper.set.acl=true without SASL or TLS likewise.
            raise InvalidArgumentError(
                "zookeeper.set.acl needs an authenticated ZooKeeper client (SASL, digest "
                "credentials or a TLS client certificate): the creator must have an identity"
            )
        if (self.certfile is None) != (self.keyfile is None):
            raise InvalidArgumentError("TLS certfile and keyfile must be given together")
        if (self.certfile or self.ca) and not self.use_ssl:
            raise InvalidArgumentError("TLS files were given but use_ssl is off")
        if self.check_hostname and not (self.use_ssl and self.verify_certs):
            raise InvalidArgumentError("check_hostname needs use_ssl and verify_certs")
        if not 1 <= self.read_chunk <= 10_000:
            raise InvalidArgumentError(f"read_chunk {self.read_chunk} is outside 1..10000")
        if not 1 <= self.max_in_flight <= 64:
            raise InvalidArgumentError(f"max_in_flight {self.max_in_flight} is outside 1..64")

    @property
    def hosts(self) -> str:
        return split_chroot(self.connect_string)[0]

    @property
    def chroot(self) -> str:
        return split_chroot(self.connect_string)[1]

    @property
    def acl_enabled(self) -> bool:
        return self.digest is not None if self.set_acl is None else self.set_acl

    @property
    def authenticated(self) -> bool:
        """Whether the session will have an identity of its own for "creator has all" ACLs."""
        return (
            self.digest is not None or self.sasl is not None or (self.use_ssl and self.certfile is not None)
        )

    def sasl_options(self) -> dict[str, str] | None:
        """kazoo's ``sasl_options`` for DIGEST-MD5 (pure-sasl does the mechanism)."""
        if self.sasl is None:
            return None
        return {"mechanism": "DIGEST-MD5", "username": self.sasl[0], "password": self.sasl[1]}

    def auth_data(self) -> list[tuple[str, str]]:
        return [("digest", f"{self.digest[0]}:{self.digest[1]}")] if self.digest else []

    def acl_triples(self, path: str) -> tuple[AclTriple, ...]:
        """Kafka's ``ZkData.defaultAcls``: ACLs for a znode we create at ``path`` (chroot-relative)."""
        if not self.acl_enabled:
            return OPEN_ACL_UNSAFE
        if any(path == root or path.startswith(root + "/") for root in SENSITIVE_ROOT_PATHS):
            return CREATOR_ALL_ACL
        return CREATOR_ALL_ACL + READ_ACL_UNSAFE

    def kazoo_kwargs(self, *, with_chroot: bool = True) -> dict[str, Any]:
        """Keyword arguments for ``KazooClient`` (TLS options passed through as given)."""
        kwargs: dict[str, Any] = {
            "hosts": self.connect_string if with_chroot else self.hosts,
            "timeout": self.session_timeout_ms / 1000.0,
            "auth_data": self.auth_data() or None,
            "connection_retry": {"max_tries": -1, "delay": 0.1, "backoff": 2, "max_delay": 2.0},
            "command_retry": {"max_tries": 0},
        }
        if self.sasl is not None:
            kwargs["sasl_options"] = self.sasl_options()
        if self.use_ssl:
            kwargs.update(
                use_ssl=True,
                certfile=self.certfile,
                keyfile=self.keyfile,
                keyfile_password=self.keyfile_password,
                ca=self.ca,
                verify_certs=self.verify_certs,
                check_hostname=self.check_hostname,
            )
        return kwargs
