"""Airflow plugins-folder shim for kafka-controller-ops (the package must be installed).

The plugin itself is ``kafka_controller.airflow.plugin.KafkaControllerPlugin``, normally registered
through the ``airflow.plugins`` entry point; this file exports it only when that entry point is
missing, so Airflow never loads it twice.
"""

from kafka_controller.airflow.plugin import plugins_folder_exports

globals().update(plugins_folder_exports())
