"""Connections for the Airflow tests, as ``AIRFLOW_CONN_<ID>`` JSON environment variables."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]

CLUSTER_ENV = "AIRFLOW_CONN_KAFKA_CONTROLLER_DEFAULT"
AUDIT_ENV = "AIRFLOW_CONN_KAFKA_CONTROLLER_AUDIT_DEFAULT"


def cluster_conn(
    connect_string: str, chroot: str, *, login: str | None = None, password: str | None = None, **extra: Any
) -> str:
    conn: dict[str, Any] = {
        "conn_type": "kafka_controller_cluster",
        "host": connect_string,
        "schema": chroot,
        "extra": extra,
    }
    if login:
        conn.update(login=login, password=password)
    return json.dumps(conn)


def audit_conn(url: str) -> str:
    return json.dumps({"conn_type": "kafka_controller_audit", "extra": {"url": url}})


def audit_conn_env(url: str) -> tuple[str, str]:
    return AUDIT_ENV, audit_conn(url)
