"""The ``AuditWriter``'s way back from an outage, its bookkeeping, and its counters.

``SpoolRecovery`` is the part of the writer thread that runs while the spool holds rows: (re)create
or upgrade the schema, replay the spool oldest first in chunks (the unique keys make a replay
idempotent), set aside rows the database can never accept, and move what a dead writer journaled
into the spool; and what every batch settles (the journal truncated once all is settled, the
database marked up or down with its backoff). A mixin over the writer's own state (see
``writer.AuditWriter``).
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass
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


class SpoolRecovery:
    """Mixin: the writer thread's recovery steps (state and the other steps are ``AuditWriter``'s)."""

    url: str
    _engine: Any
    _spool: Spool
    _journal: Spool | None
    _lock: threading.Lock
    _schema_ready: bool
    _replayed: int
    _duplicates: int
    _rejected: int
    _progress: threading.Condition
    _clock: Clock
    _db_up: bool
    _last_error: str | None
    _next_retry: float
    _backoff: float
    _backoff_min: float
    _backoff_max: float
    _settled: int
    _accepted: int
    _errors: RepeatedLog
    _store_file: StoreFile

    def _write(self, batch: Batch, *, may_conflict: bool) -> tuple[Batch, int | None]:
        raise NotImplementedError

    def _mark_settled(self, n: int) -> None:
        with self._progress:
            self._settled += n
            if self._settled >= self._accepted and self._journal is not None and self._journal:
                try:
                    self._journal.clear()  # everything in it is in the database or the spool
                except OSError as e:
                    what = "audit journal %s cannot be truncated: %s"
                    self._errors.log("journal", logging.ERROR, what, self._journal.path, e)
            self._progress.notify_all()

    def _mark_down(self, error: str | None) -> None:
        """The database is unavailable: the next retry after a doubled backoff."""
        with self._lock:
            self._db_up = False
            if error is not None:
                self._last_error = error
        self._next_retry = self._clock.monotonic() + self._backoff
        self._backoff = min(self._backoff * 2, self._backoff_max)

    def _mark_up(self) -> None:
        with self._progress:
            self._db_up = True
            self._progress.notify_all()
        self._backoff = self._backoff_min
        self._next_retry = 0.0

    def _database_failed(self, error: BaseException) -> None:
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
        self._mark_down(text)

    def _split(self, batch: Batch) -> tuple[Batch, list[tuple[str, Row, str]]]:
        """The rows the database can take, and the others (set aside in ``rejected.jsonl``)."""
        good, bad = split_valid(batch)
        if bad:
            self._reject([{"table": t, "row": list(r), "reason": why} for t, r, why in bad], len(bad))
        return good, bad

    def _recover(self) -> None:
        """Create or upgrade the schema if needed, then replay the spool; back off on failure."""
        if not self._schema_ready:
            try:
                upgrade_database(self._engine)
            except Exception as e:
                self._database_failed(e)
                return
            self._store_file.remember()  # the file the engine's connections now have open
            self._schema_ready = True
        if not self._spool:
            self._errors.resolved("database", "audit database %s is back", self.url)
            self._mark_up()
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
        with self._lock:
            self._replayed += replayed
        if not self._errors.resolved(
            "database", "audit database %s is back: replayed %d spooled rows", self.url, replayed
        ):
            log.info("audit database %s: replayed %d spooled rows", self.url, replayed)
        self._mark_up()

    def _replay_chunk(self, chunk: Batch) -> bool:
        loaded, inserted = self._write(chunk, may_conflict=True)
        if inserted is None:
            return False
        with self._lock:
            self._duplicates += batch_size(loaded) - inserted
        return True

    def _reject(self, entries: list[dict[str, Any]], n: int) -> None:
        path = self._spool.directory / REJECTED_FILE
        for entry in entries:
            log.error("audit: rejecting a record: %s", entry["reason"])
        try:
            with open(path, "ab") as f:
                f.writelines(orjson.dumps(e, default=repr) + b"\n" for e in entries)
                f.flush()
        except OSError as e:
            self._errors.log("rejected", logging.ERROR, "audit: cannot write %s: %s", path, e)
        with self._lock:
            self._rejected += n

    def _recover_journal(self) -> int:
        """Move what a dead writer journaled but never settled into the spool (replayed with the
        unique keys, so rows it did commit are not doubled); the number of rows moved."""
        journal = self._journal
        if journal is None or not journal:
            return 0
        moved = 0
        for batch in journal.read():
            self._spool.append(batch)
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
