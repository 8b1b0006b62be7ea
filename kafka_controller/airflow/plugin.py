"""``KafkaControllerPlugin``: the listener, the macros and the audit web app, for Airflow 3.

Registered through the ``airflow.plugins`` entry point. Deployments that use a plugins folder get
the same class from ``plugins/kafka_controller_plugin.py``, which exports it only when the entry
point is not installed (Airflow would otherwise see the plugin twice and report an import error).
Only fields that work without the FAB provider are used: no Flask blueprints, no AppBuilder views.
"""

from __future__ import annotations

from importlib.metadata import distributions

from airflow.plugins_manager import AirflowPlugin

from kafka_controller.airflow.listener import audit_listener
from kafka_controller.airflow.macros import MACROS
from kafka_controller.airflow.web import URL_PREFIX, LazyApp, create_app

PLUGIN_NAME = "kafka_controller"
ENTRY_POINT_GROUP = "airflow.plugins"


class KafkaControllerPlugin(AirflowPlugin):
    name = PLUGIN_NAME
    listeners = [audit_listener]
    macros = list(MACROS)
    fastapi_apps = [{"app": LazyApp(create_app), "url_prefix": URL_PREFIX, "name": "Kafka controller audit"}]
    external_views = [
        {
            "name": "Kafka controller audit",
            "href": f"{URL_PREFIX}/",
            "destination": "nav",
            "category": "browse",
        }
    ]


def entry_point_installed() -> bool:
    """True when an installed distribution registers this plugin under ``airflow.plugins``. Every
    distribution is looked at, as Airflow does (``entry_points()`` keeps only the first one of a
    name, which may be a build's egg-info on ``sys.path`` rather than the installed metadata)."""
    return any(
        ep.group == ENTRY_POINT_GROUP and ep.value.startswith(__name__)
        for dist in distributions()
        for ep in dist.entry_points
    )


def plugins_folder_exports() -> dict[str, type[AirflowPlugin]]:
    """What the plugins-folder file exports: the plugin class unless the entry point has it."""
    return {} if entry_point_installed() else {"KafkaControllerPlugin": KafkaControllerPlugin}
