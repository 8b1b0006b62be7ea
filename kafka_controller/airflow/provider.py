"""Provider metadata for Airflow's ``apache_airflow_provider`` entry point.

Airflow reads this without importing the hooks (``conn-fields`` and ``ui-field-behaviour`` drive the
connection form), so it must stay a plain function returning plain data. ``package-name`` must equal
the distribution's name: Airflow refuses a provider whose names differ.
"""

from __future__ import annotations

from typing import Any

from kafka_controller import __version__
from kafka_controller.airflow.connection_fields import KAFKA_SECURITY_FIELDS
from kafka_controller.airflow.connections import AUDIT_CONN_TYPE, CLUSTER_CONN_TYPE

_NAME = "Kafka controller (ZooKeeper mode)"


def _field(label: str, type_: str | list[str], description: str, **schema: Any) -> dict[str, Any]:
    types = [type_] if isinstance(type_, str) else list(type_)
    return {"label": label, "description": description, "schema": {"type": [*types, "null"], **schema}}


def get_provider_info() -> dict[str, Any]:
    return {
        "package-name": "kafka-controller-ops",
        "name": _NAME,
        "description": "Operations for Kafka 2.8 ZooKeeper-mode clusters run by kafka-controller-ops: "
        "failover drills, rolling restarts, reassignments, elections, reconciliation and audit.",
        "versions": [__version__],
        "integrations": [{"integration-name": _NAME, "tags": ["software"]}],
        "hooks": [
            {
                "integration-name": _NAME,
                "python-modules": [
                    "kafka_controller.airflow.hooks.cluster",
                    "kafka_controller.airflow.hooks.audit",
                ],
            }
        ],
        "operators": [
            {
                "integration-name": _NAME,
                "python-modules": [
                    "kafka_controller.airflow.operators.cluster",
                    "kafka_controller.airflow.operators.elections",
                    "kafka_controller.airflow.operators.reassignment",
                    "kafka_controller.airflow.operators.reports",
                ],
            }
        ],
        "sensors": [{"integration-name": _NAME, "python-modules": ["kafka_controller.airflow.sensors"]}],
        "triggers": [{"integration-name": _NAME, "python-modules": ["kafka_controller.airflow.triggers"]}],
        "connection-types": [
            {
                "connection-type": CLUSTER_CONN_TYPE,
                "hook-class-name": "kafka_controller.airflow.hooks.cluster.KafkaClusterHook",
                "hook-name": "Kafka cluster (ZooKeeper mode)",
                "conn-fields": {
                    "session_timeout_ms": _field(
                        "Session timeout (ms)",
                        "integer",
                        "zookeeper.session.timeout.ms",
                        default=18000,
                        minimum=1000,
                    ),
                    "lifecycle": _field(
                        "Broker lifecycle",
                        ["string", "object"],
                        '"local", or {"type": "command", "stop": "...{broker_id}...", "start": "...", '
                        '"hosts": {"1": "kafka1"}}',
                    ),
                    "broker_defaults": _field(
                        "Broker defaults for dry runs",
                        "object",
                        'e.g. {"unclean.leader.election.enable": "false"}',
                    ),
                    "bootstrap_servers": _field(
                        "Kafka bootstrap servers",
                        "string",
                        "host:port[,host:port] for admin requests (default: the controller in ZooKeeper)",
                    ),
                    "use_ssl": _field("Use TLS", "boolean", "connect to ZooKeeper over TLS", default=False),
                    "ca": _field("CA file", "string", "TLS CA bundle path"),
                    "certfile": _field("Client certificate", "string", "TLS client certificate path"),
                    "keyfile": _field("Client key", "string", "TLS client key path"),
                    **{
                        name: _field(label, "string", description)
                        for name, (label, description) in KAFKA_SECURITY_FIELDS.items()
                    },
                },
                "ui-field-behaviour": {
                    "hidden-fields": [],
                    "relabeling": {
                        "host": "ZooKeeper hosts",
                        "schema": "Chroot",
                        "login": "Digest user (SASL username with a SASL protocol)",
                        "password": "Digest password (SASL password with a SASL protocol)",
                    },
                    "placeholders": {
                        "host": "zk1:2181,zk2:2181,zk3:2181",
                        "schema": "/kafka",
                        "lifecycle": "local",
                    },
                },
            },
            {
                "connection-type": AUDIT_CONN_TYPE,
                "hook-class-name": "kafka_controller.airflow.hooks.audit.AuditStoreHook",
                "hook-name": "Kafka controller audit store",
                "conn-fields": {
                    "url": _field(
                        "SQLAlchemy URL",
                        "string",
                        "e.g. postgresql+psycopg://kc@db/audit (password in its field)",
                    ),
                    "driver": _field("Driver", "string", "postgresql+psycopg (default) or sqlite"),
                },
                "ui-field-behaviour": {
                    "hidden-fields": [],
                    "relabeling": {"schema": "Database (SQLite: file path)"},
                    "placeholders": {"host": "audit-db.example", "url": "sqlite:////var/lib/kc/audit.db"},
                },
            },
        ],
    }
