"""The audit store's schema: the single source of truth for migrations, ``sql/`` and the writer.

Design choices, and why:

* Times are ``BIGINT`` milliseconds since the epoch (what the records carry): portable between SQLite
  and PostgreSQL, free of time-zone surprises, and cheap to bucket in report queries.
* Each transition table has a surrogate ``id`` (insertion order, handy for Spark range reads) and the
  idempotency key ``(controller_id, controller_epoch, sequence)``. Partition and replica transitions
  share **one** per-controller sequence space (the runtime's single counter), so ordering the union
  of both tables by sequence replays a controller's decisions; each table keeps its own unique key,
  so the writer does not depend on that sharing. A record without a sequence (``-1``) is stored with
  ``sequence`` NULL: kept, but not deduplicated.
* Controller events are keyed by ``(broker_id, controller_epoch, kind, started_ms)``: one broker
  cannot start two events of one kind in the same millisecond and epoch, and the key needs no
  sequence stamping.
* ``operation_id`` on transitions is indexed but not a foreign key: an operation may be recorded in
  another process (Airflow) after the controller's rows, and a foreign-key failure would turn an
  audit row into a poison batch.
* ``cluster_id`` (ZooKeeper's ``/cluster/id``, which Kafka's first broker creates) on operations,
  transitions and controller events, so that several clusters can audit into one database and
  every report, view and reconciliation can keep to one of them. NULL on rows written before the
  column existed (and by writers that do not know their cluster): one cluster in a database then
  reads as before. It is not part of any unique key, because a controller's ``(controller_id,
  controller_epoch, sequence)`` is unique within its cluster only in practice: two clusters can
  both have controller 1 at epoch 1, and the key then keeps the first of two clashing rows, as it
  did before this column; filtering by cluster is what stops reports from mixing them.
* ISR lists are JSON array text (``"[1,2,3]"``): readable, and parseable by PostgreSQL and Spark.
* Transition tables carry no CHECK constraint and few indexes, on purpose: on SQLite a CHECK on
  ``outcome`` alone cost more than half the insert time of 100,000 rows. The writer checks outcomes in
  Python instead (``rows.to_batch``), where it costs a set lookup; indexes are the unique key, the
  time (appended in order, cheap) and a partial index on ``operation_id``.
"""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    column,
    false,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.sql.naming import conv
from sqlalchemy.types import JSON

from kafka_controller.domain.errors import InvalidArgumentError, brief

OUTCOMES: tuple[str, ...] = ("ok", "invalid", "failed")

#: The column that says which cluster a row belongs to; filled by whoever writes the row (the
#: writer's loaders add it to every row they load, so it is not in ``LOADED_TABLES``' row tuples).
CLUSTER_ID = "cluster_id"
CLUSTER_ID_MAX = 64
_CLUSTER_ID_TEXT = re.compile(r"[A-Za-z0-9_.-]+")


def checked_cluster_id(value: object) -> str | None:
    """``value`` if it can be a cluster id in the audit (1-64 characters of Kafka's URL-safe base64
    alphabet, which ``Uuid.toString`` uses, plus ``.``), None for None; else ``InvalidArgumentError``.
    Kept that narrow so the loaders may write it as an SQL literal."""
    if value is None:
        return None
    if (
        not isinstance(value, str)
        or not 0 < len(value) <= CLUSTER_ID_MAX
        or not _CLUSTER_ID_TEXT.fullmatch(value)
    ):
        raise InvalidArgumentError(
            f"bad cluster id {brief(value)}: must be 1-{CLUSTER_ID_MAX} characters of A-Z a-z 0-9 _ - ."
        )
    return value


#: The principal Kafka names an unauthenticated client (``KafkaPrincipal.ANONYMOUS``).
ANONYMOUS_PRINCIPAL = "User:ANONYMOUS"
OPERATION_RUNNING = "running"
OPERATION_FINAL_STATUSES: tuple[str, ...] = ("succeeded", "failed", "cancelled")
OPERATION_STATUSES: tuple[str, ...] = (OPERATION_RUNNING, *OPERATION_FINAL_STATUSES)

#: Alembic's bookkeeping table; not ``alembic_version``, so the audit store can share a database
#: with Airflow's metadata (which uses that name) without either clobbering the other.
VERSION_TABLE = "kafka_controller_audit_version"

