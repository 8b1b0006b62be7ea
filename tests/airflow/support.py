"""Connections for the Airflow tests, as ``AIRFLOW_CONN_<ID>`` JSON environment variables (the
JSON is built by the package's own helpers, which the demo uses too)."""

from __future__ import annotations

from pathlib import Path

from kafka_controller.airflow.connections import (
    DEFAULT_AUDIT_CONN_ID,
    DEFAULT_CLUSTER_CONN_ID,
    audit_conn_json,
    cluster_conn_json,
    conn_env_var,
)

REPO = Path(__file__).resolve().parents[2]

CLUSTER_ENV = conn_env_var(DEFAULT_CLUSTER_CONN_ID)
AUDIT_ENV = conn_env_var(DEFAULT_AUDIT_CONN_ID)
cluster_conn = cluster_conn_json
audit_conn = audit_conn_json


def audit_conn_env(url: str) -> tuple[str, str]:
    return AUDIT_ENV, audit_conn(url)
