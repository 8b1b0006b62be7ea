"""Kafka's own ways of telling a ZooKeeper client to authenticate and to use TLS, read for a Python
process.

A Kafka broker or tool gets its ZooKeeper SASL login from Java system properties, which operators
put in ``KAFKA_OPTS`` (``kafka-run-class.sh`` hands it to the JVM):

* ``-Djava.security.auth.login.config=FILE``: a JAAS file; its ``Client`` section (another name
  with ``-Dzookeeper.sasl.clientconfig=NAME``) holds
  ``org.apache.zookeeper.server.auth.DigestLoginModule required username="..." password="...";``,
  ZooKeeper's DIGEST-MD5 login.
* ``-Dzookeeper.sasl.client=false`` turns SASL off; with a ``Client`` section present that is an
  error, as Kafka's ``JaasUtils.isZkSaslEnabled`` makes it.

The Python processes here read the same variable and the same file, so one ``KAFKA_OPTS`` serves a
Java tool and this project alike. Only DIGEST-MD5 is spoken (Kerberos needs a KDC and a JVM).

TLS comes with Kafka 2.5+'s names (``KafkaConfig.ZkSslConfigToSystemPropertyMap``): in a broker's
settings, or in the properties file that Kafka's tools take as ``--zk-tls-config-file``. The
keystore and truststore must be PEM (Python's ``ssl`` reads nothing else); a PEM keystore holds the
private key (encrypted with ``zookeeper.ssl.keystore.password``, or not) and the certificate chain.

Errors name the file, the section or the key, never a value: the values are passwords.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from typing import Any

from kafka_controller.domain.errors import InvalidArgumentError
from kafka_controller.security import jaas
from kafka_controller.security.properties import read_properties, read_settings_text
from kafka_controller.zk.security import digest_from_env

KAFKA_OPTS_ENV = "KAFKA_OPTS"
JAAS_CONFIG_PROPERTY = "java.security.auth.login.config"
SASL_CLIENT_PROPERTY = "zookeeper.sasl.client"
SASL_CLIENT_CONFIG_PROPERTY = "zookeeper.sasl.clientconfig"
DEFAULT_CLIENT_SECTION = "Client"
DIGEST_LOGIN_MODULE = "org.apache.zookeeper.server.auth.DigestLoginModule"

# Kafka's ZooKeeper TLS settings (KafkaConfig.scala, "zookeeper.ssl.*").
ZK_SET_ACL = "zookeeper.set.acl"
ZK_SSL_CLIENT_ENABLE = "zookeeper.ssl.client.enable"
ZK_CLIENT_CNXN_SOCKET = "zookeeper.clientCnxnSocket"
ZK_SSL_KEYSTORE_LOCATION = "zookeeper.ssl.keystore.location"
ZK_SSL_KEYSTORE_PASSWORD = "zookeeper.ssl.keystore.password"
ZK_SSL_KEYSTORE_TYPE = "zookeeper.ssl.keystore.type"
ZK_SSL_TRUSTSTORE_LOCATION = "zookeeper.ssl.truststore.location"
ZK_SSL_TRUSTSTORE_PASSWORD = "zookeeper.ssl.truststore.password"
ZK_SSL_TRUSTSTORE_TYPE = "zookeeper.ssl.truststore.type"
ZK_SSL_PROTOCOL = "zookeeper.ssl.protocol"
ZK_SSL_ENABLED_PROTOCOLS = "zookeeper.ssl.enabled.protocols"
ZK_SSL_CIPHER_SUITES = "zookeeper.ssl.cipher.suites"
ZK_SSL_ENDPOINT_IDENTIFICATION_ALGORITHM = "zookeeper.ssl.endpoint.identification.algorithm"
ZK_SSL_CRL_ENABLE = "zookeeper.ssl.crl.enable"
ZK_SSL_OCSP_ENABLE = "zookeeper.ssl.ocsp.enable"

#: Every ZooKeeper-client key a broker's settings may hold (``KafkaConfig`` accepts these).
ZK_CLIENT_KEYS: frozenset[str] = frozenset(
    {
        ZK_SET_ACL,
        ZK_SSL_CLIENT_ENABLE,
        ZK_CLIENT_CNXN_SOCKET,
        ZK_SSL_KEYSTORE_LOCATION,
        ZK_SSL_KEYSTORE_PASSWORD,
        ZK_SSL_KEYSTORE_TYPE,
        ZK_SSL_TRUSTSTORE_LOCATION,
        ZK_SSL_TRUSTSTORE_PASSWORD,
        ZK_SSL_TRUSTSTORE_TYPE,
        ZK_SSL_PROTOCOL,
        ZK_SSL_ENABLED_PROTOCOLS,
        ZK_SSL_CIPHER_SUITES,
        ZK_SSL_ENDPOINT_IDENTIFICATION_ALGORITHM,
        ZK_SSL_CRL_ENABLE,
        ZK_SSL_OCSP_ENABLE,
    }
)
#: The keys Kafka's tools read from a ``--zk-tls-config-file`` (``zookeeper.set.acl`` is a broker's).
ZK_TLS_KEYS: frozenset[str] = ZK_CLIENT_KEYS - {ZK_SET_ACL}
_PROTOCOLS = frozenset({"TLS", "TLSv1.2", "TLSv1.3"})


# -- SASL ---------------------------------------------------------------------------------------
def java_system_properties(kafka_opts: str) -> dict[str, str]:
    """The ``-Dname=value`` properties of a JVM option string (other options are the JVM's)."""
    try:
        words = shlex.split(kafka_opts)
    except ValueError as e:
        raise InvalidArgumentError(f"${KAFKA_OPTS_ENV} cannot be split into options: {e}") from None
    props: dict[str, str] = {}
    for word in words:
        if word.startswith("-D") and len(word) > 2:
            name, _, value = word[2:].partition("=")
            props[name] = value
    return props


def jaas_sections(text: str, where: str) -> dict[str, str]:
    """The sections ``Name { entries };`` of a JAAS file, each body as written (Java's
    ``ConfigFile`` syntax: ``//`` and ``/* */`` comments, quoted values may hold braces)."""
    sections: dict[str, str] = {}
    pos, n = 0, len(text)

    def skip() -> int:
        i = pos
        while i < n:
            if text[i].isspace():
                i += 1
            elif text.startswith("//", i):
                end = text.find("\n", i)
                i = n if end < 0 else end + 1
            elif text.startswith("/*", i):
                end = text.find("*/", i + 2)
                if end < 0:
                    raise InvalidArgumentError(f"invalid JAAS file {where}: unterminated comment")
                i = end + 2
            else:
                break
        return i

    while (pos := skip()) < n:
        start = pos
        while pos < n and (text[pos].isalnum() or text[pos] in "._-$"):
            pos += 1
        name = text[start:pos]
        if not name:
            raise InvalidArgumentError(
                f"invalid JAAS file {where} at character {start}: expected a section name"
            )
        pos = skip()
        if pos >= n or text[pos] != "{":
            raise InvalidArgumentError(f"invalid JAAS file {where}: expected '{{' after section {name}")
        body_start = pos + 1
        pos = body_start
        quote: str | None = None
        while pos < n:
            ch = text[pos]
            if quote:
                if ch == "\\":
                    pos += 1
                elif ch == quote:
                    quote = None
            elif ch in "\"'":
                quote = ch
            elif ch == "}":
                break
            pos += 1
        if pos >= n:
            raise InvalidArgumentError(f"invalid JAAS file {where}: section {name} has no closing '}}'")
        body = text[body_start:pos]
        pos += 1
        pos = skip()
        if pos >= n or text[pos] != ";":
            raise InvalidArgumentError(f"invalid JAAS file {where}: section {name} must end with '}};'")
        pos += 1
        if name in sections:
            raise InvalidArgumentError(f"invalid JAAS file {where}: section {name} appears twice")
        sections[name] = body
    return sections


def read_jaas_file(path: str) -> dict[str, str]:
    """The sections of the JAAS file at ``path``; one-line errors for a missing or huge file."""
    return jaas_sections(read_settings_text(path, "the JAAS file"), path)


def digest_login(section_body: str, where: str, *, user_key: str = "username") -> dict[str, str]:
    """The options of the one ``DigestLoginModule`` entry of a JAAS section."""
    entry = jaas.parse(section_body, where)
    if entry.login_module != DIGEST_LOGIN_MODULE:
        raise InvalidArgumentError(
            f"{where}: login module {entry.login_module} is not supported; ZooKeeper's SASL here is "
            f"DIGEST-MD5 ({DIGEST_LOGIN_MODULE})"
        )
    return dict(entry.options)


def sasl_from_kafka_opts(environ: Mapping[str, str] | None = None) -> tuple[str, str] | None:
    """The DIGEST-MD5 ``(username, password)`` that ``$KAFKA_OPTS`` gives the ZooKeeper client, or
    None when it names no JAAS file or the file has no client section (ZooKeeper then connects
    without SASL, as Kafka does)."""
    env = os.environ if environ is None else environ
    props = java_system_properties(env.get(KAFKA_OPTS_ENV, ""))
    path = props.get(JAAS_CONFIG_PROPERTY)
    if not path:
        return None
    section = props.get(SASL_CLIENT_CONFIG_PROPERTY) or DEFAULT_CLIENT_SECTION
    sasl_on = props.get(SASL_CLIENT_PROPERTY, "true").strip().lower() != "false"
    return sasl_from_jaas_file(path, section, sasl_client=sasl_on)


def sasl_from_jaas_file(
    path: str, section: str = DEFAULT_CLIENT_SECTION, *, sasl_client: bool = True
) -> tuple[str, str] | None:
    """The DIGEST-MD5 login in ``section`` of the JAAS file at ``path``, or None without it."""
    body = read_jaas_file(path).get(section)
    if body is None:
        return None
    if not sasl_client:
        raise InvalidArgumentError(
            f"JAAS file {path} has a {section} section but -D{SASL_CLIENT_PROPERTY}=false turns "
            "SASL off for ZooKeeper: remove one of the two"
        )
    where = f"JAAS file {path} section {section}"
    options = digest_login(body, where)
    username, password = options.get("username", ""), options.get("password", "")
    if not username or not password:
        raise InvalidArgumentError(f"{where}: DigestLoginModule needs username and password")
    return username, password


# -- TLS ----------------------------------------------------------------------------------------
def _flag(props: Mapping[str, str], key: str) -> bool:
    value = str(props.get(key, "false")).strip().lower()
    if value not in ("true", "false"):
        raise InvalidArgumentError(f"invalid value for {key}: expected true or false")
    return value == "true"


def _pem_store(props: Mapping[str, str], location_key: str, type_key: str) -> str | None:
    location = props.get(location_key) or None
    store_type = (props.get(type_key) or "").strip().upper()
    if location is None:
        return None
    if not store_type:  # ZooKeeper's X509Util infers the type from the file name
        store_type = "PEM" if location.lower().endswith((".pem", ".crt", ".key")) else ""
    if store_type != "PEM":
        raise InvalidArgumentError(
            f"{type_key} must be PEM here (Python's TLS reads PEM only; convert a JKS or PKCS12 store "
            "with keytool or openssl)"
        )
    if not os.path.isfile(location):
        raise InvalidArgumentError(f"{location_key} {location} is not a readable file")
    return location


def tls_settings(props: Mapping[str, str], where: str = "the broker's settings") -> dict[str, Any]:
    """``ZkClientConfig`` keyword arguments from Kafka's ``zookeeper.ssl.*`` settings: empty when
    ``zookeeper.ssl.client.enable`` is not true (Kafka then ignores the rest)."""
    props = {k: str(v) for k, v in props.items()}
    if not _flag(props, ZK_SSL_CLIENT_ENABLE):
        return {}
    for key in (ZK_SSL_ENABLED_PROTOCOLS, ZK_SSL_CIPHER_SUITES):
        if props.get(key, "").strip():
            raise InvalidArgumentError(
                f"{key} in {where} is not supported (Java's names for them do not carry over to "
                "Python's TLS): leave it unset"
            )
    for key in (ZK_SSL_CRL_ENABLE, ZK_SSL_OCSP_ENABLE):
        if _flag(props, key):
            raise InvalidArgumentError(f"{key}=true in {where} is not supported: leave it false")
    protocol = props.get(ZK_SSL_PROTOCOL, "TLSv1.2").strip()
    if protocol not in _PROTOCOLS:
        raise InvalidArgumentError(
            f"invalid value for {ZK_SSL_PROTOCOL}: expected one of {sorted(_PROTOCOLS)}"
        )
    algorithm = props.get(ZK_SSL_ENDPOINT_IDENTIFICATION_ALGORITHM, "HTTPS").strip().upper()
    if algorithm not in ("HTTPS", ""):
        raise InvalidArgumentError(
            f"invalid value for {ZK_SSL_ENDPOINT_IDENTIFICATION_ALGORITHM}: expected HTTPS or empty"
        )
    keystore = _pem_store(props, ZK_SSL_KEYSTORE_LOCATION, ZK_SSL_KEYSTORE_TYPE)
    truststore = _pem_store(props, ZK_SSL_TRUSTSTORE_LOCATION, ZK_SSL_TRUSTSTORE_TYPE)
    return {
        "use_ssl": True,
        "certfile": keystore,
        "keyfile": keystore,  # a PEM keystore holds the key and the chain in one file
        "keyfile_password": props.get(ZK_SSL_KEYSTORE_PASSWORD) or None,
        "ca": truststore,
        "verify_certs": True,
        "check_hostname": algorithm == "HTTPS",
    }


def tls_config_file(path: str) -> dict[str, Any]:
    """Kafka's ``--zk-tls-config-file``: its ``zookeeper.ssl.*`` and ``zookeeper.clientCnxnSocket``
    keys (others are ignored, as Kafka's tools ignore them)."""
    props = {k: v for k, v in read_properties(path, "ZooKeeper TLS config file").items() if k in ZK_TLS_KEYS}
    return tls_settings(props, where=path)


def set_acl_setting(props: Mapping[str, Any]) -> bool | None:
    """``zookeeper.set.acl`` as given, or None when absent."""
    if ZK_SET_ACL not in props:
        return None
    return _flag({ZK_SET_ACL: str(props[ZK_SET_ACL])}, ZK_SET_ACL)


def client_settings(
    props: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
    *,
    tls_file: str | None = None,
    tool: bool = False,
) -> dict[str, Any]:
    """``ZkClientConfig`` keyword arguments for credentials, TLS and ACLs, from what a Kafka process
    is given: ``$KAFKA_OPTS`` (SASL), ``$KAFKA_CONTROLLER_ZK_DIGEST`` (the project's digest scheme),
    ``props`` (a broker's ``zookeeper.ssl.*`` and ``zookeeper.set.acl``) and ``tls_file`` (a tool's
    ``--zk-tls-config-file``, which takes the place of ``props``' TLS keys).

    A broker sets ACLs only with ``zookeeper.set.acl=true``; Kafka's tools (``tool``) have no such
    setting and create secure znodes whenever they authenticate: ``ConfigCommand`` builds its
    client with ``isSecure = JaasUtils.isZkSaslEnabled || KafkaConfig.zkTlsClientAuthEnabled``. So
    does the CLI here, so that a user's SCRAM credentials it writes are never world-readable."""
    given = dict(props or {})
    kwargs: dict[str, Any] = {"digest": digest_from_env(environ), "sasl": sasl_from_kafka_opts(environ)}
    kwargs.update(tls_config_file(tls_file) if tls_file else tls_settings(given))
    set_acl = set_acl_setting(given)
    if set_acl is None and tool:
        set_acl = tool_acls(sasl=kwargs["sasl"], certfile=kwargs.get("certfile")) or None
    if set_acl is not None:
        kwargs["set_acl"] = set_acl
    return kwargs


def tool_acls(*, sasl: tuple[str, str] | None, certfile: str | None) -> bool:
    """Whether an admin tool creates znodes with Kafka's secure ACLs: when it logs in with SASL or
    presents a TLS client certificate (Kafka's ``isZkSaslEnabled || zkTlsClientAuthEnabled``)."""
    return sasl is not None or certfile is not None