#: Deterministic constraint and index names, so migrations can refer to them on every backend.
NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

metadata = MetaData(naming_convention=NAMING_CONVENTION)

# BIGINT on PostgreSQL; INTEGER on SQLite, where only ``INTEGER PRIMARY KEY`` aliases the rowid.
_BigId = BigInteger().with_variant(Integer(), "sqlite")
_Json = JSON().with_variant(JSONB(), "postgresql")


def _cluster_id() -> Column[str]:
    return Column(CLUSTER_ID, String(CLUSTER_ID_MAX), comment="ZooKeeper's /cluster/id; NULL on older rows")


def _unique_key(table: str, *columns: str) -> Index:
    """A table's idempotency key, within its cluster: two clusters in one database can both have
    controller 1 at epoch 1, and neither may drop the other's rows as duplicates. A unique index
    over ``coalesce(cluster_id, '')``, not a constraint over ``cluster_id``, because NULLs never
    clash in a unique constraint: rows of a writer that does not know its cluster (and rows from
    before the column) must still be deduplicated on replay. ``ON CONFLICT DO NOTHING`` (no
    target) honours it on both backends."""
    return Index(
        conv(f"uq_{table}_key"), *columns, func.coalesce(column(CLUSTER_ID), text("''")), unique=True
    )


