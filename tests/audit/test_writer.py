"""AuditWriter on both backends: every field round-trips, replays are idempotent, nothing blocks."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from dataclasses import fields
from pathlib import Path
from typing import Any

import orjson
import pytest
from sqlalchemy import Connection, Engine, func, select

from kafka_controller.audit.backends import SqliteLoader
from kafka_controller.audit.engine import create_audit_engine
from kafka_controller.audit.migrate import upgrade_database
from kafka_controller.audit.rows import batch_size, to_batch
from kafka_controller.audit.schema import controller_events, partition_transitions, replica_transitions
from kafka_controller.audit.spool import Spool
from kafka_controller.audit.writer import AuditWriter
from kafka_controller.audit.writer_recovery import REJECTED_FILE
from kafka_controller.domain.audit_records import (
    ControllerEventRecord,
    PartitionTransition,
    ReplicaTransition,
)
from tests.audit.factories import controller_event, partition_transition, replica_transition

WAIT = 60.0


@pytest.fixture
def spool_dir(tmp_path: Path) -> Path:
    return tmp_path / "spool"


@pytest.fixture
def writer(audit_url: str, spool_dir: Path) -> Iterator[AuditWriter]:
    w = AuditWriter(audit_url, spool_dir=spool_dir, batch_size=50, flush_interval=0.05)
    yield w
    w.close()


def count(engine: Engine, table: Any) -> int:
    with engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(table)).scalar_one())


def stored(conn: Connection, table: Any, cls: type) -> list[Any]:
    """Rebuild records from their rows, undoing the storage encodings (ISR JSON, 0/1, NULL sequence)."""
    out = []
    for row in conn.execute(select(table).order_by(table.c.id)).mappings():
        values = {}
        for f in fields(cls):
            v = row[f.name]
            if f.name.startswith("isr_") and v is not None:
                v = tuple(orjson.loads(v))
            elif f.name == "unclean":
                v = bool(v)
            elif f.name == "sequence" and v is None:
                v = -1
            values[f.name] = v
        out.append(cls(**values))
    return out


def test_every_field_round_trips(writer: AuditWriter, audit_url: str, engine_for) -> None:  # type: ignore[no-untyped-def]
    parts = [
        partition_transition(i, outcome=o, error=None if o == "ok" else f"boom {i}", unclean=i % 4 == 0,
                             operation_id="6f1c" if i % 2 else None, isr_after=None if i == 3 else (i % 3,))
        for i, o in enumerate(["ok", "invalid", "failed", "ok", "ok", "failed"])
    ]  # fmt: skip
    reps = [replica_transition(i, leader_before=None, isr_before=None) for i in range(4)]
    events = [
        controller_event(e, kind=k, detail=f"d{e}")
        for e, k in [(5, "elected"), (5, "failover"), (6, "resigned")]
    ]
    writer.record(parts[:3])
    writer.record([*reps, *events, *parts[3:]])
    assert writer.flush(WAIT)

    engine = engine_for(audit_url)
    with engine.connect() as conn:
        got_p = stored(conn, partition_transitions, PartitionTransition)
        got_r = stored(conn, replica_transitions, ReplicaTransition)
        got_e = stored(conn, controller_events, ControllerEventRecord)
    assert got_p == parts
    assert got_r == reps
    assert got_e == events
    stats = writer.stats()
    assert (stats.accepted, stats.written, stats.pending, stats.dropped, stats.rejected) == (13, 13, 0, 0, 0)


def test_recording_the_same_transitions_twice_stores_them_once(
    writer: AuditWriter,
    audit_url: str,
    engine_for,  # type: ignore[no-untyped-def]
) -> None:
    records = [partition_transition(i) for i in range(120)] + [replica_transition(i) for i in range(30)]
    writer.record(records)
    assert writer.flush(WAIT)
    writer.record([partition_transition(i) for i in range(60, 180)])  # 60 old, 60 new
    assert writer.flush(WAIT)
    engine = engine_for(audit_url)
    assert count(engine, partition_transitions) == 180
    assert count(engine, replica_transitions) == 30
    with engine.connect() as conn:
        seqs = conn.execute(
            select(partition_transitions.c.sequence).order_by(partition_transitions.c.id)
        ).scalars()
        assert list(seqs) == list(range(180))  # stored in the order recorded
    assert writer.stats().duplicates == 60


def test_unstamped_records_are_kept_not_deduplicated(
    writer: AuditWriter,
    audit_url: str,
    engine_for,  # type: ignore[no-untyped-def]
) -> None:
    writer.record([partition_transition(1, sequence=-1), partition_transition(2, sequence=-1)])
    assert writer.flush(WAIT)
    assert count(engine_for(audit_url), partition_transitions) == 2


def test_bad_records_are_set_aside_and_the_rest_stored(
    writer: AuditWriter,
    audit_url: str,
    spool_dir: Path,
    engine_for,  # type: ignore[no-untyped-def]
) -> None:
    good = [partition_transition(i) for i in range(10)]
    bad_outcome = partition_transition(10, outcome="sideways")
    too_long = partition_transition(11, from_state="x" * 100)  # the database refuses it on PostgreSQL only
    writer.record([*good[:5], bad_outcome, object(), *good[5:]])  # type: ignore[list-item]
    assert writer.flush(WAIT)
    writer.record([too_long, partition_transition(12)])
    assert writer.flush(WAIT)
    engine = engine_for(audit_url)
    stored = count(engine, partition_transitions)
    rejected_lines = (spool_dir / REJECTED_FILE).read_text().splitlines()
    reasons = [orjson.loads(line)["reason"] for line in rejected_lines]
    assert any("bad outcome 'sideways'" in r for r in reasons)
    assert any("not an audit record: object" in r for r in reasons)
    if engine.dialect.name == "postgresql":
        assert any("from_state must be a string of at most 32" in r for r in reasons)
        assert stored == 11
    else:
        assert stored == 12  # SQLite keeps the long string (its VARCHAR does not limit)
    stats = writer.stats()
    assert stats.rejected == len(rejected_lines)
    assert stats.dropped == 0 and stats.spooled == 0 and stats.database_available


def test_a_spool_left_by_a_crash_is_replayed_at_start_exactly_once(
    audit_url: str,
    spool_dir: Path,
    engine_for,  # type: ignore[no-untyped-def]
) -> None:
    records = [partition_transition(i) for i in range(300)] + [controller_event(7)]
    with AuditWriter(audit_url, spool_dir=spool_dir) as w:
        w.record(records[:100])  # these reached the database before the "crash"
        assert w.flush(WAIT)
    spool = Spool(spool_dir)  # the crashed process had spooled everything, including rows 0..99
    for k in range(0, 301, 50):
        spool.append(to_batch([records[k : k + 50]]).batch)
    spooled = spool.rows
    spool.close()

    w = AuditWriter(audit_url, spool_dir=spool_dir)
    try:
        assert w.wait_replayed(WAIT)
        stats = w.stats()
    finally:
        w.close()
    engine = engine_for(audit_url)
    assert count(engine, partition_transitions) == 300
    assert count(engine, controller_events) == 1
    assert (stats.replayed, stats.duplicates, stats.spool_rows) == (spooled, 100, 0)
    assert spooled == batch_size(to_batch([records]).batch)


def test_record_never_raises_and_counts_what_it_drops(writer: AuditWriter) -> None:
    writer.record(None)  # type: ignore[arg-type]
    writer.record([])
    writer.close()
    writer.record([partition_transition(1), partition_transition(2)])
    stats = writer.stats()
    assert stats.dropped == 3
    assert stats.accepted == 0


def test_record_returns_while_the_database_hangs(tmp_path: Path) -> None:
    """A server that accepts TCP connections and never answers: record() must not care."""
    with socket.socket() as blackhole:
        blackhole.bind(("127.0.0.1", 0))
        blackhole.listen(16)
        port = blackhole.getsockname()[1]
        w = AuditWriter(
            f"postgresql+psycopg://postgres@127.0.0.1:{port}/audit",
            spool_dir=tmp_path / "spool",
            engine_options={"connect_args": {"connect_timeout": 3}},
        )
        try:
            for i in range(200):
                w.record([partition_transition(i)])
            stats = w.stats()
            # record() returned 200 times while the writer was still stuck connecting
            assert (stats.accepted, stats.pending, stats.written, stats.spooled) == (200, 200, 0, 0)
            assert not stats.database_available
            assert w.flush(WAIT)  # durable in the spool once the connection attempt gives up
            stats = w.stats()
            assert (stats.spooled, stats.spool_rows, stats.written, stats.pending) == (200, 200, 0, 0)
            assert stats.last_error
        finally:
            w.close(timeout=WAIT)


def test_sqlite_checkpoints_happen_between_batches_not_inside_them(tmp_path: Path) -> None:
    path = tmp_path / "ckpt.db"
    engine = create_audit_engine(f"sqlite:///{path}", sqlite_autocheckpoint=False)
    try:
        upgrade_database(engine)
        loader = SqliteLoader(engine)
        loader.maintain(idle=True)  # nothing written by the loader yet: nothing to do
        size_before = path.stat().st_size
        rows = to_batch([[partition_transition(i) for i in range(loader.IDLE_CHECKPOINT_ROWS)]]).batch
        assert loader.write(rows) == loader.IDLE_CHECKPOINT_ROWS
        assert path.stat().st_size == size_before  # the rows sit in the WAL
        loader.maintain(idle=False)  # under load, not yet
        assert path.stat().st_size == size_before
        loader.maintain(idle=True)
        assert path.stat().st_size > size_before  # copied into the database file
    finally:
        engine.dispose()


def test_lag_is_the_age_of_the_oldest_record_not_yet_settled_and_a_gauge(tmp_path: Path) -> None:
    """While the database hangs, the lag grows from when the controller recorded the oldest record;
    once the rows are durable (spooled here) it is 0. The broker's metrics registry exposes it."""
    from kafka_controller.audit.writer_recovery import AUDIT_LAG_MS, AUDIT_QUEUE_DEPTH, register_writer_gauges
    from kafka_controller.controller.metrics import MetricsRegistry
    from kafka_controller.ports import SystemClock

    with socket.socket() as blackhole:
        blackhole.bind(("127.0.0.1", 0))
        blackhole.listen(16)
        w = AuditWriter(
            f"postgresql+psycopg://postgres@127.0.0.1:{blackhole.getsockname()[1]}/audit",
            spool_dir=tmp_path / "spool",
            engine_options={"connect_args": {"connect_timeout": 3}},
        )
        metrics = MetricsRegistry(SystemClock())
        register_writer_gauges(metrics, w)
        try:
            assert w.lag_ms() == 0
            old = partition_transition(1)
            old.timestamp_ms = SystemClock().time_ms() - 5_000  # recorded 5 s ago, held by its event
            w.record([old, partition_transition(2)])
            assert w.lag_ms() >= 5_000 and w.stats().lag_ms >= 5_000
            snapshot = metrics.snapshot()
            assert snapshot[AUDIT_LAG_MS] >= 5_000 and snapshot[AUDIT_QUEUE_DEPTH] == 2
            assert w.flush(WAIT)
            assert w.lag_ms() == 0 and metrics.snapshot()[AUDIT_QUEUE_DEPTH] == 0
        finally:
            w.close(timeout=WAIT)


