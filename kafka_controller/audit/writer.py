"""``AuditWriter``: the ``AuditSink`` that never blocks the controller and never loses a row.

``record`` converts the caller's records to rows, appends them to the *journal* (one ``write(2)``,
no fsync) and to an in-memory queue, and returns: about 1.5 µs a record on the caller's thread, no
waiting on the database or the disk; bulk records are journaled and queued as columns, in slices
the writer thread converts one at a time (``bulk``). The journal is what makes a ``kill -9`` lose
nothing: the controller records a transition after writing it to ZooKeeper, and the rows of a
process killed before its writer thread ran are in the kernel's page cache, replayed by the next
writer on the directory (journal frames move to the spool at start-up). It is truncated whenever everything
accepted is settled. ``journal=False`` drops it (a crash then loses what was still queued).
``hold`` keeps what is recorded next from the database (journaled all the same) until ``release``:
the controller holds an event's rows so that writing them takes no CPU from the event.

One background thread drains the queue in batches of up to ``batch_size`` records, at least every
``flush_interval`` seconds, and settles each batch in one of three places, in order of preference:

1. the database, in one transaction (``backends``), when it is reachable and the spool is empty;
2. the local spool (``spool``), fsync'd, when the database is not (or while older rows still wait
   there, so rows reach the database in the order they were recorded);
3. ``rejected.jsonl`` in the spool directory, for the rare row the database can never accept (a
   malformed record), so one bad record cannot block the rest. Counted as ``rejected``.

While the spool holds rows, the thread retries with exponential backoff: it (re)creates or upgrades
the schema, replays the spool oldest first in chunks, and clears it only when every row is
committed. Replays rely on the unique keys (``ON CONFLICT DO NOTHING``), so a crash or an outage in
the middle of a replay, or a commit whose acknowledgement was lost, never doubles a row. A spool
left by a crashed process is replayed at start-up.

The store never loses rows silently:

* A SQLite file deleted or renamed over while open is noticed (``store_file``: before and after
  every commit, and every idle cycle): the writer warns once, closes the old file, spools, creates
  or upgrades the schema at the path and replays, so every row committed after the change reaches
  the file readers open; a ``controller_events`` row (``gaps.STORE_REPLACED``) tells the report.
* A read-only database spools with a warning that says so, and is drained once writable.
* A spool whose disk is full holds batches in memory and never delays the database's retry: a
  database that comes back is drained while the disk is still full.
* Errors that repeat every cycle are logged once per ``error_log_interval`` with a count of the
  repeats (``repeat_log``), and once more when they clear.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kafka_controller.audit.backends import loader_for
from kafka_controller.audit.bulk import Unit, convert_units, queue_units
from kafka_controller.audit.engine import create_audit_engine, parse_url, redacted, sqlite_path
from kafka_controller.audit.gaps import STORE_REPLACED
from kafka_controller.audit.repeat_log import DEFAULT_INTERVAL_S, RepeatedLog
from kafka_controller.audit.rows import CONTROLLER_EVENTS, Batch, Converted, batch_size, event_row
from kafka_controller.audit.spool import JOURNAL_FILE, Spool
from kafka_controller.audit.store_file import FileChange, StoreFile
from kafka_controller.audit.writer_recovery import AuditWriterStats, RejectedRows, SpoolRecovery, move_journal
from kafka_controller.domain.audit_records import AuditItem, ControllerEventRecord
from kafka_controller.domain.errors import InvalidArgumentError
from kafka_controller.heap import release_free_heap
from kafka_controller.ports import BulkAuditSink, Clock, SystemClock

__all__ = ["AuditWriter"]

log = logging.getLogger(__name__)

TRIM_AFTER_ROWS = 100_000  #: queue empty after this many rows: free C heap back to the OS (``heap``)


class AuditWriter(BulkAuditSink):
    """Batched, durable audit writer for a SQLAlchemy URL (``sqlite:///file`` or ``postgresql+psycopg://``).

    ``sqlite_synchronous="FULL"`` (the default) makes a flushed row survive power loss, as the
    fsync'd spool does; ``"NORMAL"`` is faster (see ``bench/audit.py``) but only survives a crash
    of the process. Raises ``InvalidArgumentError`` for a bad URL, option or spool directory;
    after that it never raises and never blocks the caller.

    The writer thread's way back from an outage is a ``SpoolRecovery`` and the rows it sets aside
    a ``RejectedRows`` (``writer_recovery``), both built here from what they use.
    """

    def __init__(
        self,
        url: str,
        *,
        spool_dir: str | Path,
        batch_size: int = 5_000,  # rows a transaction, held while written: a failover's peak memory
        flush_interval: float = 0.2,
        clock: Clock | None = None,
        retry_backoff: tuple[float, float] = (0.25, 5.0),
        sqlite_synchronous: str = "FULL",
        engine_options: dict[str, Any] | None = None,
        journal: bool = True,
        cluster_id: str | None = None,
        error_log_interval: float = DEFAULT_INTERVAL_S,
    ) -> None:
        if batch_size < 1:
            raise InvalidArgumentError(f"bad batch_size {batch_size}: must be at least 1")
        if flush_interval <= 0:
            raise InvalidArgumentError(f"bad flush_interval {flush_interval}: must be positive")
        if not 0 < retry_backoff[0] <= retry_backoff[1]:
            raise InvalidArgumentError(f"bad retry_backoff {retry_backoff}: need 0 < first <= max")
        if error_log_interval <= 0:
            raise InvalidArgumentError(f"bad error_log_interval {error_log_interval}: must be positive")
        self._engine = create_audit_engine(
            url, sqlite_synchronous=sqlite_synchronous, sqlite_autocheckpoint=False, **(engine_options or {})
        )
        self.url = redacted(url)
        self._store_file = StoreFile(sqlite_path(parse_url(url)))
        try:
            self._spool = Spool(spool_dir)
        except BaseException:
            self._engine.dispose()
            raise
        try:
            self._journal = Spool(spool_dir, name=JOURNAL_FILE, durable=False) if journal else None
            recovered = move_journal(self._journal, self._spool)
        except BaseException:
            self._spool.close()
            self._engine.dispose()
            raise
        self._loader = loader_for(self._engine, cluster_id)  # stamps every row with the cluster
        self._clock = clock or SystemClock()
        self._errors = RepeatedLog(log, self._clock, error_log_interval)
        self._batch_size = batch_size
        self._flush_interval = flush_interval

        self._lock = threading.Lock()
        self._progress = threading.Condition(self._lock)
        self._rejects = RejectedRows(self._spool.directory, self._errors, self._lock)
        self._recovery = SpoolRecovery(
            self.url,
            engine=self._engine,
            spool=self._spool,
            store_file=self._store_file,
            write=self._write,
            errors=self._errors,
            clock=self._clock,
            progress=self._progress,
            retry_backoff=retry_backoff,
        )
        self._wake = threading.Event()
        self._queue: deque[tuple[Unit, int]] = deque()
        # (records accepted up to and including a record() call, its first record's timestamp):
        # the oldest entry not yet settled dates the writer's lag (``lag_ms``).
        self._stamps: deque[tuple[int, int]] = deque()
        self._held: deque[tuple[Batch, int]] = deque()  # converted but not yet settled (spool failed)
        self._pending = self._accepted = self._settled = 0
        self._hold_from: int | None = None  # while held, rows accepted up to here may go (``hold``)
        self._written = self._duplicates = 0
        self._spooled = recovered
        self._dropped = 0
        self._untrimmed = 0  # rows written since the C heap was last trimmed
        self._closing = False
        self._abandoned = False

        self._thread = threading.Thread(target=self._run, name="audit-writer", daemon=True)
        self._thread.start()

    # -- the caller's side ---------------------------------------------------------------------

    def record(self, records: Sequence[AuditItem]) -> None:
        """``BulkAuditSink.record``: enqueue and return; never blocks on I/O, never raises."""
        try:
            n = len(records)
        except TypeError:
            try:
                records = list(records)
            except TypeError:
                log.error(
                    "audit writer: record() needs a sequence of records, got %s", type(records).__name__
                )
                with self._lock:
                    self._dropped += 1
                return
            n = len(records)
        if n == 0:
            return
        units, parts, n = queue_units(records, self._batch_size)  # single records converted
        plain = units[0][0] if not parts and isinstance(units[0][0], Converted) else None
        with self._lock:
            if self._closing:
                self._dropped += n
                log.error("audit writer is closed: dropping %d records", n)
                return
            if self._journal is not None and (parts or (plain is not None and plain.batch)):
                try:
                    if plain is not None:
                        self._journal.append(plain.batch)
                    else:
                        self._journal.append_parts(parts, n)
                except (OSError, TypeError, ValueError) as e:  # the queue still has them
                    log.error("audit journal %s failed, going on without it: %s", self._journal.path, e)
                    self._journal.close()
                    self._journal = None
            self._queue.extend(units)
            self._pending += n
            self._accepted += n
            self._stamps.append((self._accepted, _stamp(records[0]) or self._clock.time_ms()))
            if self._pending >= self._batch_size:
                self._wake.set()

    def hold(self) -> None:
        """Keep records accepted from now on out of the database and spool until ``release`` (or a
        ``flush``, ``wait_replayed`` or ``close``, which release): the journal has them at once, so
        a ``kill -9`` loses none. Those accepted before go on being written."""
        with self._lock:
            if self._hold_from is None:
                self._hold_from = self._accepted

    def release(self) -> None:
        """End ``hold``: the thread writes what it held back."""
        with self._lock:
            self._hold_from = None
        self._wake.set()

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every record accepted so far is durable (in the database or the spool).

        Returns ``False`` if ``timeout`` seconds passed first (e.g. the database is down *and* the
        spool cannot be written).
        """
        with self._progress:
            target = self._accepted
            self._hold_from = None
            self._wake.set()
            return self._progress.wait_for(lambda: self._settled >= target, timeout)

    def wait_replayed(self, timeout: float | None = None) -> bool:
        """Wait until everything accepted so far is in the database itself (the spool is empty)."""
        with self._progress:
            target = self._accepted
            self._hold_from = None
            self._wake.set()
            return self._progress.wait_for(
                lambda: self._settled >= target and not self._spool and not self._held, timeout
            )

    def close(self, timeout: float = 30.0) -> AuditWriterStats:
        """Settle what was accepted, try a last replay, stop the thread; return the final counters."""
        with self._lock:
            self._closing = True
            self._hold_from = None
        self._wake.set()
        self._thread.join(timeout)
        with self._lock:
            if self._thread.is_alive():
                self._abandoned = True
                log.error(
                    "audit writer did not stop within %.1fs; %d records not durable", timeout, self._pending
                )
            else:
                lost = self._pending + sum(n for _, n in self._held)
                self._dropped += lost
                if lost:
                    log.error("audit writer closed with %d records neither in the database nor spooled", lost)
                self._spool.close()
                if self._journal is not None:
                    self._journal.close()
                self._engine.dispose()
        return self.stats()

    def __enter__(self) -> AuditWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def lag_ms(self) -> int:
        """How far the store is behind: the age of the oldest record accepted but not yet settled
        (in the database or the spool), from when the controller recorded it; 0 when none is."""
        with self._lock:
            while self._stamps and self._stamps[0][0] <= self._settled:
                self._stamps.popleft()
            return max(0, self._clock.time_ms() - self._stamps[0][1]) if self._stamps else 0

    def stats(self) -> AuditWriterStats:
        lag = self.lag_ms()
        recovery = self._recovery
        with self._lock:
            return AuditWriterStats(
                accepted=self._accepted,
                written=self._written,
                spooled=self._spooled,
                replayed=recovery.replayed,
                duplicates=self._duplicates + recovery.duplicates,
                rejected=self._rejects.count,
                dropped=self._dropped,
                pending=self._accepted - self._settled,
                spool_rows=self._spool.rows,
                spool_bytes=self._spool.size,
                database_available=recovery.db_up and recovery.schema_ready,
                last_error=recovery.last_error,
                lag_ms=lag,
            )

    # -- the writer thread ---------------------------------------------------------------------

    def _run(self) -> None:
        recovery = self._recovery
        while True:
            try:
                if self._cycle():
                    return
            except Exception:  # a bug must not kill the thread: log, back off, go on
                self._errors.log("cycle", logging.ERROR, "audit writer cycle failed", exc_info=True)
                recovery.mark_down("internal error (see log)")
            with self._lock:
                idle = not self._queue
            self._loader.maintain(idle=idle)
            timeout = self._flush_interval
            if self._spool or self._held or not recovery.schema_ready:
                timeout = min(timeout, max(0.0, recovery.next_retry - self._clock.monotonic()))
            self._wake.wait(timeout)
            self._wake.clear()

    def _cycle(self) -> bool:
        """One pass: retry if due, settle held then queued batches. True when closed and done."""
        if self._abandoned:
            return True
        recovery = self._recovery
        if recovery.schema_ready:
            self._store_moved()  # a deleted or replaced file is noticed even while no row comes
        if recovery.due() and (not recovery.schema_ready or self._spool or not recovery.db_up):
            recovery.recover()
        while self._held:
            batch, n = self._held[0]
            if not self._settle(batch):
                return False
            self._held.popleft()
            self._mark_settled(n)
        if self._errors.active("spool"):  # what it held in memory went to the spool or the database
            self._errors.resolved(
                "spool", "audit spool %s: no batch held in memory any more", self._spool.path
            )
        while True:
            with self._lock:
                closing = self._closing
                chunks = []
                n = 0
                limit = self._hold_from
                while self._queue and n < self._batch_size:
                    if limit is not None and self._accepted - self._pending + n >= limit:
                        break  # held (``hold``): the rows taken off the queue so far reach it
                    chunk, size = self._queue.popleft()
                    chunks.append(chunk)
                    n += size
                self._pending -= n
            if not chunks:
                if self._untrimmed >= TRIM_AFTER_ROWS:
                    self._untrimmed = 0
                    release_free_heap()
                if closing and self._spool and recovery.due():
                    recovery.recover()
                return closing
            self._untrimmed += n
            converted = convert_units(chunks)
            if converted.rejected:
                self._rejects.reject(
                    [{"record": repr(r), "reason": why} for r, why in converted.rejected],
                    len(converted.rejected),
                )
            if converted.batch and not self._settle(converted.batch):
                self._held.append((converted.batch, converted.rows))
                self._mark_settled(n - converted.rows)
                return False
            self._mark_settled(n)

    def _mark_settled(self, n: int) -> None:
        """``n`` more records are in the database, the spool or ``rejected.jsonl``: wake whoever
        waits, and truncate the journal once everything accepted is settled."""
        with self._progress:
            self._settled += n
            if self._settled >= self._accepted and self._journal is not None and self._journal:
                try:
                    self._journal.clear()  # everything in it is in the database or the spool
                except OSError as e:
                    what = "audit journal %s cannot be truncated: %s"
                    self._errors.log("journal", logging.ERROR, what, self._journal.path, e)
            self._progress.notify_all()

    def _settle(self, batch: Batch) -> bool:
        """Put one batch in the database or the spool; False if neither took it (retry later)."""
        recovery = self._recovery
        if recovery.schema_ready and not self._spool and recovery.db_up:
            batch, inserted = self._write(batch, may_conflict=False)
            if inserted is not None:
                with self._lock:
                    self._written += inserted
                    self._duplicates += batch_size(batch) - inserted
                return True
            if not batch:
                return True
        try:
            self._spool.append(batch)
        except (OSError, TypeError, ValueError) as e:
            recovery.note_error(f"spool: {e}")
            if isinstance(e, OSError):
                # Held in memory and retried each cycle. The database's own retry is not pushed
                # back: a database that comes back is drained whatever the spool's disk does.
                self._errors.log(
                    "spool",
                    logging.ERROR,
                    "audit spool %s cannot take a batch, holding %d records in memory: %s",
                    self._spool.path,
                    self._accepted - self._settled,
                    e,
                )
                return False
            log.error("audit spool %s cannot take a batch: %s", self._spool.path, e)
            good, bad = self._rejects.split(batch)  # unencodable values: set them aside, spool the rest
            if not bad:  # nothing to blame on a single row: keep the whole batch aside, never lose it
                self._rejects.reject([{"batch": batch, "reason": f"cannot spool: {e}"}], batch_size(batch))
                return True
            return self._settle(good) if good else True
        with self._lock:
            self._spooled += batch_size(batch)
        return True

    def _write(self, batch: Batch, *, may_conflict: bool) -> tuple[Batch, int | None]:
        """Commit ``batch``; return the rows it tried (minus any the database can never take, which
        are rejected) and how many were new, or ``None`` for that count if the database is unavailable.

        A SQLite file deleted or replaced at its path counts as unavailable, checked before the
        commit and after it: rows committed into a file no longer at its path are spooled and
        replayed into the new one (``_store_moved``)."""
        if self._store_moved():
            return batch, None
        try:
            inserted = self._loader.write(batch, may_conflict=may_conflict)
        except Exception as e:
            error = e
        else:
            return (batch, None) if self._store_moved() else (batch, inserted)
        good, bad = self._rejects.split(batch)
        if bad:
            if not good:
                return good, 0
            try:
                inserted = self._loader.write(good, may_conflict=may_conflict)
            except Exception as e:
                error = e
            else:
                return (good, None) if self._store_moved() else (good, inserted)
        self._recovery.database_failed(error)
        return good, None

    def _store_moved(self) -> bool:
        """True (having warned once, closed the old file and scheduled its recreation at once) when
        the SQLite file the writer has open is no longer the one at its path."""
        change = self._store_file.change()
        if change is None:
            return False
        path = self._store_file.path
        what = "deleted" if change is FileChange.DELETED else "replaced by another file (kept and used)"
        kept = "the rows committed to the old file before then went with it"
        log.warning(
            "audit database %s was %s while the writer had it open; %s; spooling to %s, "
            "then creating or upgrading the schema at %s and replaying every row recorded since",
            path,
            what,
            kept,
            self._spool.path,
            path,
        )
        self._engine.dispose()  # closes the old file
        for stale in self._store_file.discard_stale():
            log.warning("audit database %s: removed %s, left behind by the old file", path, stale)
        self._store_file.forget()
        # A row that says so in the new file: the report names it (``gaps``) even before any
        # transition follows, where it would otherwise find a store that looks merely new.
        marker = ControllerEventRecord(
            STORE_REPLACED, -1, 0, self._clock.time_ms(), 0.0, f"{path} {what}; {kept}"
        )
        self._held.append(({CONTROLLER_EVENTS: [event_row(marker)]}, 0))
        self._recovery.recreate_now(f"audit database {path} {change.value} while open")
        return True


def _stamp(record: AuditItem) -> int:
    """When the controller recorded ``record`` (a transition's stamp, an event's start), or 0."""
    return int(getattr(record, "timestamp_ms", 0) or getattr(record, "started_ms", 0) or 0)