def _in(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


operations = Table(
    "operations",
    metadata,
    Column("operation_id", String(36), primary_key=True, comment="UUID string"),
    Column("kind", String(64), nullable=False),
    Column("requester", String(255), nullable=False),
    Column("reason", Text),
    Column("parameters", _Json, comment="the request's parameters, as JSON"),
    Column("dry_run", Boolean, nullable=False),
    Column("status", String(16), nullable=False),
    Column("error", Text),
    Column("started_ms", BigInteger, nullable=False),
    Column("finished_ms", BigInteger),
    Column("airflow_dag_id", String(250)),
    Column("airflow_run_id", String(250)),
    Column("airflow_task_id", String(250)),
    Column("result", _Json, comment="what the operation did, as JSON (bounded: see operations)"),
    _cluster_id(),
    Column("principal", String(255), comment="a Kafka request's principal (User:ANONYMOUS unauthenticated)"),
    Column("client_id", String(255), comment="a request's client id, when it came over a listener"),
    Column("client_address", String(255), comment="the peer's host:port, when it came over a listener"),
    CheckConstraint(_in("status", OPERATION_STATUSES), name="status"),
    Index(None, "started_ms"),
)

_TRANSITION_HEAD = (
    ("controller_id", Integer, False),
    ("controller_epoch", Integer, False),
    ("sequence", BigInteger, True),
    ("event", Text, True),
    ("operation_id", String(36), True),
    ("topic", Text, False),
    ("partition", Integer, False),
)
_LEADERSHIP = (
    ("leader_before", Integer, True),
    ("leader_after", Integer, True),
    ("isr_before", Text, True),
    ("isr_after", Text, True),
    ("leader_epoch_before", Integer, True),
    ("leader_epoch_after", Integer, True),
)


def _columns(spec: tuple[tuple[str, Any, bool], ...]) -> list[Column[Any]]:
    return [Column(name, type_, nullable=nullable) for name, type_, nullable in spec]


def _dry_run() -> Column[bool]:
    """Rows a dry run planned (an in-memory controller's): kept apart from what happened, and left
    out of reports, metrics and the web view unless asked for."""
    return Column("dry_run", Boolean, nullable=False, server_default=false())


def _operation_index() -> Index:
    """Partial: most transitions carry no operation, and indexing their NULLs would cost every insert."""
    where = text("operation_id IS NOT NULL")
    return Index(None, "operation_id", sqlite_where=where, postgresql_where=where)


partition_transitions = Table(
    "partition_transitions",
    metadata,
    Column("id", _BigId, primary_key=True, autoincrement=True),
    *_columns(_TRANSITION_HEAD),
    Column("from_state", String(32), nullable=False),
    Column("to_state", String(32), nullable=False),
    *_columns(_LEADERSHIP),
    Column("election_strategy", String(64)),
    Column("unclean", Boolean, nullable=False),
    Column("outcome", String(8), nullable=False),
    Column("error", Text),
    Column("timestamp_ms", BigInteger, nullable=False),
    _dry_run(),
    _cluster_id(),
    _unique_key("partition_transitions", "controller_id", "controller_epoch", "sequence"),
    _operation_index(),
    Index(None, "timestamp_ms"),
)

replica_transitions = Table(
    "replica_transitions",
    metadata,
    Column("id", _BigId, primary_key=True, autoincrement=True),
    *_columns(_TRANSITION_HEAD),
    Column("replica", Integer, nullable=False),
    Column("from_state", String(32), nullable=False),
    Column("to_state", String(32), nullable=False),
    *_columns(_LEADERSHIP),
    Column("outcome", String(8), nullable=False),
    Column("error", Text),
    Column("timestamp_ms", BigInteger, nullable=False),
    _dry_run(),
    _cluster_id(),
    _unique_key("replica_transitions", "controller_id", "controller_epoch", "sequence"),
    _operation_index(),
    Index(None, "timestamp_ms"),
)

controller_events = Table(
    "controller_events",
    metadata,
    Column("id", _BigId, primary_key=True, autoincrement=True),
    Column("kind", String(32), nullable=False, comment="elected | resigned | failover | moved | ..."),
    Column("broker_id", Integer, nullable=False),
    Column("controller_epoch", Integer, nullable=False),
    Column("started_ms", BigInteger, nullable=False),
    Column("duration_ms", Float, nullable=False),
    Column("detail", Text),
    Column("sequence", BigInteger),
    _dry_run(),
    Column("previous_broker_id", Integer, comment="failover: the controller this one replaced"),
    Column("lost_ms", BigInteger, comment="failover: when /controller went away (the watch fired)"),
    Column("first_offline_ms", BigInteger, comment="failover: when offline partitions were first seen"),
    Column("offline_partitions", Integer, comment="failover: partitions without a live leader then"),
    Column("recovered_ms", BigInteger, comment="failover: when every electable partition was led"),
    _cluster_id(),
    _unique_key("controller_events", "broker_id", "controller_epoch", "kind", "started_ms"),
)

# Filled by the reconciliation (Spark) job: one row per run, one per finding.
reconciliation_runs = Table(
    "reconciliation_runs",
    metadata,
    Column("run_id", String(36), primary_key=True, comment="UUID string"),
    Column("operation_id", String(36)),
    Column("status", String(16), nullable=False),
    Column("started_ms", BigInteger, nullable=False),
    Column("finished_ms", BigInteger),
    Column("snapshot_path", Text),
    Column("partitions_checked", Integer),
    Column("findings_count", Integer),
    Column("detail", Text),
    _cluster_id(),
    Index(None, "started_ms"),
)

reconciliation_findings = Table(
    "reconciliation_findings",
    metadata,
    Column("id", _BigId, primary_key=True, autoincrement=True),
    Column(
        "run_id", String(36), ForeignKey("reconciliation_runs.run_id", ondelete="CASCADE"), nullable=False
    ),
    Column("kind", String(64), nullable=False),
    Column("severity", String(16), nullable=False),
    Column("topic", Text),
    Column("partition", Integer),
    Column("replica", Integer),
    Column("expected", Text),
    Column("actual", Text),
    Column("detail", Text),
    Index(None, "run_id"),
)

#: The tables the writer loads, and for each the columns of its row tuples, in order (the loaders
#: add ``cluster_id`` themselves, one value for every row: see ``backends``).
LOADED_TABLES: dict[str, tuple[str, ...]] = {
    str(t.name): tuple(str(c.name) for c in t.columns if c.name not in ("id", CLUSTER_ID))
    for t in (partition_transitions, replica_transitions, controller_events)
}

#: The idempotency key of each loaded table (what ``ON CONFLICT DO NOTHING`` relies on).
CONFLICT_KEYS: dict[str, tuple[str, ...]] = {
    "partition_transitions": ("controller_id", "controller_epoch", "sequence"),
    "replica_transitions": ("controller_id", "controller_epoch", "sequence"),
    "controller_events": ("broker_id", "controller_epoch", "kind", "started_ms"),
}
