"""Create or upgrade an audit database in place, programmatically (no ``alembic.ini`` needed).

One transaction holds the whole upgrade: PostgreSQL's DDL is transactional, and the SQLite engine
issues ``BEGIN IMMEDIATE`` for it (see ``engine``), so a failed upgrade leaves the previous revision
intact and concurrent callers (several brokers starting at once) serialise instead of racing.
SQLite can still answer "database is locked" past its busy timeout on a loaded machine (the first
caller's upgrade holds the lock for the whole migration): such an upgrade is retried, a few times.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, inspect, text
from sqlalchemy.engine import URL
from sqlalchemy.exc import OperationalError, SQLAlchemyError

from kafka_controller.audit.engine import SQLITE_BEGIN_IMMEDIATE, create_audit_engine, translate
from kafka_controller.audit.schema import VERSION_TABLE

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
#: Attempts of an SQLite upgrade that found the database locked, and the pause before each retry.
SQLITE_LOCKED_ATTEMPTS, SQLITE_LOCKED_BACKOFF_S = 4, 1.0
#: Any fixed 64-bit number; names the lock that serialises upgrades on PostgreSQL.
_PG_ADVISORY_LOCK = 0x4B43_4155_4449_5400


def alembic_config() -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    return cfg


def head_revision() -> str:
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None
    return head


def current_revision(conn: Connection) -> str | None:
    """The revision the database is at, or ``None`` when it has no audit schema yet."""
    return MigrationContext.configure(conn, opts={"version_table": VERSION_TABLE}).get_current_revision()


def upgrade_database(target: str | URL | Engine, revision: str = "head") -> str:
    """Bring the audit schema at ``target`` to ``revision`` (create it when absent); return the revision.

    Idempotent and safe to call at every start-up. Raises ``AuditStoreError`` (one line) when the
    database cannot be reached or upgraded, ``InvalidArgumentError`` for a bad URL.
    """
    return _migrate(target, command.upgrade, revision, "upgrade")


def downgrade_database(target: str | URL | Engine, revision: str) -> str:
    """Take the audit schema back to ``revision`` (``"base"`` drops it); return the revision reached."""
    return _migrate(target, command.downgrade, revision, "downgrade")


def _migrate(
    target: str | URL | Engine, step: Callable[[Config, str], None], revision: str, what: str
) -> str:
    attempt = 1
    while True:
        try:
            return _migrate_once(target, step, revision, what)
        except _SqliteLocked as locked:
            if attempt == SQLITE_LOCKED_ATTEMPTS:
                raise locked.error from None
        time.sleep(SQLITE_LOCKED_BACKOFF_S * attempt)
        attempt += 1


class _SqliteLocked(Exception):
    """Internal: "database is locked" from SQLite (retried), carrying the one-line error to raise."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


def _migrate_once(
    target: str | URL | Engine, step: Callable[[Config, str], None], revision: str, what: str
) -> str:
    engine = target if isinstance(target, Engine) else create_audit_engine(target)
    try:
        with engine.connect() as conn:
            if conn.dialect.name == "sqlite":
                conn = conn.execution_options(**{SQLITE_BEGIN_IMMEDIATE: True})
            with conn.begin():
                if conn.dialect.name == "postgresql":
                    conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_ADVISORY_LOCK})
                cfg = alembic_config()
                cfg.attributes["connection"] = conn
                step(cfg, revision)
                reached = current_revision(conn)
    except SQLAlchemyError as e:
        error = translate(e, f"cannot {what} the audit database {engine.url.render_as_string()}")
        if isinstance(e, OperationalError) and engine.dialect.name == "sqlite" and "locked" in str(e.orig):
            raise _SqliteLocked(error) from None
        raise error from None
    finally:
        if engine is not target:
            engine.dispose()
    return reached or "base"


def has_schema(conn: Connection) -> bool:
    """Whether the audit tables exist (a report on a blank database says so instead of failing)."""
    return inspect(conn).has_table("partition_transitions")
