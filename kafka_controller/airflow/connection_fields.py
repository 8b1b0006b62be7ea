"""Checks shared by the connection parsers: extra fields (the UI's prefixed spelling accepted,
unknown keys refused), integers and true/false flags, each failing with the connection's id."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafka_controller.domain.errors import InvalidArgumentError

__all__ = ["KAFKA_SECURITY_EXTRAS", "KAFKA_SECURITY_FIELDS", "_extras", "_flag", "_int"]

#: The cluster connection's broker security extras (kafka-python's names), with the connection
#: form's label and description of each; ``security.client_config.from_fields`` reads them.
KAFKA_SECURITY_FIELDS: dict[str, tuple[str, str]] = {
    "security_protocol": (
        "Kafka security protocol",
        "PLAINTEXT (default), SSL, SASL_PLAINTEXT or SASL_SSL, as the brokers' listener; with SASL "
        "the login and password fields are the SASL username and password",
    ),
    "sasl_mechanism": ("SASL mechanism", "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"),
    "ssl_cafile": (
        "Kafka TLS CA file",
        "PEM CA certificates the brokers' certificates chain to (SSL, SASL_SSL)",
    ),
    "ssl_certfile": (
        "Kafka TLS client certificate",
        "PEM client certificate, for brokers with ssl.client.auth=required (with the key file)",
    ),
    "ssl_keyfile": ("Kafka TLS client key", "PEM private key of the client certificate (unencrypted)"),
}
KAFKA_SECURITY_EXTRAS = frozenset(KAFKA_SECURITY_FIELDS)


def _extras(
    conn_id: str, conn_type: str, extra: Mapping[str, Any] | None, allowed: frozenset[str]
) -> dict[str, Any]:
    """Extra fields, accepting the UI's ``extra__<type>__<name>`` spelling; unknown keys refused
    (a typo in a setting that stops brokers should stop the task, not be ignored)."""
    out: dict[str, Any] = {}
    prefix = f"extra__{conn_type}__"
    for key, value in dict(extra or {}).items():
        name = key[len(prefix) :] if key.startswith(prefix) else key
        if name not in allowed:
            raise InvalidArgumentError(
                f"connection {conn_id!r}: unknown extra field {key!r} (known: {', '.join(sorted(allowed))})"
            )
        if value is not None and value != "":
            out[name] = value
    return out


def _int(conn_id: str, name: str, value: Any) -> int:
    if isinstance(value, bool):
        raise InvalidArgumentError(f"connection {conn_id!r}: {name} must be an integer, got {value!r}")
    try:
        return int(value)
    except (TypeError, ValueError):
        raise InvalidArgumentError(
            f"connection {conn_id!r}: {name} must be an integer, got {value!r}"
        ) from None


def _flag(conn_id: str, name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise InvalidArgumentError(f"connection {conn_id!r}: {name} must be true or false, got {value!r}")
