"""``bootstrap.servers`` as Kafka's clients take it, checked before any client is made.

A module of its own, importing nothing but the error types, so that what only reads a connection's
settings (Airflow's connection form, its provider info) does not load the Kafka protocol code
that ``kafka_admin`` brings.
"""

from __future__ import annotations

from collections.abc import Sequence

from kafka_controller.domain.errors import InvalidArgumentError, brief


def parse_bootstrap_servers(value: str | Sequence[str] | None) -> tuple[str, ...] | None:
    """``"h1:9092,h2:9092"`` (or a list) -> host:port strings; None or empty -> None (use ZooKeeper)."""
    if value is None:
        return None
    items = value.split(",") if isinstance(value, str) else list(value)
    out = []
    for item in (str(i).strip() for i in items):
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise InvalidArgumentError(f"bootstrap server {brief(item)} is not host:port")
        out.append(item)
    return tuple(out) or None
