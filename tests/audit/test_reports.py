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
from tests.audit.factories import BASE_MS, dry_run_plan, scenario


@dataclass
class History:
    url: str
    ops: dict[str, dict[str, Any]]
    parts: list[PartitionTransition]
    reps: list[ReplicaTransition]
    events: list[ControllerEventRecord]
    #: What a dry run planned (its operation, transitions and failover): never in the totals.
    plan_op: str = ""
    planned: tuple[list[PartitionTransition], list[ReplicaTransition], list[ControllerEventRecord]] = (
        [],
        [],
        [],
    )


class StepClock:
    """Operations start at fixed points of the history (a fake clock: docs/rules.md, time is injected)."""

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
    starts = [BASE_MS, BASE_MS + 5 * minute, BASE_MS + 12 * minute, BASE_MS + minute, BASE_MS + 2 * minute]
    finishes = [BASE_MS + 19 * minute, BASE_MS + 20 * minute]
    with OperationLog(audit_url, clock=StepClock(*starts, *finishes)) as log:
        ops = {
            log.start_operation(
                "preferred-election", "alice", "rebalance after bounce", {"topics": ["orders"]}, False
            ): {},
            log.start_operation(
                "reassign", "bob", "move off broker 2", {"brokers": [0, 1]}, dry_run=False
            ): {},
            log.start_operation("elect-unclean", "carol", "recover orders-3", None, False): {},
        }
        quiet = log.start_operation("describe", "dave", "look only", None, False)  # no transitions
        plan_op = log.start_operation("failover-drill", "erin", "what would happen", None, dry_run=True)
        ids = list(ops)
        log.finish_operation(ids[0], "succeeded")
        log.finish_operation(ids[1], "failed", "2 partitions did not move")
        for op in [*ids, quiet]:
            ops[op] = log.get_operation(op) or {}
    parts, reps, events = scenario(ids)
    planned = dry_run_plan(plan_op)
    with AuditWriter(audit_url, spool_dir=tmp_path / "spool") as w:
        w.record([*parts, *reps, *events, *planned[0], *planned[1], *planned[2]])
        assert w.flush(60)
    yield History(audit_url, ops, parts, reps, events, plan_op, planned)


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


def _recovery(events: list[ControllerEventRecord]) -> list[tuple[Any, ...]]:
    """The outage each failover ended, from the earliest sign of the loss to every partition led."""
    out = []
    for e in sorted((e for e in events if e.kind == "failover"), key=lambda e: e.controller_epoch):
        before = [p for p in events if p.controller_epoch == e.controller_epoch - 1]
        stepped = [p.started_ms + p.duration_ms for p in before if p.kind in ("resigned", "moved")]
        killed = [p.started_ms for p in before if p.kind == "lost"]
        signs = {
            "drill": min(killed) if killed else None,
            "resignation": max(stepped) if stepped else None,
            "/controller deleted": e.lost_ms,
        }
        known = {how: t for how, t in signs.items() if t is not None and t <= e.started_ms}
        how = min(known, key=lambda k: known[k]) if known else None
        lost = known[how] if how else None
        recovered = e.started_ms + e.duration_ms if e.offline_partitions is None else e.recovered_ms
        ttr = None if recovered is None else recovered - (lost if lost is not None else e.started_ms)
        out.append((e.controller_epoch, e.broker_id, e.previous_broker_id, lost, how, recovered, ttr))
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
    # totals that add up: by table and by outcome, and no operation counts more than there is
    assert s["partition_transitions"] + s["replica_transitions"] == s["ok"] + s["invalid"] + s["failed"]
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
    assert sum(r["partition_transitions"] for r in per_op.values()) <= s["partition_transitions"]
    assert sum(r["replica_transitions"] for r in per_op.values()) <= s["replica_transitions"]
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
        "previous_broker_id",
        "lost_ms",
        "lost_via",
        "recovered_ms",
        "time_to_recover_ms",
    )

    def plain(v: Any) -> Any:
        return float(v) if isinstance(v, int | float) else v

    got_recovery = [tuple(plain(r[k]) for k in keys) for r in sec["failover_recovery"]["rows"]]
    started = {e.controller_epoch: e.started_ms for e in h.events if e.kind == "failover"}
    want = [tuple(plain(v) for v in w) for w in _recovery(h.events)]
    assert got_recovery == [w for w in want if since is None or started[int(w[0])] >= since]
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


def test_the_kill_drills_outage_runs_from_the_kill(history: History) -> None:
    """Epoch 8's controller was elected 6 s after a drill killed epoch 7's: the report says 6 s,
    not the failover's 125 ms, and names the kill as the loss."""
    rows = build_report(history.url)["sections"]["failover_recovery"]["rows"]
    row = next(r for r in rows if r["controller_epoch"] == 8)
    assert row["lost_via"] == "drill"
    assert row["time_to_recover_ms"] >= 6000 > 125.5 == row["duration_ms"]


def test_dry_runs_are_left_out_unless_asked(history: History) -> None:
    plan_parts, plan_reps, plan_events = history.planned
    planned_rows = len(plan_parts) + len(plan_reps) + len(plan_events)
    real = build_report(history.url, limit=1000)
    _check(real, history, history.parts, history.reps, list(history.ops), None)
    s = real["summary"]
    assert s["dry_run_rows"] == planned_rows > 0
    assert s["controller_events"] == len(history.events)
    assert s["operations"] == len(history.ops)
    assert history.plan_op not in {
        r["operation_id"] for r in real["sections"]["transitions_per_operation"]["rows"]
    }
    assert all(
        r["broker_id"] != plan_events[0].broker_id for r in real["sections"]["failover_recovery"]["rows"]
    )
    assert f"Left out: {planned_rows} rows planned by dry runs" in render_text(real)

    both = build_report(history.url, limit=1000, dry_runs=True)["summary"]
    assert both["partition_transitions"] == len(history.parts) + len(plan_parts)
    assert both["replica_transitions"] == len(history.reps) + len(plan_reps)
    assert both["controller_events"] == len(history.events) + len(plan_events)
    assert both["operations"] == len(history.ops) + 1
    assert both["dry_run_rows"] == 0

    own = build_report(history.url, operation_id=history.plan_op, limit=1000)
    assert own["summary"]["partition_transitions"] == len(plan_parts)
    assert [r["operation_id"] for r in own["sections"]["transitions_per_operation"]["rows"]] == [
        history.plan_op
    ]
