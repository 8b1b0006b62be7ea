"""Report views and the time indexes the reports filter on.

Revision ID: 0002
Revises: 0001
Create Date: 2025-01-02

The views are the definitions frozen in ``migrations.views_0002`` (revision 0003 replaced them).
"""

from __future__ import annotations

from alembic import op

from kafka_controller.audit.migrations.views_0002 import VIEWS, create_view_sql, drop_view_sql

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(op.f("ix_partition_transitions_timestamp_ms"), "partition_transitions", ["timestamp_ms"])
    op.create_index(op.f("ix_replica_transitions_timestamp_ms"), "replica_transitions", ["timestamp_ms"])
    dialect = op.get_bind().dialect
    for name in VIEWS:
        op.execute(create_view_sql(name, dialect))


def downgrade() -> None:
    for name in reversed(VIEWS):
        op.execute(drop_view_sql(name))
    op.drop_index(op.f("ix_replica_transitions_timestamp_ms"), "replica_transitions")
    op.drop_index(op.f("ix_partition_transitions_timestamp_ms"), "partition_transitions")
