"""Bulk loaders: one transaction per batch, idempotent on the tables' unique keys.

* SQLite: ``executemany`` of ``INSERT ... ON CONFLICT DO NOTHING`` through the DB-API (no per-row
  SQLAlchemy processing), in one transaction. Durability is the engine's ``PRAGMA synchronous``: FULL
  (the writer's default) fsyncs the WAL at every commit and survives power loss; NORMAL fsyncs only
  at checkpoints, so a commit survives a crash of the process but the last ones may roll back after
  a power cut or kernel crash (the database itself stays consistent).
* PostgreSQL: ``COPY ... FROM STDIN`` straight into the table for fresh batches (the fast path); a
  batch that may hold rows already stored (a replay, or a fresh batch that hit a unique key) goes
  through ``COPY`` into a temporary table and ``INSERT ... SELECT ... ON CONFLICT DO NOTHING``.
  Durability is the server's commit (``synchronous_commit`` on by default).

``write`` returns how many rows were new; duplicates are silently skipped, which is what makes
replaying the spool safe.

A loader made with a ``cluster_id`` stamps it on every row it loads (``schema.CLUSTER_ID``): the
row tuples, the journal and the spool never carry it, so a broker's writer costs nothing more per
row on SQLite (the id is a literal in the statement) and one tuple per row on PostgreSQL's COPY.
"""

from __future__ import annotations

from typing import Any, Protocol

from sqlalchemy import Connection, Engine

from kafka_controller.audit.rows import Batch
from kafka_controller.audit.schema import CLUSTER_ID, LOADED_TABLES, checked_cluster_id


class Loader(Protocol):
    def write(self, batch: Batch, *, may_conflict: bool = False) -> int:
        """Commit every row of ``batch`` in one transaction; return the number of rows inserted."""
        ...

    def maintain(self, *, idle: bool) -> None:
        """Housekeeping between batches (SQLite: WAL checkpoints); must not raise."""
        ...


def _quoted(conn_or_engine: Engine | Connection, names: tuple[str, ...]) -> str:
    quote = conn_or_engine.dialect.identifier_preparer.quote
    return ", ".join(quote(n) for n in names)


class SqliteLoader:
    """See the module docstring. WAL checkpoints run in ``maintain`` rather than inside a commit: when
    the writer is idle with ``IDLE_CHECKPOINT_ROWS`` rows in the WAL, or after ``CHECKPOINT_ROWS``
    rows under sustained load, so a batch rarely waits for one and a trickle does not fsync each time."""

    IDLE_CHECKPOINT_ROWS = 10_000
    CHECKPOINT_ROWS = 200_000

    def __init__(self, engine: Engine, cluster_id: str | None = None) -> None:
        self.engine = engine
        self._since_checkpoint = 0
        cid = checked_cluster_id(cluster_id)
        # a checked id is URL-safe base64 text: safe as a literal, and free per row
        extra_col, extra_val = (f", {CLUSTER_ID}", f", '{cid}'") if cid is not None else ("", "")
        self._sql = {
            table: f"INSERT INTO {table} ({_quoted(engine, cols)}{extra_col}) "
            f"VALUES ({', '.join('?' * len(cols))}{extra_val}) ON CONFLICT DO NOTHING"
            for table, cols in LOADED_TABLES.items()
        }

    def write(self, batch: Batch, *, may_conflict: bool = False) -> int:
        inserted = 0
        with self.engine.begin() as conn:
            for table, rows in batch.items():
                if rows:
                    inserted += max(conn.exec_driver_sql(self._sql[table], rows).rowcount, 0)
        self._since_checkpoint += inserted
        return inserted

    def maintain(self, *, idle: bool) -> None:
        due = self.IDLE_CHECKPOINT_ROWS if idle else self.CHECKPOINT_ROWS
        if self._since_checkpoint < due:
            return
        try:
            with self.engine.connect() as conn:
                raw: Any = conn.connection.driver_connection
                raw.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            self._since_checkpoint = 0
        except Exception:  # a missed checkpoint only lets the WAL grow until the next one
            pass


class PostgresLoader:
    def __init__(self, engine: Engine, cluster_id: str | None = None) -> None:
        self.engine = engine
        self._cluster = checked_cluster_id(cluster_id)
        extra = (CLUSTER_ID,) if self._cluster is not None else ()
        self._cols = {table: _quoted(engine, (*cols, *extra)) for table, cols in LOADED_TABLES.items()}

    def write(self, batch: Batch, *, may_conflict: bool = False) -> int:
        import psycopg

        if not may_conflict:
            try:
                return self._write(batch, dedup=False)
            except psycopg.errors.UniqueViolation:
                pass  # some rows are there already (a commit whose reply was lost): dedup below
        return self._write(batch, dedup=True)

    def _write(self, batch: Batch, *, dedup: bool) -> int:
        inserted = 0
        with self.engine.begin() as conn:
            raw: Any = conn.connection.driver_connection
            with raw.cursor() as cur:
                for table, rows in batch.items():
                    if not rows:
                        continue
                    cols = self._cols[table]
                    target = f"_load_{table}" if dedup else table
                    if dedup:
                        cur.execute(
                            f"CREATE TEMP TABLE IF NOT EXISTS {target} ON COMMIT DELETE ROWS AS "
                            f"SELECT {cols} FROM {table} WITH NO DATA"
                        )
                    with cur.copy(f"COPY {target} ({cols}) FROM STDIN") as copy:
                        if self._cluster is None:
                            for row in rows:
                                copy.write_row(row)
                        else:
                            tail = (self._cluster,)
                            for row in rows:
                                copy.write_row((*row, *tail))
                    if dedup:
                        cur.execute(
                            f"INSERT INTO {table} ({cols}) SELECT {cols} FROM {target} ON CONFLICT DO NOTHING"
                        )
                        inserted += max(cur.rowcount, 0)
                    else:
                        inserted += len(rows)
        return inserted

    def maintain(self, *, idle: bool) -> None:
        return None


def loader_for(engine: Engine, cluster_id: str | None = None) -> Loader:
    if engine.dialect.name == "postgresql":
        return PostgresLoader(engine, cluster_id)
    return SqliteLoader(engine, cluster_id)
