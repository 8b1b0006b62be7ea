"""The ``AuditWriter``'s way back from an outage, the rows it sets aside, and its counters.

``SpoolRecovery`` is the part of the writer thread that runs while the spool holds rows: (re)create
or upgrade the schema, replay the spool oldest first in chunks (the unique keys make a replay
idempotent), and keep the database's state (up or down, the last error, the backoff before the
next try). ``RejectedRows`` sets aside rows the database can never accept; ``move_journal`` moves
what a dead writer journaled into the spool. The writer builds each in its constructor and hands
it what it uses (see ``writer.AuditWriter``).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from kafka_controller.audit.engine import one_line
from kafka_controller.audit.migrate import upgrade_database
from kafka_controller.audit.repeat_log import RepeatedLog
from kafka_controller.audit.rows import Batch, Row, batch_size, split_valid
from kafka_controller.audit.spool import Spool
from kafka_controller.audit.store_file import StoreFile
from kafka_controller.ports import Clock

log = logging.getLogger("kafka_controller.audit.writer")

REJECTED_FILE = "rejected.jsonl"
_REPLAY_CHUNK_ROWS = 50_000


@dataclass(frozen=True, slots=True)
class AuditWriterStats:
    accepted: int  #: records handed to ``record``
    written: int  #: rows committed to the database straight from memory
    spooled: int  #: rows appended to the spool
    replayed: int  #: spooled rows replayed into the database and cleared from the spool
    duplicates: int  #: rows the database already had (skipped by the unique keys)
    rejected: int  #: records the database can never accept, kept in rejected.jsonl
    dropped: int  #: records recorded after close() or still in memory when close() gave up
    pending: int  #: records accepted but not yet settled in the database or the spool
    spool_rows: int
    spool_bytes: int
    database_available: bool
    last_error: str | None
    lag_ms: int = 0  #: age of the oldest record not yet settled (``AuditWriter.lag_ms``)


#: ``AuditWriter._write``: commit a batch; the rows it tried and how many were new (None: unavailable).
WriteBatch = Callable[..., tuple[Batch, int | None]]


class RejectedRows:
    """Rows the database can never accept (a malformed record), kept in ``rejected.jsonl`` in the
    spool directory so that one bad record cannot block the rest, and counted.

    ``lock`` is the writer's: ``count`` changes under it, and ``AuditWriter.stats`` reads it there."""

    def __init__(self, directory: Path, errors: RepeatedLog, lock: threading.Lock) -> None:
        self.path = directory / REJECTED_FILE
        self.count = 0
        self._errors = errors
        self._lock = lock

    def split(self, batch: Batch) -> tuple[Batch, list[tuple[str, Row, str]]]:
        """The rows the database can take, and the others (set aside in ``rejected.jsonl``)."""
        good, bad = split_valid(batch)
        if bad:
            self.reject([{"table": t, "row": list(r), "reason": why} for t, r, why in bad], len(bad))
        return good, bad

    def reject(self, entries: list[dict[str, Any]], n: int) -> None:
        """Set ``entries`` (``n`` records) aside, each with its reason logged."""
        for entry in entries:
            log.error("audit: rejecting a record: %s", entry["reason"])
        try:
            with open(self.path, "ab") as f:
                f.writelines(orjson.dumps(e, default=repr) + b"\n" for e in entries)
                f.flush()
        except OSError as e:
            self._errors.log("rejected", logging.ERROR, "audit: cannot write %s: %s", self.path, e)
        with self._lock:
            self.count += n


