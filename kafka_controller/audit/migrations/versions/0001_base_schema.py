"""Base schema: operations, transitions, controller events, reconciliation runs and findings.

Revision ID: 0001
Revises:
Create Date: 2025-01-01

Written out column by column (not imported from ``schema``) so that this revision keeps creating the
same tables when the metadata moves on; ``tests/audit/test_migrations.py`` checks that the chain of
revisions ends exactly at the metadata.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

_BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
_Json = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
_WITH_OPERATION = sa.text("operation_id IS NOT NULL")


def _transition_head() -> list[sa.Column[object]]:
    return [
        sa.Column("id", _BigId, primary_key=True, autoincrement=True),
        sa.Column("controller_id", sa.Integer, nullable=False),
        sa.Column("controller_epoch", sa.Integer, nullable=False),
        sa.Column("sequence", sa.BigInteger),
        sa.Column("event", sa.Text),
        sa.Column("operation_id", sa.String(36)),
        sa.Column("topic", sa.Text, nullable=False),
        sa.Column("partition", sa.Integer, nullable=False),
    ]


def _leadership() -> list[sa.Column[object]]:
    return [
        sa.Column("leader_before", sa.Integer),
        sa.Column("leader_after", sa.Integer),
        sa.Column("isr_before", sa.Text),
        sa.Column("isr_after", sa.Text),
        sa.Column("leader_epoch_before", sa.Integer),
        sa.Column("leader_epoch_after", sa.Integer),
    ]


def _operation_index(table: str) -> None:
    op.create_index(
        op.f(f"ix_{table}_operation_id"),
        table,
        ["operation_id"],
        sqlite_where=_WITH_OPERATION,
        postgresql_where=_WITH_OPERATION,
    )


def upgrade() -> None:
    op.create_table(
        "operations",
        sa.Column("operation_id", sa.String(36), primary_key=True, comment="UUID string"),
        sa.Column("kind", sa.String(64), nullable=False),
        sa.Column("requester", sa.String(255), nullable=False),
        sa.Column("reason", sa.Text),
        sa.Column("parameters", _Json, comment="the request's parameters, as JSON"),
        sa.Column("dry_run", sa.Boolean, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("error", sa.Text),
        sa.Column("started_ms", sa.BigInteger, nullable=False),
        sa.Column("finished_ms", sa.BigInteger),
        sa.Column("airflow_dag_id", sa.String(250)),
        sa.Column("airflow_run_id", sa.String(250)),
        sa.Column("airflow_task_id", sa.String(250)),
        sa.CheckConstraint(
            "status IN ('running', 'succeeded', 'failed', 'cancelled')", name=op.f("ck_operations_status")
        ),
        sa.PrimaryKeyConstraint("operation_id", name=op.f("pk_operations")),
    )
    op.create_index(op.f("ix_operations_started_ms"), "operations", ["started_ms"])

    op.create_table(
        "partition_transitions",
        *_transition_head(),
        sa.Column("from_state", sa.String(32), nullable=False),
        sa.Column("to_state", sa.String(32), nullable=False),
        *_leadership(),
        sa.Column("election_strategy", sa.String(64)),
        sa.Column("unclean", sa.Boolean, nullable=False),
        sa.Column("outcome", sa.String(8), nullable=False),
        sa.Column("error", sa.Text),
        sa.Column("timestamp_ms", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_partition_transitions")),
        sa.UniqueConstraint(
            "controller_id",
            "controller_epoch",
            "sequence",
            name=op.f("uq_partition_transitions_key"),
        ),
    )
    _operation_index("partition_transitions")

    op.create_table(
        "replica_transitions",
        *_transition_head(),
        sa.Column("replica", sa.Integer, nullable=False),
        sa.Column("from_state", sa.String(32), nullable=False),
        sa.Column("to_state", sa.String(32), nullable=False),
        *_leadership(),
        sa.Column("outcome", sa.String(8), nullable=False),
        sa.Column("error", sa.Text),
        sa.Column("timestamp_ms", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_replica_transitions")),
        sa.UniqueConstraint(
            "controller_id",
            "controller_epoch",
            "sequence",
            name=op.f("uq_replica_transitions_key"),
        ),
    )
    _operation_index("replica_transitions")

    op.create_table(
        "controller_events",
        sa.Column("id", _BigId, primary_key=True, autoincrement=True),
        sa.Column(
            "kind", sa.String(32), nullable=False, comment="elected | resigned | failover | moved | ..."
        ),
        sa.Column("broker_id", sa.Integer, nullable=False),
        sa.Column("controller_epoch", sa.Integer, nullable=False),
        sa.Column("started_ms", sa.BigInteger, nullable=False),
        sa.Column("duration_ms", sa.Float, nullable=False),
        sa.Column("detail", sa.Text),
        sa.Column("sequence", sa.BigInteger),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_controller_events")),
        sa.UniqueConstraint(
            "broker_id",
            "controller_epoch",
            "kind",
            "started_ms",
            name=op.f("uq_controller_events_key"),
        ),
    )

    op.create_table(
        "reconciliation_runs",
        sa.Column("run_id", sa.String(36), primary_key=True, comment="UUID string"),
        sa.Column("operation_id", sa.String(36)),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("started_ms", sa.BigInteger, nullable=False),
        sa.Column("finished_ms", sa.BigInteger),
        sa.Column("snapshot_path", sa.Text),
        sa.Column("partitions_checked", sa.Integer),
        sa.Column("findings_count", sa.Integer),
        sa.Column("detail", sa.Text),
        sa.PrimaryKeyConstraint("run_id", name=op.f("pk_reconciliation_runs")),
    )
    op.create_index(op.f("ix_reconciliation_runs_started_ms"), "reconciliation_runs", ["started_ms"])

    op.create_table(
        "reconciliation_findings",
        sa.Column("id", _BigId, primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.String(36), nullable=False),
        sa.Column("kind", sa.String(64), nullable=False),
        sa.Column("severity", sa.String(16), nullable=False),
        sa.Column("topic", sa.Text),
        sa.Column("partition", sa.Integer),
        sa.Column("replica", sa.Integer),
        sa.Column("expected", sa.Text),
        sa.Column("actual", sa.Text),
        sa.Column("detail", sa.Text),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_reconciliation_findings")),
        sa.ForeignKeyConstraint(
            ["run_id"],
            ["reconciliation_runs.run_id"],
            name=op.f("fk_reconciliation_findings_run_id_reconciliation_runs"),
            ondelete="CASCADE",
        ),
    )
    op.create_index(op.f("ix_reconciliation_findings_run_id"), "reconciliation_findings", ["run_id"])


def downgrade() -> None:
    for table in (
        "reconciliation_findings",
        "reconciliation_runs",
        "controller_events",
        "replica_transitions",
        "partition_transitions",
        "operations",
    ):
        op.drop_table(table)
