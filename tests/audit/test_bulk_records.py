"""Bulk (columnar) audit records: the same rows, sequence numbers and order as single records,
through the state machines, the controller's stamping sink, the writer, its journal and replay."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest
from sqlalchemy import create_engine, select

from kafka_controller.audit import spool as spool_module
from kafka_controller.audit.bulk import bulk_segment, queue_units, segment_rows
from kafka_controller.audit.migrate import upgrade_database
from kafka_controller.audit.rows import to_batch
from kafka_controller.audit.schema import (
    LOADED_TABLES,
    controller_events,
    partition_transitions,
    replica_transitions,
)
from kafka_controller.audit.spool import JOURNAL_FILE, Spool
from kafka_controller.audit.writer import AuditWriter
from kafka_controller.controller.auditing import ControllerAuditSink
from kafka_controller.domain.audit_records import (
    AuditItem,
    AuditRecord,
    PartitionTransitionColumns,
    ReplicaTransition,
    ReplicaTransitionColumns,
    expand_records,
    record_rows,
)
from kafka_controller.domain.states import PartitionState
from kafka_controller.domain.values import TopicPartition
from kafka_controller.dryrun.recording import RecordingAuditSink
from kafka_controller.ports import BulkAuditSink
from kafka_controller.testing.clock import ManualClock
from kafka_controller.testing.core_harness import CoreHarness
from tests.audit.factories import controller_event, partition_transition, replica_transition

WAIT = 60.0


class SinglesSink:
    """A sink that does not take bulk records: the state machines build single ones for it."""

    def __init__(self) -> None:
        self.items: list[AuditItem] = []

    def record(self, records: Sequence[AuditItem]) -> None:
        self.items.extend(records)


class RawBulkSink(SinglesSink, BulkAuditSink):
    """A sink that takes bulk records: it keeps them as they come."""


def run_scenario(sink: Any) -> None:
    """Topic creation, a broker failure (offline replicas, ISR removal, elections), its return,
    a controlled shutdown and a failing call: every hot path of both state machines, stamped by
    the controller's sink on a manual clock."""
    clock = ManualClock()
    audit = ControllerAuditSink(sink, 7, clock, lambda: 3)
    h = CoreHarness((1, 2, 3), audit=audit)
    audit.begin_event("TopicChange", "op-1")
    h.create_topic("t", [[1, 2, 3], [2, 3, 1], [3, 1, 2]] * 10)
    audit.end_event()
    clock.advance(1.0)
    audit.begin_event("BrokerChange")
    h.fail_brokers([3])
    clock.advance(3.0)  # past the hold bound: the next record forwards what is held
    h.start_brokers([3])
    audit.end_event()
    audit.begin_event("ControlledShutdown")
    h.controlled_shutdown(2)
    # an invalid transition between successes: the bulk record is split around the single one
    h.psm.handle_state_changes([TopicPartition("t", 0), TopicPartition("t", 1)], PartitionState.NEW_PARTITION)
    audit.end_event()


def scenario_items(sink: SinglesSink) -> list[AuditItem]:
    run_scenario(sink)
    return sink.items


def test_state_machines_build_bulk_records_whose_rows_are_the_single_records() -> None:
    singles = scenario_items(SinglesSink())
    bulk = scenario_items(RawBulkSink())
    assert not any(isinstance(r, ReplicaTransitionColumns | PartitionTransitionColumns) for r in singles)
    assert sum(isinstance(r, ReplicaTransitionColumns) for r in bulk) >= 3
    assert sum(isinstance(r, PartitionTransitionColumns) for r in bulk) >= 2
    assert record_rows(bulk) == len(singles) > len(bulk) * 4
    assert expand_records(bulk) == singles
    seqs = [r.sequence for r in singles]
    assert seqs == list(range(1, len(singles) + 1))
    assert any(r.outcome == "invalid" for r in singles)  # the single records stay single


def test_the_recording_sink_and_a_non_bulk_sink_behind_the_controller_sink_see_single_records() -> None:
    singles = scenario_items(SinglesSink())
    recording = RecordingAuditSink()
    run_scenario(recording)
    assert recording.records == singles


