"""Security for the embedded ZooKeeper server: SASL DIGEST-MD5 logins and a TLS client port.

What a ZooKeeper operator writes for Kafka (Kafka's docs/security.html, ZooKeeper's admin guide),
rendered for the server this project starts:

* SASL: a JAAS file whose ``Server`` section is
  ``org.apache.zookeeper.server.auth.DigestLoginModule required user_<name>="<password>" ...;``,
  handed to the JVM as ``-Djava.security.auth.login.config``, and
  ``authProvider.sasl=org.apache.zookeeper.server.auth.SASLAuthenticationProvider``. The often
  quoted ``requireClientAuthScheme=sasl`` enforces nothing; the bundled ZooKeeper (3.7+) refuses
  unauthenticated sessions with ``enforce.auth.enabled=true`` + ``enforce.auth.schemes=sasl``
  (3.6's ``sessionRequireClientSASLAuth=true`` for older jars).
* TLS: ``secureClientPort``, Netty's connection factory (the NIO one cannot do TLS),
  ZooKeeper's own ``ssl.*`` keys (``ssl.keyStore.location``/``password``/``type``,
  ``ssl.trustStore.*``, ``ssl.clientAuth``; PEM is read natively) and the ``x509`` auth provider,
  which turns a client certificate into the identity ``x509:<subject>``. The plain ``clientPort``
  stays open for the four-letter words the launcher's readiness check uses; with ``require_sasl``
  a client there can do nothing before it authenticates.

The JAAS file and ``zoo.cfg`` hold passwords: they are written with mode 0600 and never logged.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kafka_controller.domain.errors import InvalidArgumentError
from kafka_controller.zk.client_security import digest_login, read_jaas_file

DIGEST_LOGIN_MODULE = "org.apache.zookeeper.server.auth.DigestLoginModule"
SASL_PROVIDER = "org.apache.zookeeper.server.auth.SASLAuthenticationProvider"
X509_PROVIDER = "org.apache.zookeeper.server.auth.X509AuthenticationProvider"
NETTY_FACTORY = "org.apache.zookeeper.server.NettyServerCnxnFactory"
SERVER_SECTION = "Server"
JAAS_FILE = "zookeeper-jaas.conf"
#: The server's copy of an encrypted PEM keystore, key decrypted (mode 0600).
KEYSTORE_COPY = "zookeeper-keystore.pem"
#: ZooKeeper's server TLS keys a caller may set (passed to ``zoo.cfg`` as they are).
SERVER_TLS_KEYS = frozenset(
    {
        "ssl.keyStore.location",
        "ssl.keyStore.password",
        "ssl.keyStore.type",
        "ssl.trustStore.location",
        "ssl.trustStore.password",
        "ssl.trustStore.type",
        "ssl.clientAuth",
        "ssl.protocol",
        "ssl.enabledProtocols",
        "ssl.ciphersuites",
        "ssl.hostnameVerification",
    }
)
_USER = re.compile(r"^[A-Za-z0-9_.\-]+$")
_CLIENT_AUTH = frozenset({"none", "want", "need"})


def _java_quoted(value: str) -> str:
    """A Java ``StreamTokenizer`` quoted string holding ``value`` exactly."""
    if "\n" in value or "\r" in value:
        raise InvalidArgumentError("a ZooKeeper SASL password must be one line")
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def render_server_jaas(users: Mapping[str, str]) -> str:
    """The JAAS ``Server`` section that makes ZooKeeper accept these DIGEST-MD5 logins."""
    options = " ".join(f"user_{name}={_java_quoted(password)}" for name, password in sorted(users.items()))
    return f"{SERVER_SECTION} {{\n  {DIGEST_LOGIN_MODULE} required {options};\n}};\n"


@dataclass(frozen=True)
class ZkServerSecurity:
    """How an embedded server authenticates and encrypts. ``sasl_users`` (name -> password) makes
    the launcher write the JAAS file; ``jaas_config_file`` is an operator's own instead (its
    ``Server`` section is used). ``secure_port`` 0 picks a free port."""

    sasl_users: Mapping[str, str] = field(default_factory=dict, repr=False)
    jaas_config_file: Path | None = None
    require_sasl: bool = False
    secure_port: int | None = None
    #: ZooKeeper's ``ssl.*`` server keys (``SERVER_TLS_KEYS``).
    tls: Mapping[str, str] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        for name, password in self.sasl_users.items():
            if not _USER.match(name):
                raise InvalidArgumentError(
                    f"ZooKeeper SASL user {name!r} must be letters, digits, '.', '_' or '-'"
                )
            if not password:
                raise InvalidArgumentError(f"ZooKeeper SASL user {name} has an empty password")
        if self.sasl_users and self.jaas_config_file is not None:
            raise InvalidArgumentError("give ZooKeeper SASL users or a JAAS file, not both")
        if self.jaas_config_file is not None:
            self._check_jaas_file(self.jaas_config_file)
        if self.require_sasl and not self.sasl_enabled:
            raise InvalidArgumentError("requiring SASL needs SASL users or a JAAS file with a Server section")
        unknown = sorted(set(self.tls) - SERVER_TLS_KEYS)
        if unknown:
            raise InvalidArgumentError(
                f"unknown ZooKeeper TLS setting {unknown[0]!r} (known: {', '.join(sorted(SERVER_TLS_KEYS))})"
            )
        if self.secure_port is None and self.tls:
            raise InvalidArgumentError("ZooKeeper TLS settings need a secure client port")
        if self.secure_port is not None:
            if not 0 <= self.secure_port <= 65535:
                raise InvalidArgumentError(f"secure port {self.secure_port} is outside 0..65535")
            if not self.tls.get("ssl.keyStore.location"):
                raise InvalidArgumentError("a secure client port needs ssl.keyStore.location")
            for key in ("ssl.keyStore.location", "ssl.trustStore.location"):
                if self.tls.get(key) and not os.path.isfile(self.tls[key]):
                    raise InvalidArgumentError(f"{key} {self.tls[key]} is not a readable file")
            client_auth = self.tls.get("ssl.clientAuth", "need").lower()
            if client_auth not in _CLIENT_AUTH:
                raise InvalidArgumentError(
                    f"ssl.clientAuth must be one of none, want, need; got {client_auth!r}"
                )

    @staticmethod
    def _check_jaas_file(path: Path) -> None:
        sections = read_jaas_file(str(path))
        if SERVER_SECTION not in sections:
            raise InvalidArgumentError(f"JAAS file {path} has no {SERVER_SECTION} section")
        digest_login(sections[SERVER_SECTION], f"JAAS file {path} section {SERVER_SECTION}")

    @property
    def sasl_enabled(self) -> bool:
        return bool(self.sasl_users) or self.jaas_config_file is not None

    @property
    def enabled(self) -> bool:
        return self.sasl_enabled or self.secure_port is not None

    def jaas_path(self, data_dir: Path) -> Path | None:
        if self.jaas_config_file is not None:
            return Path(self.jaas_config_file).absolute()
        return data_dir / JAAS_FILE if self.sasl_users else None

    def write_files(self, data_dir: Path) -> None:
        """The JAAS file for ``sasl_users`` and the keystore copy (mode 0600 before any byte)."""
        if self.sasl_users:
            write_private(data_dir / JAAS_FILE, render_server_jaas(self.sasl_users))
        if self._decrypts_keystore:
            write_private(data_dir / KEYSTORE_COPY, self._decrypted_keystore())

    @property
    def _decrypts_keystore(self) -> bool:
        """Kafka's PEM keystores hold a PBES2-encrypted PKCS#8 key, which ZooKeeper's PEM reader
        cannot decrypt on Java 17 ("PBES2 SecretKeyFactory not available"): the server gets a copy
        with the key in clear, readable by its owner only, and no password."""
        return (
            self.secure_port is not None
            and self.tls.get("ssl.keyStore.type", "PEM").upper() == "PEM"
            and bool(self.tls.get("ssl.keyStore.password"))
        )

    def _decrypted_keystore(self) -> str:
        from cryptography.hazmat.primitives import serialization

        path = self.tls["ssl.keyStore.location"]
        data = Path(path).read_bytes()

        pem_blocks = [
            m.group(0) for m in re.finditer(rb"-----BEGIN ([A-Z ]+)-----.*?-----END \1-----", data, re.S)
        ]
        keys = [b for b in pem_blocks if b"PRIVATE KEY-----" in b.split(b"\n", 1)[0]]
        chain = [b for b in pem_blocks if b.startswith(b"-----BEGIN CERTIFICATE-----")]
        if len(keys) != 1 or not chain:
            raise InvalidArgumentError(
                f"ssl.keyStore.location {path}: expected one private key and its certificates"
            )
        try:
            key = serialization.load_pem_private_key(keys[0], self.tls["ssl.keyStore.password"].encode())
        except (ValueError, TypeError):
            raise InvalidArgumentError(
                f"ssl.keyStore.location {path}: the key does not open with ssl.keyStore.password"
            ) from None
        clear = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        return (clear + b"".join(c + b"\n" for c in chain)).decode("ascii")

    def jvm_flags(self, data_dir: Path) -> list[str]:
        path = self.jaas_path(data_dir)
        return [] if path is None else [f"-Djava.security.auth.login.config={path}"]

    def zoo_cfg_lines(
        self, secure_port: int | None, zookeeper_version: tuple[int, ...] | None, data_dir: Path, host: str
    ) -> str:
        lines: list[str] = []
        if self.sasl_enabled:
            lines.append(f"authProvider.sasl={SASL_PROVIDER}")
        if self.require_sasl:
            if zookeeper_version is not None and zookeeper_version[:2] < (3, 7):
                lines.append("sessionRequireClientSASLAuth=true")
            else:
                lines += ["enforce.auth.enabled=true", "enforce.auth.schemes=sasl"]
        if secure_port is not None:
            lines += [
                f"secureClientPort={secure_port}",
                f"secureClientPortAddress={host}",
                f"serverCnxnFactory={NETTY_FACTORY}",
                f"authProvider.x509={X509_PROVIDER}",
            ]
            tls = dict(self.tls)
            if self._decrypts_keystore:
                tls["ssl.keyStore.location"] = str(data_dir / KEYSTORE_COPY)
                del tls["ssl.keyStore.password"]
            lines += [f"{key}={value}" for key, value in sorted(tls.items())]
        return "".join(line + "\n" for line in lines)


def write_private(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` readable by its owner only, from the first byte on."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        os.fchmod(f.fileno(), 0o600)
        f.write(text)
    return path
