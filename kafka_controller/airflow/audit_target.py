"""Where the plugin finds the audit store in each Airflow process, without Airflow's connection lookup.

Airflow 3 runs the plugin in four kinds of process, and only one of them may resolve a connection the
way a hook does:

* a **task process** (the task runner, which talks to its supervisor): ``BaseHook.get_connection``
  works there, as for any operator;
* the **scheduler**, **dag-processor** and **triggerer**: the task SDK's lookup there falls back to
  ``MetastoreBackend``, whose session is the scheduler's own scoped session; closing it under
  ``DagRun.update_state`` detaches the scheduler's objects and kills it (``DetachedInstanceError``);
* the **api-server**: the web app may read a connection from the metadata DB in its request thread
  (its own session), as the API server itself does.

So the listener and the web app first read the plugin's own setting, ``[kafka_controller] audit_url``
in ``airflow.cfg`` (or ``AIRFLOW__KAFKA_CONTROLLER__AUDIT_URL``), then an ``AIRFLOW_CONN_<ID>``
variable parsed here, and only then the process's own safe way, if it has one.
"""

from __future__ import annotations

import logging
import os
import sys

from kafka_controller.airflow.connections import airflow_fields, audit_connection, conn_env_var
from kafka_controller.airflow.hooks.audit import AuditStoreHook

log = logging.getLogger(__name__)

CONFIG_SECTION = "kafka_controller"
CONFIG_KEY = "audit_url"
CONFIG_ENV = "AIRFLOW__KAFKA_CONTROLLER__AUDIT_URL"


def in_task_process() -> bool:
    """True in a task runner that can ask its supervisor for connections."""
    runner = sys.modules.get("airflow.sdk.execution_time.task_runner")
    return getattr(runner, "SUPERVISOR_COMMS", None) is not None


def configured_url() -> str | None:
    """``[kafka_controller] audit_url`` from Airflow's configuration (file or environment)."""
    value = os.environ.get(CONFIG_ENV)
    if value is None:
        try:
            from airflow.configuration import conf

            value = conf.get(CONFIG_SECTION, CONFIG_KEY, fallback=None)
        except Exception as e:  # a broken config must not break the process the plugin runs in
            log.warning("kafka-controller: could not read [%s] %s: %s", CONFIG_SECTION, CONFIG_KEY, e)
            return None
    if value is None or not value.strip():
        return None
    return value.strip()


def env_connection_url(conn_id: str) -> str | None:
    """The audit URL of an ``AIRFLOW_CONN_<ID>`` variable (JSON or URI form), parsed without a lookup."""
    raw = os.environ.get(conn_env_var(conn_id))
    if not raw:
        return None
    from airflow.sdk.definitions.connection import Connection

    text = raw.strip()
    c = (
        Connection.from_json(text, conn_id=conn_id)
        if text.startswith("{")
        else Connection.from_uri(text, conn_id)
    )
    return audit_connection(conn_id, **airflow_fields(c)).url


def _task_sdk_url(conn_id: str) -> str:
    return AuditStoreHook(conn_id).connection.url


def _metastore_url(conn_id: str) -> str | None:
    """The api-server's own read of a connection from the metadata DB (never in the scheduler)."""
    from airflow.secrets.metastore import MetastoreBackend

    c = MetastoreBackend().get_connection(conn_id)
    return None if c is None else audit_connection(conn_id, **airflow_fields(c)).url


def listener_audit_url(conn_id: str) -> str | None:
    """For the listener: config, environment, and the task SDK only inside a task process."""
    return (
        configured_url()
        or env_connection_url(conn_id)
        or (_task_sdk_url(conn_id) if in_task_process() else None)
    )


def web_audit_url(conn_id: str) -> str | None:
    """For the web app in the api-server: config, environment, then the metadata DB."""
    return configured_url() or env_connection_url(conn_id) or _metastore_url(conn_id)