def test_rows_without_a_leadership_change_share_their_after_columns_until_one_differs() -> None:
    shared = ReplicaTransitionColumns.unchanged("OnlineReplica")
    plain = ReplicaTransitionColumns("OnlineReplica")
    for p in range(3):
        shared.add_unchanged("t", p, 1, "OnlineReplica", 1, (1, 2), 4)
        plain.add("t", p, 1, "OnlineReplica", 1, 1, (1, 2), (1, 2), 4, 4)
    assert shared.shares_after_columns and not plain.shares_after_columns
    assert shared == plain and shared.expand() == plain.expand()
    assert bulk_segment(shared) == bulk_segment(plain)
    shared.add("t", 3, 1, "OnlineReplica", 1, 2, (1, 2), (2,), 4, 5)  # a changed row: columns split
    plain.add("t", 3, 1, "OnlineReplica", 1, 2, (1, 2), (2,), 4, 5)
    assert not shared.shares_after_columns
    assert shared.leader_before == [1, 1, 1, 1] and shared.leader_after == [1, 1, 1, 2]
    shared.add_unchanged("t", 4, 1, "OnlineReplica", 2, (2,), 5)
    plain.add("t", 4, 1, "OnlineReplica", 2, 2, (2,), (2,), 5, 5)
    assert shared == plain and shared.expand() == plain.expand()


def test_the_state_machines_share_the_after_columns_of_unchanged_rows_only() -> None:
    bulk = [r for r in scenario_items(RawBulkSink()) if isinstance(r, ReplicaTransitionColumns)]
    online = [r for r in bulk if r.to_state == "OnlineReplica"]
    offline = [r for r in bulk if r.to_state == "OfflineReplica"]
    assert online and all(r.shares_after_columns for r in online)
    assert offline and not any(r.shares_after_columns for r in offline)  # ISR shrinks: rows changed
    assert any(b != a for r in offline for b, a in zip(r.isr_before, r.isr_after, strict=True))


class HoldingBulkSink(RawBulkSink):
    def hold(self) -> None: ...

    def release(self) -> None: ...


def test_held_records_count_rows_and_bulk_records_are_stamped_once() -> None:
    clock = ManualClock()
    sink = HoldingBulkSink()
    audit = ControllerAuditSink(sink, 7, clock, lambda: 3)
    bulk = ReplicaTransitionColumns("OnlineReplica")
    for p in range(5):
        bulk.add("t", p, 1, "OnlineReplica", 1, 1, (1, 2), (1, 2), 0, 0)
    audit.begin_event("Startup", "op")
    audit.record([replica_transition(0, sequence=-1), bulk, replica_transition(9, sequence=-1)])
    assert audit.held_records() == 7
    audit.end_event()
    first, stamped, last = sink.items
    assert (first.sequence, stamped.sequence, last.sequence, audit.last_sequence) == (1, 2, 7, 7)
    assert (stamped.controller_id, stamped.controller_epoch, stamped.event, stamped.operation_id) == (
        7,
        3,
        "Startup",
        "op",
    )
    assert [r.sequence for r in stamped.expand()] == [2, 3, 4, 5, 6]


def _bulk_of(records: list[Any]) -> ReplicaTransitionColumns | PartitionTransitionColumns:
    """The bulk record of consecutive single records (same target, outcome, stamps and strategy)."""
    r0 = records[0]
    if isinstance(r0, ReplicaTransition):
        b: Any = ReplicaTransitionColumns(r0.to_state)
        for r in records:
            b.add(r.topic, r.partition, r.replica, r.from_state, r.leader_before, r.leader_after,
                  r.isr_before, r.isr_after, r.leader_epoch_before, r.leader_epoch_after)  # fmt: skip
    else:
        b = PartitionTransitionColumns(r0.to_state, r0.outcome, r0.election_strategy)
        for r in records:
            b.add(r.topic, r.partition, r.from_state, r.leader_before, r.leader_after, r.isr_before,
                  r.isr_after, r.leader_epoch_before, r.leader_epoch_after, r.unclean)  # fmt: skip
        if any(r.error is not None for r in records):  # failed elections: a message per row
            b.error = [r.error for r in records]
    for name in ("controller_id", "controller_epoch", "event", "operation_id", "sequence", "timestamp_ms"):
        setattr(b, name, getattr(r0, name))
    b.dry_run = r0.dry_run
    return b  # type: ignore[no-any-return]


def _stamped(records: list[Any], first: int) -> list[Any]:
    for i, r in enumerate(records):
        r.sequence = first + i if first >= 0 else -1
        r.timestamp_ms = 1_700_000_000_000
    return records


