"""One audit database for several clusters; who sent an operation's request.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-07

* ``cluster_id`` (ZooKeeper's ``/cluster/id``) on ``operations``, both transition tables,
  ``controller_events`` and ``reconciliation_runs`` (the snapshot's cluster): NULL on every
  existing row, which reports and the reconciliation read as before when no cluster is asked for.
* Each loaded table's idempotency key becomes a unique index that includes the cluster (see
  ``schema._unique_key``): two clusters in one database both have a controller 1 at epoch 1, and
  the old key dropped the second cluster's rows as duplicates of the first's.
* ``operations.principal``, ``client_id`` and ``client_address``: for operations a broker records
  for an admin request that came over its listener outside any operation.

The report views keep their definitions (a cluster is only ever a filter on their queries, never
in a view); they are dropped and made again around the table changes, which SQLite makes by
copying each table.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from kafka_controller.audit.views import VIEWS, create_view_sql, drop_view_sql

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

#: Table -> its idempotency key's columns (copied: a migration must not change when the code does).
_KEYS: dict[str, tuple[str, ...]] = {
    "partition_transitions": ("controller_id", "controller_epoch", "sequence"),
    "replica_transitions": ("controller_id", "controller_epoch", "sequence"),
    "controller_events": ("broker_id", "controller_epoch", "kind", "started_ms"),
}
_CLUSTER_COMMENT = "ZooKeeper's /cluster/id; NULL on older rows"
_REQUEST_COLUMNS = (
    ("principal", "a Kafka request's principal (User:ANONYMOUS unauthenticated)"),
    ("client_id", "a request's client id, when it came over a listener"),
    ("client_address", "the peer's host:port, when it came over a listener"),
)


def _cluster_column() -> sa.Column[str]:
    return sa.Column("cluster_id", sa.String(64), comment=_CLUSTER_COMMENT)


def upgrade() -> None:
    for name in reversed(list(VIEWS)):
        op.execute(drop_view_sql(name))
    with op.batch_alter_table("reconciliation_runs") as batch:
        batch.add_column(_cluster_column())
    with op.batch_alter_table("operations") as batch:
        batch.add_column(_cluster_column())
        for name, comment in _REQUEST_COLUMNS:
            batch.add_column(sa.Column(name, sa.String(255), comment=comment))
    for table, key in _KEYS.items():
        name = f"uq_{table}_key"
        with op.batch_alter_table(table) as batch:
            batch.add_column(_cluster_column())
            batch.drop_constraint(name, type_="unique")
        op.create_index(
            name, table, [*(sa.column(c) for c in key), sa.text("coalesce(cluster_id, '')")], unique=True
        )
    _create_views()


def _create_views() -> None:
    dialect = op.get_bind().dialect
    for name in VIEWS:
        op.execute(create_view_sql(name, dialect))


def downgrade() -> None:
    for view in reversed(list(VIEWS)):
        op.execute(drop_view_sql(view))
    for table, key in _KEYS.items():
        name = f"uq_{table}_key"
        op.drop_index(name, table)
        with op.batch_alter_table(table) as batch:
            batch.drop_column("cluster_id")
            batch.create_unique_constraint(name, list(key))
    with op.batch_alter_table("operations") as batch:
        for name, _ in reversed(_REQUEST_COLUMNS):
            batch.drop_column(name)
        batch.drop_column("cluster_id")
    with op.batch_alter_table("reconciliation_runs") as batch:
        batch.drop_column("cluster_id")
    _create_views()