def test_held_rows_wait_for_release_and_a_flush_releases_them(  # type: ignore[no-untyped-def]
    audit_url: str, spool_dir: Path, engine_for
) -> None:
    """What ``hold`` holds stays out of the database while the writer thread runs (two passes in
    a row end with rows still queued: a pass that took them would have emptied the queue), and
    is written once released; a ``flush`` releases."""
    from tests.broker.helpers import wait_until

    engine = engine_for(audit_url)
    w = AuditWriter(audit_url, spool_dir=spool_dir, batch_size=50, flush_interval=0.05)
    passes: list[bool] = []  # per writer pass: whether it left the queue empty
    maintain = w._loader.maintain

    def spy(idle: bool) -> None:
        passes.append(idle)
        maintain(idle=idle)

    w._loader.maintain = spy  # type: ignore[method-assign]
    try:
        w.record([partition_transition(1)])
        w.hold()
        w.record([partition_transition(2), partition_transition(3)])
        mark = len(passes)
        wait_until(lambda: "FF" in "".join("T" if p else "F" for p in passes[mark:]), "two held passes")
        assert count(engine, partition_transitions) == 1 and w.stats().pending == 2
        w.release()
        wait_until(lambda: count(engine, partition_transitions) == 3, "the held rows written", WAIT)
        w.hold()
        w.record([partition_transition(4)])
        assert w.flush(WAIT) and count(engine, partition_transitions) == 4
    finally:
        w.close()