@pytest.mark.parametrize("first", [10, -1])
def test_segment_rows_equal_the_rows_of_the_single_records(first: int) -> None:
    reps = _stamped([replica_transition(i, to_state="OnlineReplica", isr_before=None if i == 2 else (1, 2))
                     for i in range(9)], first)  # fmt: skip
    parts = _stamped([partition_transition(i, unclean=i % 2 == 0, isr_after=None if i == 4 else (i % 3,),
                                           dry_run=True) for i in range(9)], first)  # fmt: skip
    for records, table in ((reps, "replica_transitions"), (parts, "partition_transitions")):
        segment = bulk_segment(_bulk_of(records))
        assert not isinstance(segment, str)
        expected = to_batch([records]).batch[table]
        assert repr(segment_rows(segment)) == repr(expected)  # the same types too (1, not True)
        assert repr(segment_rows(segment, 2, 7)) == repr(expected[2:7])


def test_failed_elections_as_columns_are_the_single_records_rows_through_journal_and_writer(
    tmp_path: Path,
) -> None:
    """A failover at RF 1 fails 20,000 elections: recorded as one bulk record with a message per
    row, they reach the journal and the database as the single records would."""
    failed = _stamped([partition_transition(i, outcome="failed", leader_after=None, isr_after=None,
                                            leader_epoch_after=None, error=f"no leader for {i}")
                       for i in range(12)], 1)  # fmt: skip
    bulk = _bulk_of(failed)
    assert bulk.outcome == "failed" and bulk.error == [f"no leader for {i}" for i in range(12)]
    assert expand_records([bulk]) == failed
    segment = bulk_segment(bulk)
    assert not isinstance(segment, str)
    assert repr(segment_rows(segment)) == repr(to_batch([failed]).batch["partition_transitions"])
    _, parts, n = queue_units([bulk], 1000)
    journal = Spool(tmp_path / "spool", name=JOURNAL_FILE, durable=False)
    journal.append_parts(parts, n)
    journal.close()
    urls = [f"sqlite:///{tmp_path / name}.db" for name in ("replayed", "expected")]
    for url in urls:
        upgrade_database(url)
    with AuditWriter(urls[0], spool_dir=tmp_path / "spool") as writer:
        assert writer.wait_replayed(WAIT)
    with AuditWriter(urls[1], spool_dir=tmp_path / "spool-expected") as writer:
        writer.record(failed)
        assert writer.flush(WAIT)
    rows = _rows(urls[0])
    assert rows == _rows(urls[1]) and len(rows["partition_transitions"]) == 12


def test_a_malformed_bulk_record_is_set_aside_whole() -> None:
    bulk = _bulk_of(_stamped([replica_transition(i, to_state="OnlineReplica") for i in range(3)], 1))
    bulk.partition.pop()
    units, parts, n = queue_units([bulk], 100)
    assert (n, parts) == (3, [])
    [(converted, rows)] = units
    assert rows == 3 and not isinstance(converted, tuple) and "unequal length" in converted.rejected[0][1]


def _mixed() -> tuple[list[AuditRecord], list[AuditItem]]:
    """Single records, and the same with the ok runs as bulk records."""
    reps = _stamped([replica_transition(i, to_state="OnlineReplica") for i in range(120)], 1)
    failed = _stamped([replica_transition(0, outcome="failed", error="boom")], 121)
    parts = _stamped([partition_transition(i) for i in range(70)], 122)
    event = controller_event(5, sequence=192)
    singles: list[AuditRecord] = [*reps, *failed, *parts, event]
    items: list[AuditItem] = [_bulk_of(reps[:80]), _bulk_of(reps[80:]), *failed, _bulk_of(parts), event]
    assert expand_records(items) == singles
    return singles, items


def _rows(url: str) -> dict[str, list[tuple[Any, ...]]]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            # the id, then the columns the writer fills (``cluster_id`` is stamped by the loader)
            return {
                t.name: [
                    tuple(r)
                    for r in conn.execute(
                        select(t.c.id, *(t.c[c] for c in LOADED_TABLES[str(t.name)])).order_by(t.c.id)
                    )
                ]
                for t in (partition_transitions, replica_transitions, controller_events)
            }
    finally:
        engine.dispose()


def test_the_writer_stores_bulk_records_as_the_same_rows_in_the_same_order(tmp_path: Path) -> None:
    singles, items = _mixed()
    urls = []
    for name, records in (("singles", singles), ("bulk", items)):
        url = f"sqlite:///{tmp_path / name}.db"
        upgrade_database(url)
        with AuditWriter(url, spool_dir=tmp_path / f"spool-{name}", batch_size=50) as writer:
            writer.record(records[:3])
            writer.record(records[3:])
            assert writer.flush(WAIT)
            stats = writer.stats()
            assert (stats.accepted, stats.written, stats.rejected) == (len(singles), len(singles), 0)
        urls.append(url)
    rows = _rows(urls[1])
    assert rows == _rows(urls[0])
    assert len(rows["replica_transitions"]) == 121 and len(rows["partition_transitions"]) == 70


