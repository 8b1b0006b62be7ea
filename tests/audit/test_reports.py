"""Report queries against a varied history, on both backends; expectations are computed from the
records in Python, independently of the SQL."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

from kafka_controller.audit.operations import OperationLog
from kafka_controller.audit.reports import build_report, pick_bucket_ms, render_text
from kafka_controller.audit.writer import AuditWriter
from kafka_controller.domain.audit_records import (
    ControllerEventRecord,
    PartitionTransition,
    ReplicaTransition,
)
from tests.audit.factories import BASE_MS, scenario


@dataclass
class History:
    url: str
    ops: dict[str, dict[str, Any]]
    parts: list[PartitionTransition]
    reps: list[ReplicaTransition]
    events: list[ControllerEventRecord]


class StepClock:
    """Operations start at fixed points of the history (a fake clock, house rule 7)."""

    def __init__(self, *times_ms: int) -> None:
        self.times = list(times_ms)

    def time_ms(self) -> int:
        return self.times.pop(0)

    def monotonic(self) -> float:
        return 0.0

    def sleep(self, seconds: float) -> None:
        return None


@pytest.fixture
def history(audit_url: str, tmp_path: Path) -> Iterator[History]:
    minute = 60_000
    starts = [BASE_MS, BASE_MS + 5 * minute, BASE_MS + 12 * minute, BASE_MS + minute]
    finishes = [BASE_MS + 19 * minute, BASE_MS + 20 * minute]
    with OperationLog(audit_url, clock=StepClock(*starts, *finishes)) as log:
        ops = {
            log.start_operation(
                "preferred-election", "alice", "rebalance after bounce", {"topics": ["orders"]}
            ): {},
            log.start_operation(
                "reassign", "bob", "move off broker 2", {"brokers": [0, 1]}, dry_run=False
            ): {},
            log.start_operation("elect-unclean", "carol", "recover orders-3", None): {},
        }
        quiet = log.start_operation("describe", "dave", "look only")  # caused no transitions
        ids = list(ops)
        log.finish_operation(ids[0], "succeeded")
        log.finish_operation(ids[1], "failed", "2 partitions did not move")
        for op in [*ids, quiet]:
            ops[op] = log.get_operation(op) or {}
    parts, reps, events = scenario(ids)
    with AuditWriter(audit_url, spool_dir=tmp_path / "spool") as w:
        w.record([*parts, *reps, *events])
        assert w.flush(60)
    yield History(audit_url, ops, parts, reps, events)


def _moves(parts: list[PartitionTransition]) -> list[dict[str, int]]:
    gained: Counter[int] = Counter()
    lost: Counter[int] = Counter()
    for p in parts:
        if p.outcome == "ok" and p.leader_before != p.leader_after:
            if p.leader_after is not None and p.leader_after != -1:
                gained[p.leader_after] += 1
            if p.leader_before is not None and p.leader_before != -1:
                lost[p.leader_before] += 1
    return [
        {"broker_id": b, "leaderships_gained": gained[b], "leaderships_lost": lost[b]}
        for b in sorted(set(gained) | set(lost))
    ]


def _leaders(parts: list[PartitionTransition]) -> list[dict[str, int]]:
    latest: dict[tuple[str, int], tuple[int, int, PartitionTransition]] = {}
    for order, p in enumerate(parts):
        if p.outcome == "ok" and p.leader_after is not None:
            key = (p.timestamp_ms, order, p)
            if (p.topic, p.partition) not in latest or key[:2] > latest[(p.topic, p.partition)][:2]:
                latest[(p.topic, p.partition)] = key
    counts = Counter(
        p.leader_after
        for _, _, p in latest.values()
        if p.leader_after >= 0 and p.to_state != "NonExistentPartition"
    )
    return [{"broker_id": b, "partitions": counts[b]} for b in sorted(counts)]


def _recovery(events: list[ControllerEventRecord]) -> list[dict[str, Any]]:
    out = []
    for e in sorted((e for e in events if e.kind == "failover"), key=lambda e: e.controller_epoch):
        prev = [
            p.started_ms + p.duration_ms
            for p in events
            if p.controller_epoch == e.controller_epoch - 1 and p.kind in ("resigned", "moved")
        ]
        prev_end = max(prev) if prev else None
        ttr = e.started_ms + e.duration_ms - prev_end if prev_end is not None else e.duration_ms
        out.append((e.controller_epoch, e.broker_id, e.started_ms, e.duration_ms, prev_end, ttr))
    return out


def _check(
    report: dict[str, Any],
    h: History,
    parts: list[PartitionTransition],
    reps: list[ReplicaTransition],
    op_ids: list[str],
    since: int | None,
) -> None:
    s = report["summary"]
    assert not report["empty"]
    assert (s["partition_transitions"], s["replica_transitions"]) == (len(parts), len(reps))
    outcomes = Counter(r.outcome for r in [*parts, *reps])
    assert (s["ok"], s["invalid"], s["failed"]) == (outcomes["ok"], outcomes["invalid"], outcomes["failed"])
    assert s["first_ms"] == min(r.timestamp_ms for r in [*parts, *reps])
    sec = report["sections"]

    unclean = sorted((p for p in parts if p.unclean), key=lambda p: p.timestamp_ms, reverse=True)
    assert sec["unclean_elections"]["total"] == len(unclean)
    got = sec["unclean_elections"]["rows"]
    assert [(r["timestamp_ms"], r["topic"], r["partition"], r["outcome"]) for r in got] == [
        (p.timestamp_ms, p.topic, p.partition, p.outcome) for p in unclean
    ][: len(got)]

    failed = {
        ("partition", p.timestamp_ms, p.topic, p.partition, None, p.outcome, p.error)
        for p in parts
        if p.outcome != "ok"
    }
    failed |= {
        ("replica", r.timestamp_ms, r.topic, r.partition, r.replica, r.outcome, r.error)
        for r in reps
        if r.outcome != "ok"
    }
    assert sec["failed_transitions"]["total"] == len(failed)
    assert {
        (r["machine"], r["timestamp_ms"], r["topic"], r["partition"], r["replica"], r["outcome"], r["error"])
        for r in sec["failed_transitions"]["rows"]
    } <= failed

    per_op = {r["operation_id"]: r for r in sec["transitions_per_operation"]["rows"]}
    assert set(per_op) == set(op_ids)
    for op in op_ids:
        mine = [t for t in [*parts, *reps] if t.operation_id == op]
        row = per_op[op]
        assert row["partition_transitions"] == sum(isinstance(t, PartitionTransition) for t in mine)
        assert row["replica_transitions"] == sum(isinstance(t, ReplicaTransition) for t in mine)
        assert (row["ok"], row["invalid"], row["failed"]) == tuple(
            sum(t.outcome == o for t in mine) for o in ("ok", "invalid", "failed")
        )
        assert (row["kind"], row["requester"], row["status"]) == tuple(
            h.ops[op][k] for k in ("kind", "requester", "status")
        )
        assert bool(row["dry_run"]) == bool(h.ops[op]["dry_run"])

    assert sec["leader_moves_per_broker"]["rows"] == _moves(parts)

    events = [e for e in h.events if since is None or e.started_ms >= since]
    keys = (
        "controller_epoch",
        "broker_id",
        "started_ms",
        "duration_ms",
        "previous_end_ms",
        "time_to_recover_ms",
    )
    got_recovery = [
        tuple(None if r[k] is None else float(r[k]) for k in keys) for r in sec["failover_recovery"]["rows"]
    ]
    want = [tuple(None if v is None else float(v) for v in w) for w in _recovery(h.events)]
    assert got_recovery == [w for w in want if since is None or w[2] >= since]
    assert len(events) >= len(got_recovery)

    charts = report["charts"]
    bucket = charts["bucket_ms"]
    assert bucket == pick_bucket_ms(s["first_ms"], s["last_ms"])
    buckets: Counter[tuple[int, str]] = Counter(
        (t.timestamp_ms // bucket * bucket, t.outcome) for t in [*parts, *reps]
    )
    got_buckets = {
        (p["start_ms"], o): p[o]
        for p in charts["transitions_over_time"]
        for o in ("ok", "invalid", "failed")
        if p[o]
    }
    assert got_buckets == dict(buckets)
    assert charts["leaders_per_broker"] == _leaders(h.parts)


def test_full_report_matches_the_history(history: History) -> None:
    report = build_report(history.url, limit=1000)
    assert orjson.loads(orjson.dumps(report)) == report  # JSON-ready on both backends
    with_transitions = [
        op for op in history.ops if any(t.operation_id == op for t in [*history.parts, *history.reps])
    ]
    assert len(with_transitions) == 3
    _check(report, history, history.parts, history.reps, list(history.ops), None)
    assert report["summary"]["controller_events"] == len(history.events)
    assert report["summary"]["operations"] == 4
    quiet = next(op for op in history.ops if op not in with_transitions)
    row = next(
        r for r in report["sections"]["transitions_per_operation"]["rows"] if r["operation_id"] == quiet
    )
    assert (row["partition_transitions"], row["replica_transitions"], row["first_ms"]) == (0, 0, None)


def test_since_filter(history: History) -> None:
    since = BASE_MS + 10 * 60_000
    report = build_report(history.url, since_ms=since, limit=1000)
    parts = [p for p in history.parts if p.timestamp_ms >= since]
    reps = [r for r in history.reps if r.timestamp_ms >= since]
    ops = [
        op
        for op, row in history.ops.items()
        if row["started_ms"] >= since or any(t.operation_id == op for t in [*parts, *reps])
    ]
    assert 0 < len(ops) < len(history.ops)  # the quiet operation started before ``since``
    _check(report, history, parts, reps, ops, since)


def test_operation_filter(history: History) -> None:
    op = next(iter(history.ops))
    report = build_report(history.url, operation_id=op, limit=1000)
    parts = [p for p in history.parts if p.operation_id == op]
    reps = [r for r in history.reps if r.operation_id == op]
    assert parts and reps
    _check(report, history, parts, reps, [op], None)


def test_limit_keeps_totals_exact(history: History) -> None:
    report = build_report(history.url, limit=3)
    failed = report["sections"]["failed_transitions"]
    assert len(failed["rows"]) == 3 and failed["total"] > 3
    assert [r["timestamp_ms"] for r in failed["rows"]] == sorted(
        (r["timestamp_ms"] for r in failed["rows"]), reverse=True
    )
    text = render_text(report)
    assert f"Failed and invalid transitions: {failed['total']} (showing 3 of {failed['total']})" in text


def test_empty_and_schemaless_databases_say_there_is_nothing_yet(audit_url: str, tmp_path: Path) -> None:
    report = build_report(audit_url)
    assert report["empty"] is True
    assert "Nothing recorded yet" in render_text(report)
    blank = tmp_path / "blank.db"
    blank.touch()
    report = build_report(f"sqlite:///{blank}")
    assert report["empty"] is True and report["sections"] == {}
