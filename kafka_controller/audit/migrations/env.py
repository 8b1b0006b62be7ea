"""Alembic environment: always run programmatically, on a connection the caller owns.

``upgrade_database`` puts the connection in ``config.attributes["connection"]`` and holds the
transaction (and, on PostgreSQL, an advisory lock) around the whole upgrade, so concurrent brokers
starting their writers at once migrate the store exactly once.
"""

from __future__ import annotations

from alembic import context

from kafka_controller.audit.schema import VERSION_TABLE, metadata

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("run audit migrations through kafka_controller.audit.migrate.upgrade_database(url)")

context.configure(
    connection=connection,
    target_metadata=metadata,
    version_table=VERSION_TABLE,
    render_as_batch=connection.dialect.name == "sqlite",
    transactional_ddl=True,
)
with context.begin_transaction():
    context.run_migrations()