def test_a_compact_journal_frame_is_replayed_by_the_next_writer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a writer killed with rows still queued leaves: journal frames of both formats."""
    monkeypatch.setattr(spool_module, "READ_CHUNK_ROWS", 40)  # replayed in bounded batches
    singles, items = _mixed()
    spool_dir = tmp_path / "spool"
    journal = Spool(spool_dir, name=JOURNAL_FILE, durable=False)
    journal.append(to_batch([singles[:5]]).batch)  # the format before bulk records
    rest = items[1:]
    rest[0:0] = [_bulk_of(singles[5:80])]
    units, parts, n = queue_units(rest, 50)
    assert parts and n == len(singles) - 5 and max(size for _, size in units) <= 50
    journal.append_parts(parts, n)
    journal.close()
    reopened = Spool(spool_dir, name=JOURNAL_FILE, durable=False)
    assert (reopened.rows, reopened.frames) == (len(singles), 2)
    assert max(sum(len(r) for r in b.values()) for b in reopened.read()) <= 80
    reopened.close()

    url = f"sqlite:///{tmp_path / 'replayed.db'}"
    upgrade_database(url)
    with AuditWriter(url, spool_dir=spool_dir) as writer:
        assert writer.wait_replayed(WAIT)
    expected_url = f"sqlite:///{tmp_path / 'expected.db'}"
    upgrade_database(expected_url)
    with AuditWriter(expected_url, spool_dir=tmp_path / "spool-expected") as writer:
        writer.record(singles)
        assert writer.flush(WAIT)
    assert _rows(url) == _rows(expected_url)


def test_a_journaled_call_is_cut_into_frames_of_bounded_rows_that_replay_the_same_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failover's ~300,000 rows are not one frame (one ~17 MB payload) but frames of at most
    ``FRAME_ROWS`` rows of column segments; replayed, they are the rows of the call, in order."""
    monkeypatch.setattr(spool_module, "FRAME_ROWS", 30)
    singles, items = _mixed()
    _, parts, n = queue_units(items, 1000)
    journal = Spool(tmp_path / "spool", name=JOURNAL_FILE, durable=False)
    journal.append_parts(parts, n)
    # 80 + 40 replica rows, the failed single, 70 partition rows, the event: frames of 30, 30, 20+10,
    # 30+the failed single, 30, 30, 10+the event (a part of single records is never cut)
    assert (journal.rows, journal.frames) == (len(singles), 7)
    frames = [orjson.loads(payload) for _, _, payload, _ in journal._frames()]
    assert [sum(p[2] for p in f if p[0] == "cols") for f in frames] == [30, 30, 30, 30, 30, 30, 10]
    expected = to_batch([singles]).batch
    by_table = {t: [r for b in journal.read() for r in b.get(t, [])] for t in expected}
    assert by_table == expected  # each table's rows in recording order, sequences included
    journal.close()


def test_a_failed_journal_write_leaves_no_frame_of_the_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(spool_module, "FRAME_ROWS", 30)
    _, items = _mixed()
    _, parts, n = queue_units(items, 1000)
    journal = Spool(tmp_path / "spool", name=JOURNAL_FILE, durable=False)
    journal.append_parts(parts[:1], 80)
    size = journal.size
    calls = 0
    real_writev = os.writev

    def failing_writev(fd: int, buffers: Sequence[bytes]) -> int:
        nonlocal calls
        calls += 1
        if calls == 3:
            raise OSError(28, "No space left on device")
        return real_writev(fd, buffers)

    monkeypatch.setattr(spool_module.os, "writev", failing_writev)
    with pytest.raises(OSError):
        journal.append_parts(parts, n)
    assert (journal.size, journal.rows, journal.frames) == (size, 80, 3)
    assert os.path.getsize(journal.path) == size
    journal.close()
    reopened = Spool(tmp_path / "spool", name=JOURNAL_FILE, durable=False)
    assert (reopened.rows, reopened.frames) == (80, 3)
    reopened.close()


