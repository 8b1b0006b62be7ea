"""Where the plugin finds the audit store in each Airflow process (``audit_target``)."""

from __future__ import annotations

import json
import sys
import types

import pytest

from kafka_controller.airflow import audit_target
from kafka_controller.airflow.audit_target import (
    CONFIG_ENV,
    in_task_process,
    listener_audit_url,
    web_audit_url,
)

pytestmark = pytest.mark.airflow

CONN = "kafka_controller_audit_default"
ENV = "AIRFLOW_CONN_KAFKA_CONTROLLER_AUDIT_DEFAULT"


@pytest.fixture(autouse=True)
def clean(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CONFIG_ENV, raising=False)
    monkeypatch.delenv(ENV, raising=False)


def test_the_plugin_setting_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CONFIG_ENV, " sqlite:////tmp/a.db ")
    monkeypatch.setenv(
        ENV, json.dumps({"conn_type": "kafka_controller_audit", "extra": {"url": "sqlite:////b"}})
    )
    assert listener_audit_url(CONN) == web_audit_url(CONN) == "sqlite:////tmp/a.db"


@pytest.mark.parametrize(
    "value",
    [
        json.dumps({"conn_type": "kafka_controller_audit", "extra": {"url": "sqlite:////tmp/c.db"}}),
        "kafka-controller-audit://?url=sqlite%3A%2F%2F%2F%2Ftmp%2Fc.db",
    ],
)
def test_an_environment_connection_is_parsed_without_a_lookup(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv(ENV, value)
    assert listener_audit_url(CONN) == "sqlite:////tmp/c.db"


def test_outside_a_task_process_the_listener_never_looks_a_connection_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The scheduler's case: no setting, no variable -> None, and neither the task SDK nor the
    metadata DB is asked (either would share the scheduler's session)."""
    asked: list[str] = []
    monkeypatch.setattr(audit_target, "_task_sdk_url", lambda c: asked.append("sdk") or "x")
    monkeypatch.setattr(audit_target, "_metastore_url", lambda c: asked.append("db") or "x")
    assert not in_task_process()
    assert listener_audit_url(CONN) is None and asked == []


def test_in_a_task_process_the_listener_asks_the_task_sdk(monkeypatch: pytest.MonkeyPatch) -> None:
    runner = types.SimpleNamespace(SUPERVISOR_COMMS=object())
    monkeypatch.setitem(sys.modules, "airflow.sdk.execution_time.task_runner", runner)
    monkeypatch.setattr(audit_target, "_task_sdk_url", lambda c: f"sdk:{c}")
    assert in_task_process() and listener_audit_url(CONN) == f"sdk:{CONN}"


def test_the_web_app_falls_back_to_the_metadata_db(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(audit_target, "_metastore_url", lambda c: f"db:{c}")
    assert web_audit_url(CONN) == f"db:{CONN}"
