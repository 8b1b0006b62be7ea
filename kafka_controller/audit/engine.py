"""Engines for the audit store, and the one place SQLAlchemy errors become the project's errors.

SQLite gets WAL (readers never block the writer), a busy timeout (other processes, e.g. Airflow tasks
recording operations, may hold the write lock briefly), foreign keys, and explicit ``BEGIN`` so that
DDL is transactional (pysqlite otherwise commits DDL as it goes, which would leave a half-migrated
file behind a failed upgrade). PostgreSQL gets a connect timeout so an unreachable server costs the
writer seconds, not minutes, before it switches to the spool.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError, SQLAlchemyError

from kafka_controller.domain.errors import InvalidArgumentError, KafkaControllerError

SQLITE_SYNCHRONOUS = ("OFF", "NORMAL", "FULL", "EXTRA")
#: Page cache per connection: large enough that a batch of transitions (``AuditWriter``'s 5,000
#: rows by default, ~2 MB of table and index pages) never spills mid-transaction. 64 MiB wrote no
#: faster (``bench/audit.py``: 0.41 s either way) and held ~30 MB more of a failing-over
#: controller's RSS; 16 MiB with 20,000-row batches peaked ~13 MB higher in the RF 3 failover.
SQLITE_CACHE_KIB = 4096
#: Execution option that makes a SQLite transaction take the write lock at BEGIN (for migrations).
SQLITE_BEGIN_IMMEDIATE = "kafka_controller_begin_immediate"


class AuditStoreError(KafkaControllerError):
    """The audit database could not be reached or used; the message is one line naming the cause."""


def parse_url(url: str | URL) -> URL:
    """Parse and check an audit URL; raise ``InvalidArgumentError`` naming what is wrong."""
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError) as e:
        raise InvalidArgumentError(f"bad audit database URL {str(url)!r}: {one_line(e)}") from None
    backend = parsed.get_backend_name()
    if backend not in ("sqlite", "postgresql"):
        raise InvalidArgumentError(
            f"bad audit database URL {parsed.render_as_string(hide_password=True)!r}: "
            f"backend {backend!r} is not supported (use sqlite or postgresql)"
        )
    if backend == "sqlite" and parsed.database in (None, "", ":memory:"):
        raise InvalidArgumentError(
            "bad audit database URL: an in-memory SQLite database is not durable; give a file path"
        )
    return parsed


def sqlite_path(url: URL) -> Path | None:
    return Path(url.database) if url.get_backend_name() == "sqlite" and url.database else None


def create_audit_engine(
    url: str | URL,
    *,
    sqlite_synchronous: str = "FULL",
    sqlite_autocheckpoint: bool = True,
    must_exist: bool = False,
    **kwargs: Any,
) -> Engine:
    """An engine for the audit store.

    ``must_exist`` refuses a SQLite file that is not there yet (reports read; they should not
    create an empty database by accident). ``sqlite_autocheckpoint=False`` leaves WAL checkpoints to
    the caller (the writer runs them when idle, off the path of a batch).
    """
    parsed = parse_url(url)
    sync = sqlite_synchronous.upper()
    if sync not in SQLITE_SYNCHRONOUS:
        raise InvalidArgumentError(
            f"bad sqlite_synchronous {sqlite_synchronous!r}: use one of {SQLITE_SYNCHRONOUS}"
        )
    path = sqlite_path(parsed)
    if path is not None:
        if must_exist and not path.is_file():
            raise AuditStoreError(f"no audit database at {path}")
        if not path.parent.is_dir():
            raise AuditStoreError(
                f"cannot create audit database {path}: directory {path.parent} does not exist"
            )
    if parsed.get_backend_name() == "postgresql":
        args = dict(kwargs.pop("connect_args", {}))
        args.setdefault("connect_timeout", 5)
        kwargs["connect_args"] = args
        kwargs.setdefault("pool_pre_ping", True)
    try:
        engine = create_engine(parsed, **kwargs)
    except (ArgumentError, NoSuchModuleError, ImportError) as e:
        raise InvalidArgumentError(f"bad audit database URL: {one_line(e)}") from None
    if path is not None:
        _configure_sqlite(engine, sync, sqlite_autocheckpoint)
    return engine


def _configure_sqlite(engine: Engine, synchronous: str, autocheckpoint: bool) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None  # we issue BEGIN ourselves (see the module docstring)
        cur = dbapi_conn.cursor()
        # First: switching to WAL takes a lock too, so it must already wait rather than fail while
        # another process (or a concurrent migration) holds one; 30 s covers a loaded machine.
        cur.execute("PRAGMA busy_timeout=30000")
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute(f"PRAGMA synchronous={synchronous}")
        cur.execute(f"PRAGMA cache_size=-{SQLITE_CACHE_KIB}")
        if not autocheckpoint:
            cur.execute("PRAGMA wal_autocheckpoint=0")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        immediate = conn.get_execution_options().get(SQLITE_BEGIN_IMMEDIATE, False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


def one_line(e: BaseException) -> str:
    """The first line of an error's message, without SQLAlchemy's background links and SQL echo."""
    orig = getattr(e, "orig", None)
    text = str(orig if orig is not None else e).strip()
    for line in text.splitlines():
        line = line.strip()
        if line:
            return line
    return type(e).__name__


def translate(e: SQLAlchemyError, what: str) -> AuditStoreError:
    """SQLAlchemy errors stop here (docs/rules.md, errors are translated at the adapter edge)."""
    return AuditStoreError(f"{what}: {one_line(e)}")


def redacted(url: str | URL) -> str:
    try:
        return make_url(url).render_as_string(hide_password=True)
    except (ArgumentError, ValueError):
        return "<unparseable URL>"
