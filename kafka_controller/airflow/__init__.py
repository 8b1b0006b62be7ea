"""Airflow operations for kafka-controller-ops: hooks, operators, sensors, triggers, the dry-run
planner, lifecycle backends, and the plugin (listener, macros, audit web app).

Importing this package imports no Airflow: the pure parts (``connections``, ``lifecycle``,
``maintenance``, ``reassignment_plan``, ``planner``, ``params``) work without it, and the modules
that need Airflow (``hooks``, ``operators``, ``sensors``, ``triggers``, ``listener``, ``plugin``)
import it themselves. Provider metadata: ``provider.get_provider_info``.
"""