def test_a_bulk_record_larger_than_a_batch_is_queued_in_slices(tmp_path: Path) -> None:
    reps = _stamped([replica_transition(i, to_state="OnlineReplica") for i in range(230)], 1)
    units, parts, n = queue_units([_bulk_of(reps)], 100)
    assert n == 230 and [size for _, size in units] == [100, 100, 30] and len(parts) == 1


KILLED_CHILD = """
import os, signal, sys
from kafka_controller.audit.writer import AuditWriter
from kafka_controller.domain.audit_records import PartitionTransition, ReplicaTransitionColumns

url, spool = sys.argv[1], sys.argv[2]
writer = AuditWriter(url, spool_dir=spool, flush_interval=60)
assert writer.flush(30), "the schema could not be created"
bulk = ReplicaTransitionColumns(
    "OnlineReplica", controller_id=1, controller_epoch=3, sequence=2, timestamp_ms=7
)
for i in range(30_000):
    bulk.add(f"t{i // 50}", i % 50, i % 3, "OnlineReplica", 1, 1, (1, 2), (1, 2), 4, 4)
single = PartitionTransition("t", 0, "OnlinePartition", "OnlinePartition", sequence=1, controller_id=1)
writer.record([single, bulk])
os.kill(os.getpid(), signal.SIGKILL)  # before the writer thread's next cycle
"""


def test_bulk_rows_recorded_before_a_sigkill_reach_the_database(tmp_path: Path) -> None:
    import subprocess
    import sys

    url = f"sqlite:///{tmp_path / 'audit.db'}"
    spool_dir = tmp_path / "spool"
    child = subprocess.run(
        [sys.executable, "-c", KILLED_CHILD, url, str(spool_dir)], capture_output=True, text=True, timeout=120
    )
    assert child.returncode == -9, child.stderr
    with AuditWriter(url, spool_dir=spool_dir) as writer:
        assert writer.wait_replayed(WAIT)
    rows = _rows(url)
    assert [r[3] for r in rows["replica_transitions"]] == list(range(2, 30_002))  # sequence column
    assert len(rows["partition_transitions"]) == 1


def test_an_aborted_partition_call_finds_the_partitions_a_bulk_record_holds() -> None:
    from kafka_controller.core.partition_records import recorded_partitions

    done = _bulk_of(_stamped([partition_transition(i, partition=i) for i in range(3)], 1))
    failed = partition_transition(9, topic="u", partition=7, outcome="failed")
    assert recorded_partitions([done, failed]) == {("topic-0", 0), ("topic-1", 1), ("topic-2", 2), ("u", 7)}


def test_an_aborted_replica_call_fails_only_the_replicas_without_a_record() -> None:
    from kafka_controller.domain.states import ReplicaState
    from kafka_controller.domain.values import PartitionAndReplica

    sink = RawBulkSink()
    h = CoreHarness((1, 2, 3), audit=sink)
    h.create_topic("t", [[1, 2, 3]] * 4)
    sink.items.clear()

    # Broker 2's group aborts before it moves (the bulk OnlineReplica path does not go through
    # ``_to_online``, so the group's handling is what breaks)
    handle_group = h.rsm._do_handle_state_changes

    def broken_for_broker_2(replica_id: int, *args: Any) -> None:
        if replica_id == 2:
            raise RuntimeError("broken")
        handle_group(replica_id, *args)

    h.rsm._do_handle_state_changes = broken_for_broker_2  # type: ignore[method-assign]
    ok = [PartitionAndReplica(TopicPartition("t", p), 1) for p in range(4)]
    aborted = [PartitionAndReplica(TopicPartition("t", p), 2) for p in range(2)]
    h.rsm.handle_state_changes([*ok, *aborted], ReplicaState.ONLINE_REPLICA)
    records = expand_records(sink.items)
    assert [(r.replica, r.partition, r.outcome) for r in records] == [
        *[(1, p, "ok") for p in range(4)],
        *[(2, p, "failed") for p in range(2)],
    ]
    assert isinstance(sink.items[0], ReplicaTransitionColumns) and len(sink.items) == 3


def test_both_backends_store_bulk_rows_as_the_single_records_rows(audit_url: str, tmp_path: Path) -> None:
    singles, items = _mixed()
    with AuditWriter(audit_url, spool_dir=tmp_path / "spool-both", batch_size=50) as writer:
        writer.record(items)
        assert writer.flush(WAIT)
    expected = to_batch([singles]).batch
    rows = _rows(audit_url)
    for table in ("partition_transitions", "replica_transitions", "controller_events"):
        assert [r[1:] for r in rows[table]] == [tuple(r) for r in expected[table]], table
