"""Alembic migrations of the audit store, shipped inside the package so an installed wheel can
upgrade a database in place (``kafka_controller.audit.migrate.upgrade_database``)."""
