"""Dry runs kept apart, failovers with the outage they end, operations with their result.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-25

* ``dry_run`` on both transition tables and on ``controller_events`` (false for every existing row:
  before this revision a dry run's rows could only be told by their ``dry-run:`` event name, which
  the upgrade uses to mark them).
* A failover's ``previous_broker_id``, ``lost_ms``, ``first_offline_ms``, ``offline_partitions`` and
  ``recovered_ms`` (NULL on older rows: the report falls back to the failover's own end).
* ``operations.result``: what the operation did, as JSON.
* The report views, re-created from ``kafka_controller.audit.views`` (they now leave dry runs out
  and measure recovery from the loss of the previous controller).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from kafka_controller.audit.migrations import views_0002
from kafka_controller.audit.views import VIEWS, create_view_sql, drop_view_sql

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

_Json = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
_OUTAGE = (
    ("previous_broker_id", sa.Integer, "failover: the controller this one replaced"),
    ("lost_ms", sa.BigInteger, "failover: when /controller went away (the watch fired)"),
    ("first_offline_ms", sa.BigInteger, "failover: when offline partitions were first seen"),
    ("offline_partitions", sa.Integer, "failover: partitions without a live leader then"),
    ("recovered_ms", sa.BigInteger, "failover: when every electable partition was led"),
)
#: The dry-run controller's broker id (``airflow.planner.DRY_RUN_CONTROLLER_ID``), copied: a
#: migration must not change when the code it would import does.
_DRY_RUN_CONTROLLER_ID = 2_147_483_000


def _dry_run_column() -> sa.Column[bool]:
    return sa.Column("dry_run", sa.Boolean, nullable=False, server_default=sa.false())


def upgrade() -> None:
    for name in reversed(list(views_0002.VIEWS)):
        op.execute(views_0002.drop_view_sql(name))
    for table in ("partition_transitions", "replica_transitions"):
        with op.batch_alter_table(table) as batch:
            batch.add_column(_dry_run_column())
        op.execute(f"UPDATE {table} SET dry_run = true WHERE event LIKE 'dry-run:%'")
    with op.batch_alter_table("controller_events") as batch:
        batch.add_column(_dry_run_column())
        for name, type_, comment in _OUTAGE:
            batch.add_column(sa.Column(name, type_, comment=comment))
    op.execute(f"UPDATE controller_events SET dry_run = true WHERE broker_id = {_DRY_RUN_CONTROLLER_ID}")
    with op.batch_alter_table("operations") as batch:
        batch.add_column(
            sa.Column("result", _Json, comment="what the operation did, as JSON (bounded: see operations)")
        )
    dialect = op.get_bind().dialect
    for name in VIEWS:
        op.execute(create_view_sql(name, dialect))


def downgrade() -> None:
    for name in reversed(list(VIEWS)):
        op.execute(drop_view_sql(name))
    with op.batch_alter_table("operations") as batch:
        batch.drop_column("result")
    with op.batch_alter_table("controller_events") as batch:
        for name, _, _ in reversed(_OUTAGE):
            batch.drop_column(name)
        batch.drop_column("dry_run")
    for table in ("replica_transitions", "partition_transitions"):
        with op.batch_alter_table(table) as batch:
            batch.drop_column("dry_run")
    dialect = op.get_bind().dialect
    for name in views_0002.VIEWS:
        op.execute(views_0002.create_view_sql(name, dialect))
