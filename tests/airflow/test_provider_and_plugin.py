"""Packaging: the provider and plugin entry points, as Airflow itself discovers them."""

from __future__ import annotations

import pytest

from kafka_controller.airflow.provider import get_provider_info

pytestmark = pytest.mark.airflow

ENTRY_POINTS = (
    "pyproject.toml must declare [project.entry-points.apache_airflow_provider] provider_info = "
    '"kafka_controller.airflow.provider:get_provider_info" and [project.entry-points."airflow.plugins"] '
    'kafka_controller = "kafka_controller.airflow.plugin:KafkaControllerPlugin" (then reinstall)'
)


def test_provider_info_is_valid_for_airflow_and_names_importable_hooks() -> None:
    from airflow.providers_manager import _create_provider_info_schema_validator

    info = get_provider_info()
    _create_provider_info_schema_validator().validate(info)
    assert info["package-name"] == "kafka-controller-ops"  # Airflow refuses a mismatch with the dist
    from airflow._shared.module_loading import import_string

    for conn in info["connection-types"]:
        hook = import_string(conn["hook-class-name"])
        assert hook.conn_type == conn["connection-type"]
        assert hook.default_conn_name.startswith("kafka_controller")
    import importlib

    for group in ("hooks", "operators", "sensors", "triggers"):
        for module in (m for entry in info[group] for m in entry["python-modules"]):
            assert importlib.import_module(module).__name__ == module


def _ours(group: str) -> list[tuple[str, str]]:
    """(entry point, distribution name) as Airflow enumerates them: every distribution on
    ``sys.path`` (``importlib.metadata.entry_points`` would keep only the first of a name)."""
    from airflow._shared.module_loading import entry_points_with_dist

    return [
        (ep.value, dist.metadata["Name"])
        for ep, dist in entry_points_with_dist(group)
        if ep.value.startswith("kafka_controller")
    ]


def _metadata_copies() -> int:
    """How many copies of this distribution's metadata are on ``sys.path``: 2 when a build's
    egg-info is left in the source tree and the tree is on the path (pytest from the repo root)."""
    return len(_ours("airflow.plugins"))


def test_entry_points_are_registered_once_per_distribution() -> None:
    for group, value in (
        ("apache_airflow_provider", "kafka_controller.airflow.provider:get_provider_info"),
        ("airflow.plugins", "kafka_controller.airflow.plugin:KafkaControllerPlugin"),
    ):
        found = set(_ours(group))
        assert found == {(value, "kafka-controller-ops")}, (group, found, ENTRY_POINTS)


def test_airflow_discovers_the_connection_types_and_their_form() -> None:
    from airflow.providers_manager import ProvidersManager

    pm = ProvidersManager()
    assert "kafka-controller-ops" in pm.providers
    behaviours = pm.field_behaviours
    assert behaviours["kafka_controller_cluster"]["relabeling"]["schema"] == "Chroot"
    widgets = pm.connection_form_widgets
    assert "extra__kafka_controller_cluster__lifecycle" in widgets
    assert "extra__kafka_controller_audit__url" in widgets


def test_airflow_loads_the_plugin_once_with_listener_macros_and_app() -> None:
    from airflow import plugins_manager

    from kafka_controller.airflow.listener import audit_listener
    from kafka_controller.airflow.plugin import KafkaControllerPlugin

    plugins, errors = plugins_manager._get_plugins()
    ours = [p for p in plugins if p.name == "kafka_controller"]
    assert len(ours) == 1
    # the only error allowed is Airflow skipping a second copy of the same distribution's metadata
    # (see _metadata_copies); anything else is a real import failure
    problems = {k: v for k, v in errors.items() if "kafka" in k.lower()}
    duplicates = {
        k: v for k, v in problems.items() if v == "Plugin 'kafka_controller' already registered, skipping"
    }
    assert problems == duplicates and len(duplicates) <= _metadata_copies() - 1, problems
    assert "airflow.plugins" in str(ours[0].source)  # the entry point, not the plugins folder
    assert audit_listener in ours[0].listeners
    assert {m.__name__ for m in ours[0].macros} >= {
        "controller",
        "brokers",
        "partition_leader",
        "cluster_summary",
    }
    app = KafkaControllerPlugin.fastapi_apps[0]
    assert app["url_prefix"] == "/kafka-controller"
    assert not KafkaControllerPlugin.flask_blueprints and not KafkaControllerPlugin.appbuilder_views


def test_plugins_folder_shim_exports_the_plugin_only_without_the_entry_point(monkeypatch) -> None:
    import runpy

    from kafka_controller.airflow import plugin
    from tests.airflow.support import REPO

    shim = str(REPO / "plugins" / "kafka_controller_plugin.py")
    assert "KafkaControllerPlugin" not in runpy.run_path(shim)
    monkeypatch.setattr(plugin, "entry_point_installed", lambda: False)
    assert runpy.run_path(shim)["KafkaControllerPlugin"] is plugin.KafkaControllerPlugin
