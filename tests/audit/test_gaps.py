"""``audit report`` names rows missing by the controllers' sequence numbers (both backends)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from kafka_controller.audit.gaps import STORE_REPLACED, Gap
from kafka_controller.audit.reports import build_report, render_text
from kafka_controller.audit.writer import AuditWriter
from kafka_controller.domain.audit_records import AuditItem
from tests.audit.factories import controller_event, partition_transition, replica_transition


def store(url: str, tmp_path: Path, records: list[AuditItem], cluster_id: str | None = None) -> None:
    with AuditWriter(url, spool_dir=tmp_path / f"spool-{cluster_id}", cluster_id=cluster_id) as writer:
        writer.record(records)
        assert writer.wait_replayed(60)


def run(cid: int, epoch: int, first: int, last: int, *, skip: tuple[int, ...] = ()) -> list[AuditItem]:
    """What one controller process records in one epoch: sequence numbers ``first``..``last``
    shared by partition and replica transitions and its events (the last one an event)."""
    out: list[AuditItem] = []
    for seq in range(first, last + 1):
        if seq in skip:
            continue
        if seq == last:
            out.append(controller_event(epoch, "resigned", broker_id=cid, sequence=seq, started_ms=seq))
        elif seq % 3:
            out.append(partition_transition(seq, controller_id=cid, controller_epoch=epoch))
        else:
            out.append(replica_transition(seq, controller_id=cid, controller_epoch=epoch))
    return out


def gaps_of(url: str, cluster_id: str | None = None) -> list[Gap]:
    report = build_report(url, cluster_id=cluster_id)
    found = report["gaps"]
    return [Gap(**g) for g in found["shown"]]


def test_whole_sequences_have_no_gaps_and_the_report_says_nothing(audit_url: str, tmp_path: Path) -> None:
    moved = controller_event(0, "moved", broker_id=1, sequence=41, started_ms=41)  # resigned: epoch 0
    records = [
        *run(1, 3, 1, 40),
        moved,  # between two epochs of the same process
        *run(1, 5, 42, 60),  # the same process, elected again
        *run(2, 4, 1, 30),  # another controller
        *run(1, 7, 1, 10),  # broker 1 restarted: numbers from 1 again
        partition_transition(5, controller_id=-1, sequence=-1, dry_run=True),  # plans have no number
    ]
    store(audit_url, tmp_path, records)
    assert gaps_of(audit_url) == []
    assert "Missing rows" not in render_text(build_report(audit_url))


def test_holes_within_an_epoch_and_a_missing_head_are_reported(audit_url: str, tmp_path: Path) -> None:
    records = [
        *run(1, 3, 1, 40, skip=(7, 8, 9, 20)),  # 4 rows lost inside epoch 3
        *run(1, 5, 51, 60),  # 42..50 never arrived (41 ended epoch 3's run)... or a restart lost 1..50
        *run(2, 9, 1001, 1010),  # only the tail of controller 2's numbers: at least 1000 before
    ]
    store(audit_url, tmp_path, records)
    assert gaps_of(audit_url) == [
        Gap(None, 1, 3, "within", 4, 1, 40),
        Gap(None, 1, 5, "before", 10, 40, 51),
        Gap(None, 2, 9, "before", 1000, None, 1001),
    ]
    text = render_text(build_report(audit_url))
    assert "Missing rows: at least 1014 in 3 run(s)" in text
    assert "4 rows missing among sequences 1..40 of controller 1 epoch 3" in text
    assert "at least 10 rows missing before sequence 51 of controller 1 epoch 5 (after 40" in text
    assert "at least 1000 rows missing before sequence 1001 of controller 2 epoch 9\n" in text


def test_a_store_replaced_marker_alone_is_not_nothing_recorded(sqlite_url: str, tmp_path: Path) -> None:
    store(
        sqlite_url,
        tmp_path,
        [controller_event(0, STORE_REPLACED, broker_id=-1, started_ms=1_700_000_000_000, detail="gone")],
    )
    text = render_text(build_report(sqlite_url))
    assert "Nothing recorded yet" not in text
    assert "Missing rows: 1 time(s) a writer found the audit database file deleted or replaced" in text
    assert "2023-11-14 22:13:20.000Z" in text


def test_the_listing_is_bounded_and_the_totals_count_everything(sqlite_url: str, tmp_path: Path) -> None:
    # 30 epochs of controller 1 each missing one row inside: 30 runs, 20 in the text
    records: list[Any] = []
    for epoch in range(1, 31):
        first = (epoch - 1) * 10 + 1
        records += run(1, epoch, first, first + 9, skip=(first + 4,))
    store(sqlite_url, tmp_path, records)
    report = build_report(sqlite_url)
    assert (report["gaps"]["missing_rows"], report["gaps"]["runs"]) == (30, 30)
    text = render_text(report)
    assert text.count("rows missing among") == 20
    assert "... and 10 more runs" in text


@pytest.mark.parametrize("rows", [0, 3])
def test_a_file_without_rows_says_nothing_recorded_or_counts(
    sqlite_url: str, tmp_path: Path, rows: int
) -> None:
    store(sqlite_url, tmp_path, run(1, 1, 1, rows) if rows else [partition_transition(1, sequence=-1)])
    with sqlite3.connect(sqlite_url.removeprefix("sqlite:///")) as conn:
        conn.execute("DELETE FROM partition_transitions WHERE sequence IS NULL")
    text = render_text(build_report(sqlite_url))
    assert ("Nothing recorded yet" in text) == (rows == 0)
    assert "Missing rows" not in text


def test_a_report_for_one_cluster_names_only_that_clusters_missing_rows(
    sqlite_url: str, tmp_path: Path
) -> None:
    store(sqlite_url, tmp_path, run(1, 3, 1, 20), cluster_id="whole")
    store(sqlite_url, tmp_path, run(1, 3, 1, 20, skip=(5,)), cluster_id="holed")  # same ids, other cluster
    assert gaps_of(sqlite_url, "whole") == []
    assert gaps_of(sqlite_url, "holed") == [Gap("holed", 1, 3, "within", 1, 1, 20)]
    assert gaps_of(sqlite_url) == [Gap("holed", 1, 3, "within", 1, 1, 20)]
    assert "1 rows missing among sequences 1..20 of cluster holed controller 1 epoch 3" in render_text(
        build_report(sqlite_url)
    )
