"""Unlucky audit stores: a SQLite file deleted or renamed over under running writers, a read-only
database, a full spool disk, PostgreSQL stopped and started under load. Whatever happens, every
transition recorded after the fault reaches the database readers open, exactly once (checked
through the controllers' sequence numbers), and the log says what happened without flooding.

The mount-based tests (a 1 MiB tmpfs, a read-only bind mount) need root, as the netns tests do.
"""

from __future__ import annotations

import logging
import os
import signal
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path

import pytest
from sqlalchemy import text

from kafka_controller.audit.engine import create_audit_engine
from kafka_controller.audit.gaps import STORE_REPLACED, Gap, sequence_gaps
from kafka_controller.audit.migrate import upgrade_database
from kafka_controller.audit.reports import build_report, render_text
from kafka_controller.audit.writer import AuditWriter
from kafka_controller.controller.auditing import ControllerAuditSink
from kafka_controller.domain.values import ReplicaAssignment
from kafka_controller.ports import SystemClock
from kafka_controller.testing.postgres import PrivatePostgres, find_pg_bin, temporary_database
from tests.audit.factories import partition_transition, replica_transition
from tests.audit.pg_required import no_postgres
from tests.broker.helpers import wait_until

WAIT = 60.0
LOGGER = "kafka_controller.audit.writer"
REPO = Path(__file__).resolve().parents[2]


# -- helpers --------------------------------------------------------------------------------------


def need_root() -> None:
    if os.geteuid() != 0:
        pytest.fail("this test mounts a tmpfs or a read-only bind mount: run it as root", pytrace=False)