class SpoolRecovery:
    """The writer thread's way back to the database, and the database's state while it is away.

    It holds whether the schema is ready, whether the database is up, the last error the writer
    met, and when to try again (a backoff doubling from ``retry_backoff[0]`` up to
    ``retry_backoff[1]``); ``recover`` creates or upgrades the schema and replays the spool
    through ``write`` (the writer's commit, which also notices a replaced SQLite file).
    ``progress`` is the writer's condition over its lock: the counters change under it, and
    ``mark_up`` wakes ``AuditWriter.wait_replayed``. Only the writer thread calls it."""

    def __init__(
        self,
        url: str,
        *,
        engine: Any,
        spool: Spool,
        store_file: StoreFile,
        write: WriteBatch,
        errors: RepeatedLog,
        clock: Clock,
        progress: threading.Condition,
        retry_backoff: tuple[float, float],
    ) -> None:
        self.url = url
        self._engine = engine
        self._spool = spool
        self._store_file = store_file
        self._write = write
        self._errors = errors
        self._clock = clock
        self._progress = progress
        self._backoff_min, self._backoff_max = retry_backoff
        self._backoff = self._backoff_min
        self.next_retry = 0.0  #: monotonic time of the next try while down
        self.schema_ready = False
        self.db_up = True
        self.last_error: str | None = None
        self.replayed = 0  #: spooled rows replayed into the database and cleared from the spool
        self.duplicates = 0  #: replayed rows the database already had

    def due(self) -> bool:
        """Whether the backoff since the last failure is over."""
        return self._clock.monotonic() >= self.next_retry

    def note_error(self, error: str) -> None:
        """The last error ``stats`` reports, for one the database's state does not change with."""
        with self._progress:
            self.last_error = error

    def mark_down(self, error: str | None) -> None:
        """The database is unavailable: the next retry after a doubled backoff."""
        with self._progress:
            self.db_up = False
            if error is not None:
                self.last_error = error
        self.next_retry = self._clock.monotonic() + self._backoff
        self._backoff = min(self._backoff * 2, self._backoff_max)

    def mark_up(self) -> None:
        with self._progress:
            self.db_up = True
            self._progress.notify_all()
        self._backoff = self._backoff_min
        self.next_retry = 0.0

    def recreate_now(self, error: str) -> None:
        """The store the schema was made in is gone (a replaced SQLite file): down, and the schema
        created again at the next cycle rather than after a backoff."""
        self.schema_ready = False
        self.mark_down(error)
        self.next_retry = self._clock.monotonic()

    def database_failed(self, error: BaseException) -> None:
        """The database refused a write or a schema upgrade: say so (once per interval while it
        lasts, naming a read-only SQLite file as such) and retry after a backoff."""
        text = one_line(error)
        path = self._store_file.path
        if path is not None and _read_only(path, text):
            self._errors.log(
                "database",
                logging.WARNING,
                "audit database %s is read-only, spooling to %s until it can be written: %s",
                path,
                self._spool.path,
                text,
            )
        else:
            self._errors.log(
                "database",
                logging.WARNING,
                "audit database %s unavailable, spooling to %s: %s",
                self.url,
                self._spool.path,
                text,
            )
        self.mark_down(text)

    def recover(self) -> None:
        """Create or upgrade the schema if needed, then replay the spool; back off on failure."""
        if not self.schema_ready:
            try:
                upgrade_database(self._engine)
            except Exception as e:
                self.database_failed(e)
                return
            self._store_file.remember()  # the file the engine's connections now have open
            self.schema_ready = True
        if not self._spool:
            self._errors.resolved("database", "audit database %s is back", self.url)
            self.mark_up()
            return
        chunk: Batch = {}
        for batch in self._spool.read():
            for table, table_rows in batch.items():
                chunk.setdefault(table, []).extend(table_rows)
            if batch_size(chunk) >= _REPLAY_CHUNK_ROWS:
                if not self._replay_chunk(chunk):
                    return
                chunk = {}
        if chunk and not self._replay_chunk(chunk):
            return
        replayed = self._spool.rows
        self._spool.clear()
        with self._progress:
            self.replayed += replayed
        if not self._errors.resolved(
            "database", "audit database %s is back: replayed %d spooled rows", self.url, replayed
        ):
            log.info("audit database %s: replayed %d spooled rows", self.url, replayed)
        self.mark_up()

    def _replay_chunk(self, chunk: Batch) -> bool:
        loaded, inserted = self._write(chunk, may_conflict=True)
        if inserted is None:
            return False
        with self._progress:
            self.duplicates += batch_size(loaded) - inserted
        return True


def move_journal(journal: Spool | None, spool: Spool) -> int:
    """Move what a dead writer journaled but never settled into the spool (replayed with the
    unique keys, so rows it did commit are not doubled); the number of rows moved."""
    if journal is None or not journal:
        return 0
    moved = 0
    for batch in journal.read():
        spool.append(batch)
        moved += batch_size(batch)
    journal.clear()
    log.warning("audit: %d journaled rows of an earlier writer moved to the spool for replay", moved)
    return moved


def _read_only(path: os.PathLike[str], error: str) -> bool:
    """Whether a SQLite failure is the file (or its directory, where SQLite keeps the WAL and its
    index) being read-only: ``access(2)`` says so for a read-only mount even to root."""
    if "readonly" in error or "read-only" in error:
        return True
    directory = os.path.dirname(os.fspath(path)) or "."
    try:
        if os.path.exists(path) and not os.access(path, os.W_OK):
            return True
        return os.path.isdir(directory) and not os.access(directory, os.W_OK)
    except OSError:
        return False


AUDIT_LAG_MS = "kafka.controller:type=AuditWriter,name=LagMs"
AUDIT_QUEUE_DEPTH = "kafka.controller:type=AuditWriter,name=QueueDepth"
AUDIT_SPOOL_ROWS = "kafka.controller:type=AuditWriter,name=SpoolRows"


def register_writer_gauges(metrics: Any, writer: Any) -> None:
    """The writer's lag, its queue and its spool as gauges of a ``MetricsRegistry``: how far a
    reader of the audit store is behind the controller (and whether the database is keeping up)."""
    metrics.gauge(AUDIT_LAG_MS, writer.lag_ms, "Age of the oldest audit record not yet settled (ms)")
    metrics.gauge(AUDIT_QUEUE_DEPTH, lambda: writer.stats().pending, "Audit records not yet settled")
    metrics.gauge(AUDIT_SPOOL_ROWS, lambda: writer.stats().spool_rows, "Audit rows waiting in the spool")