def mount(*args: str) -> None:
    done = subprocess.run(["mount", *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.fail(f"mount {' '.join(args)} failed: {done.stderr.strip()}", pytrace=False)


def umount(directory: Path) -> None:
    # lazy: a writer that failed to stop may still hold files there
    subprocess.run(["umount", "--lazy", str(directory)], capture_output=True, check=False)


@contextmanager
def small_tmpfs(directory: Path, size: str = "1m") -> Iterator[Path]:
    need_root()
    directory.mkdir(parents=True, exist_ok=True)
    mount("-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(directory))
    try:
        yield directory
    finally:
        umount(directory)


class ReadOnly:
    """A read-only bind mount of ``directory`` over itself: what a disk remounted read-only looks
    like to a process that opens files in it (even root's writes fail with EROFS)."""

    def __init__(self, directory: Path) -> None:
        need_root()
        self.directory = directory
        self.mounted = False

    def on(self) -> None:
        mount("--bind", str(self.directory), str(self.directory))
        self.mounted = True
        mount("-o", "remount,ro,bind", str(self.directory))

    def off(self) -> None:
        if self.mounted:
            umount(self.directory)
            self.mounted = False


def stamped_writer(writer: AuditWriter, controller_id: int = 1, epoch: int = 3) -> ControllerAuditSink:
    """The controller's own stamping in front of ``writer``: one sequence from 1, as in a broker."""
    return ControllerAuditSink(writer, controller_id, SystemClock(), lambda: epoch)


def transitions(n: int, start: int = 0) -> list[object]:
    return [
        partition_transition(i, sequence=-1) if i % 3 else replica_transition(i, sequence=-1)
        for i in range(start, start + n)
    ]


def sequences(url: str) -> list[int]:
    """Every sequence number stored for controller 1 (transitions), in order, duplicates kept."""
    engine = create_audit_engine(url)
    try:
        with engine.connect() as conn:
            return sorted(
                int(s)
                for (s,) in conn.execute(
                    text(
                        "SELECT sequence FROM partition_transitions WHERE controller_id = 1 "
                        "UNION ALL SELECT sequence FROM replica_transitions WHERE controller_id = 1"
                    )
                )
            )
    finally:
        engine.dispose()


def gaps(url: str) -> list[Gap]:
    engine = create_audit_engine(url)
    try:
        with engine.connect() as conn:
            return sequence_gaps(conn)
    finally:
        engine.dispose()


def writer_lines(caplog: pytest.LogCaptureFixture, needle: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER and needle in r.getMessage()]


# -- SQLite file deleted or replaced --------------------------------------------------------------


class BrokerProcesses:
    """Broker processes auditing to one SQLite file, with their logs kept for failure reports."""

    SETTINGS = (
        "auto.leader.rebalance.enable=false",
        "sim.fetch.interval.ms=100",
        "zookeeper.session.timeout.ms=6000",
    )

    def __init__(self, connect: str, workdir: Path, audit_url: str) -> None:
        self.connect, self.workdir, self.audit_url = connect, workdir, audit_url
        self.procs: dict[int, subprocess.Popen[bytes]] = {}

    def start(self, broker_id: int) -> None:
        args = [sys.executable, "-m", "kafka_controller.cli.main", "broker", "--broker-id", str(broker_id)]
        args += ["--zookeeper", self.connect, "--audit-url", self.audit_url]
        args += ["--audit-spool-dir", str(self.workdir / f"spool-{broker_id}")]
        for setting in self.SETTINGS:
            args += ["--config", setting]
        with open(self.workdir / f"broker-{broker_id}.log", "wb") as log:
            self.procs[broker_id] = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)

    def logs(self) -> str:
        return "\n".join(p.read_text(errors="replace") for p in sorted(self.workdir.glob("broker-*.log")))

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def online_rows(db: Path, topic: str) -> int:
    try:
        with closing(sqlite3.connect(f"file:{db}?mode=rw", uri=True)) as conn:  # never creates it
            return int(
                conn.execute(
                    "SELECT count(*) FROM partition_transitions "
                    "WHERE topic = ? AND to_state = 'OnlinePartition'",
                    (topic,),
                ).fetchone()[0]
            )
    except sqlite3.Error:  # not there, or no schema yet
        return 0


@pytest.mark.integration
@pytest.mark.zk
def test_deleting_the_sqlite_file_under_running_brokers_keeps_every_later_transition(
    zk_connect: str, tmp_path: Path
) -> None:
    from kafka_controller.zk.kazoo_backend import KazooMetadataStore

    db = tmp_path / "audit.db"
    url = f"sqlite:///{db}"
    brokers = BrokerProcesses(zk_connect, tmp_path, url)
    store = KazooMetadataStore(zk_connect)
    try:
        for b in (1, 2, 3):
            brokers.start(b)
        wait_until(lambda: store.get_sorted_broker_list() == [1, 2, 3], "brokers 1-3 registered", WAIT)
        wait_until(lambda: store.get_controller_id() is not None, "a controller", WAIT)
        assignment = {p: ReplicaAssignment.of([(p + i) % 3 + 1 for i in range(3)]) for p in range(4)}
        store.create_topic("before", assignment)
        wait_until(lambda: online_rows(db, "before") == 4, "the first topic's rows in the audit file", WAIT)

        for f in tmp_path.glob("audit.db*"):  # rm audit.db*: the file, its WAL and its index
            f.unlink()
        store.create_topic("after", assignment)
        wait_until(lambda: online_rows(db, "after") == 4, "the second topic's rows in a new audit file", WAIT)

        report = subprocess.run(
            [sys.executable, "-m", "kafka_controller.cli.main", "audit", "report", "--url", url],
            capture_output=True, text=True, timeout=WAIT, cwd=REPO, check=False,
        )  # fmt: skip
        assert report.returncode == 0, report.stderr
        assert "Nothing recorded yet" not in report.stdout
        assert "time(s) a writer found the audit database file deleted or replaced" in report.stdout
        assert "rows missing before sequence" in report.stdout
        assert online_rows(db, "before") == 0  # committed before the deletion: gone with the old file
        # Everything the controller recorded since is there: its numbers run on without a hole.
        found = gaps(url)
        assert [g.kind for g in found] == ["before"], found
        assert "was deleted while the writer had it open" in brokers.logs()
    except BaseException:
        print(brokers.logs()[-20_000:])
        raise
    finally:
        brokers.stop()
        store.close()


def test_a_file_renamed_over_the_database_gets_every_row_recorded_after(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger=LOGGER)
    db, other = tmp_path / "audit.db", tmp_path / "other.db"
    url = f"sqlite:///{db}"
    upgrade_database(f"sqlite:///{other}")
    with closing(sqlite3.connect(other)) as conn:  # a row the replacing file brings along
        conn.execute(
            "INSERT INTO controller_events (kind, broker_id, controller_epoch, started_ms, duration_ms) "
            "VALUES ('elected', 9, 1, 1, 0.0)"
        )
        conn.commit()
    writer = AuditWriter(url, spool_dir=tmp_path / "spool", flush_interval=0.05)
    sink = stamped_writer(writer)
    try:
        sink.record(transitions(300))  # type: ignore[arg-type]
        assert writer.wait_replayed(WAIT)
        os.rename(other, db)  # mv other.db audit.db while the writer has audit.db open
        sink.record(transitions(200, start=300))  # type: ignore[arg-type]
        assert writer.wait_replayed(WAIT)
        wait_until(lambda: len(sequences(url)) == 200, "the rows recorded after, in the new file", WAIT)
    finally:
        writer.close()
    assert sequences(url) == list(range(301, 501))  # each once, none before the replacement
    assert gaps(url) == [Gap(None, 1, 3, "before", 300, None, 301)]
    with closing(sqlite3.connect(db)) as conn:
        assert conn.execute("SELECT count(*) FROM controller_events WHERE broker_id = 9").fetchone() == (1,)
        assert conn.execute(
            "SELECT count(*) FROM controller_events WHERE kind = ?", (STORE_REPLACED,)
        ).fetchone() == (1,)
    assert len(writer_lines(caplog, "was replaced by another file")) == 1
    assert "at least 300 rows missing before sequence 301" in render_text(build_report(url))


@pytest.mark.parametrize("delete", ["the file", "the file, its WAL and its index"])
def test_rows_recorded_after_the_file_is_deleted_reach_a_new_file_whole(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, delete: str
) -> None:
    caplog.set_level(logging.WARNING, logger=LOGGER)
    db = tmp_path / "audit.db"
    url = f"sqlite:///{db}"
    writer = AuditWriter(url, spool_dir=tmp_path / "spool", flush_interval=0.05)
    sink = stamped_writer(writer)
    try:
        sink.record(transitions(300))  # type: ignore[arg-type]
        assert writer.wait_replayed(WAIT)
        for f in [db] if delete == "the file" else list(tmp_path.glob("audit.db*")):
            f.unlink()
        for k in range(4):
            sink.record(transitions(50, start=300 + k * 50))  # type: ignore[arg-type]
        assert writer.wait_replayed(WAIT)
        wait_until(lambda: db.exists() and len(sequences(url)) == 200, "the later rows in a new file", WAIT)
    finally:
        writer.close()
    assert sequences(url) == list(range(301, 501))
    with closing(sqlite3.connect(db)) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    assert len(writer_lines(caplog, "was deleted while the writer had it open")) == 1
    assert "at least 300 rows missing before sequence 301" in render_text(build_report(url))


def test_a_batch_committed_while_the_file_was_being_deleted_is_written_again(tmp_path: Path) -> None:
    """The file goes between the check before a commit and the commit itself: the batch lands in
    the deleted file, and the check after the commit sends it to the new one."""
    db = tmp_path / "audit.db"
    url = f"sqlite:///{db}"
    writer = AuditWriter(url, spool_dir=tmp_path / "spool", flush_interval=0.05)
    sink = stamped_writer(writer)
    try:
        sink.record(transitions(10))  # type: ignore[arg-type]
        assert writer.wait_replayed(WAIT)
        loader = writer._loader
        write = loader.write
        deleted: list[bool] = []

        def delete_then_write(batch: object, *, may_conflict: bool = False) -> int:
            if not deleted:
                db.unlink()
                deleted.append(True)
            return write(batch, may_conflict=may_conflict)  # type: ignore[arg-type]

        loader.write = delete_then_write  # type: ignore[method-assign]
        sink.record(transitions(10, start=10))  # type: ignore[arg-type]
        assert writer.wait_replayed(WAIT)
        wait_until(lambda: db.exists() and len(sequences(url)) == 10, "the batch in the new file", WAIT)
    finally:
        writer.close()
    assert deleted and sequences(url) == list(range(11, 21))


# -- read-only database, full spool disk -----------------------------------------------------------


def test_a_read_only_database_spools_with_a_warning_and_is_drained_once_writable(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    data = tmp_path / "data"
    data.mkdir()
    url = f"sqlite:///{data / 'audit.db'}"
    upgrade_database(url)
    read_only = ReadOnly(data)
    read_only.on()
    writer: AuditWriter | None = None
    try:
        writer = AuditWriter(
            url, spool_dir=tmp_path / "spool", flush_interval=0.02, retry_backoff=(0.05, 0.2)
        )
        sink = stamped_writer(writer)
        for k in range(20):
            sink.record(transitions(50, start=k * 50))  # type: ignore[arg-type]
        assert writer.flush(WAIT)
        assert writer.stats().spool_rows == 1_000
        wait_until(lambda: writer is not None and writer.stats().last_error is not None, "an error", WAIT)
        warned = writer_lines(caplog, "is read-only, spooling to")
        assert len(warned) == 1, writer_lines(caplog, "audit database")
        read_only.off()
        assert writer.wait_replayed(WAIT)
    finally:
        read_only.off()
        if writer is not None:
            writer.close()
    assert sequences(url) == list(range(1, 1_001))
    assert writer_lines(caplog, "is back: replayed 1000 spooled rows")


@pytest.mark.postgres
def test_a_full_spool_disk_does_not_hold_back_the_drain_nor_flood_the_log(
    private_pg: PrivatePostgres, private_db: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """PostgreSQL is down and the spool's disk is full from the start, so every batch is held in
    memory; PostgreSQL comes back while the disk is still full and everything is drained."""
    caplog.set_level(logging.INFO, logger=LOGGER)
    with small_tmpfs(tmp_path / "spool") as spool:
        filler = spool / "filler"
        with pytest.raises(OSError), open(filler, "wb") as f:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        private_pg.stop("immediate")
        writer = AuditWriter(private_db, spool_dir=spool, flush_interval=0.02, retry_backoff=(0.05, 0.5))
        sink = stamped_writer(writer)
        try:
            for k in range(40):
                sink.record(transitions(50, start=k * 50))  # type: ignore[arg-type]
            wait_until(
                lambda: (writer.stats().last_error or "").startswith("spool:"), "the spool refusing", WAIT
            )
            wait_until(lambda: writer.stats().pending == 2_000, "every record waiting", WAIT)
            assert writer.stats().spool_rows == 0
            private_pg.start()
            assert writer.wait_replayed(WAIT)
            with pytest.raises(OSError), open(spool / "proof", "wb") as f:
                f.write(b"\0" * 65536)  # the disk is still full: the drain did not need it
                f.flush()
                os.fsync(f.fileno())
        finally:
            writer.close()
    assert sequences(private_db) == list(range(1, 2_001))
    # Retried every 20 ms for seconds, logged once (the interval is 30 s), plus once when it cleared.
    assert len(writer_lines(caplog, "cannot take a batch")) == 1
    assert len(writer_lines(caplog, "no batch held in memory any more")) == 1


# -- PostgreSQL stopped and started under load -----------------------------------------------------


@pytest.fixture(scope="module")
def private_pg() -> Iterator[PrivatePostgres]:
    if find_pg_bin() is None:
        no_postgres("PostgreSQL server binaries (initdb, pg_ctl) are not installed")
    with PrivatePostgres() as pg:
        yield pg


@pytest.fixture
def private_db(private_pg: PrivatePostgres) -> Iterator[str]:
    if not private_pg.running():
        private_pg.start()
    with temporary_database(private_pg.url, prefix="hostile") as url:
        upgrade_database(url)
        yield url
        if not private_pg.running():
            private_pg.start()


@pytest.mark.postgres
@pytest.mark.parametrize("mode", ["fast", "immediate"])
def test_postgres_stopped_and_started_under_load_loses_and_doubles_nothing(
    private_pg: PrivatePostgres, private_db: str, tmp_path: Path, mode: str
) -> None:
    """Four threads record through the controller's stamping while the server is stopped twice
    (``fast``: a clean shutdown; ``immediate``: a crash) and started again: afterwards every
    sequence number from 1 to the last is stored exactly once."""
    writer = AuditWriter(
        private_db,
        spool_dir=tmp_path / "spool",
        batch_size=500,
        flush_interval=0.02,
        retry_backoff=(0.1, 0.5),
    )
    sink = stamped_writer(writer)
    stop = threading.Event()
    recorded = [0]
    lock = threading.Lock()

    def produce() -> None:
        while not stop.is_set():
            sink.record(transitions(25))  # type: ignore[arg-type]
            with lock:
                recorded[0] += 25
            # flow control, not timing: the run goes on through both outages
            wait_until(lambda: writer.stats().pending < 5_000, "the writer to keep up", WAIT)

    def reached(n: int) -> Callable[[], bool]:
        return lambda: recorded[0] >= n

    producers = [threading.Thread(target=produce) for _ in range(4)]
    try:
        for t in producers:
            t.start()
        for outage in range(2):
            wait_until(reached((outage + 1) * 4_000), f"load before outage {outage + 1}", WAIT)
            private_pg.stop(mode)
            wait_until(lambda: writer.stats().spool_rows > 1_000, "rows spooled meanwhile", WAIT)
            private_pg.start()
            wait_until(lambda: writer.stats().database_available, "the database back", WAIT)
        wait_until(reached(12_000), "load after the outages", WAIT)
    finally:
        stop.set()
        for t in producers:
            t.join(WAIT)
    try:
        assert writer.wait_replayed(WAIT)
        stats = writer.stats()
    finally:
        writer.close()
    assert sink.last_sequence == recorded[0]
    assert sequences(private_db) == list(range(1, recorded[0] + 1))
    assert gaps(private_db) == []
    assert stats.spooled > 2_000 and stats.replayed == stats.spooled
    assert (stats.dropped, stats.rejected, stats.pending) == (0, 0, 0)
