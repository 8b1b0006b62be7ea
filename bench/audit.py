"""Audit writer benchmark: 100,000 transitions written durably, SQLite and PostgreSQL.

Measures the real ``AuditWriter`` from the first ``record`` to ``flush`` returning (everything
committed), with records handed over in chunks of 500 as the controller's event thread would; each
case runs ``--repeat`` times on a fresh database and reports the median (and every run). Each
figure is compared with a naive baseline measured in the same run on the same backend: one
SQLAlchemy ``INSERT`` per row, all in a single transaction (the naive port's *best* case: with one
transaction per event it is far slower still). Also measured: the spool (the writer's path while
the database is down), fsync'd per batch.

Durability of the SQLite figures: ``synchronous=FULL`` (the writer's default) fsyncs the WAL on every
commit and survives power loss; ``synchronous=NORMAL`` survives a crash of the process, but the last
commits before a power cut or kernel crash may roll back (the file stays consistent). PostgreSQL
commits with the server's default ``synchronous_commit=on``.

Prints one JSON document and appends it to ``bench/results/audit.jsonl``. Absolute seconds drift on
these shared 2-core machines (the load average is recorded); the ratios hold better.

    .venv/bin/python bench/audit.py [--rows 100000] [--repeat 3] [--skip-postgres] [--baseline-rows N]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy import func, insert, select

from kafka_controller.audit.engine import create_audit_engine
from kafka_controller.audit.migrate import upgrade_database
from kafka_controller.audit.rows import to_batch
from kafka_controller.audit.schema import LOADED_TABLES, partition_transitions, replica_transitions
from kafka_controller.audit.writer import AuditWriter
from kafka_controller.domain.audit_records import AuditRecord, PartitionTransition, ReplicaTransition
from kafka_controller.testing.postgres import (
    DEFAULT_ADMIN_URL,
    free_port,
    server_available,
    temporary_database,
)
from kafka_controller.testing.zk_harness import wait_for

RESULTS = Path(__file__).resolve().parent / "results" / "audit.jsonl"
CHUNK = 500
TARGETS = {"sqlite": 1.0, "postgresql": 2.0}


def make_records(n: int, epoch: int = 1) -> list[AuditRecord]:
    """Three partition transitions for every replica transition, as a broker failure produces."""
    out: list[AuditRecord] = []
    t0 = 1_700_000_000_000
    for seq in range(n):
        common: dict[str, Any] = {
            "topic": f"topic-{seq % 2000}",
            "partition": seq % 50,
            "leader_before": seq % 5,
            "leader_after": (seq + 1) % 5,
            "isr_before": (seq % 5, (seq + 1) % 5),
            "isr_after": ((seq + 1) % 5,),
            "leader_epoch_before": seq % 100,
            "leader_epoch_after": seq % 100 + 1,
            "controller_id": 1,
            "controller_epoch": epoch,
            "event": "BrokerChange",
            "sequence": seq,
            "timestamp_ms": t0 + seq // 10,
        }
        if seq % 4:
            out.append(
                PartitionTransition(
                    from_state="OnlinePartition",
                    to_state="OnlinePartition",
                    election_strategy="OfflinePartitionLeaderElectionStrategy(false)",
                    **common,
                )
            )
        else:
            out.append(
                ReplicaTransition(
                    replica=seq % 5, from_state="OnlineReplica", to_state="OfflineReplica", **common
                )
            )
    return out


def stored_rows(url: str) -> int:
    engine = create_audit_engine(url)
    try:
        with engine.connect() as conn:
            return sum(
                conn.execute(select(func.count()).select_from(t)).scalar_one()
                for t in (partition_transitions, replica_transitions)
            )
    finally:
        engine.dispose()


def time_writer(
    url: str, spool_dir: Path, records: Sequence[AuditRecord], *, reachable: bool = True, **options: Any
) -> dict[str, Any]:
    """One run on a fresh database and spool: first ``record`` to ``flush`` returning."""
    writer = AuditWriter(url, spool_dir=spool_dir, **options)
    try:
        # start timing once the schema is in place (or, for the outage case, once the writer gave up)
        wait_for(
            lambda: writer.stats().database_available if reachable else bool(writer.stats().last_error),
            60,
            0.01,
            message="the writer to start",
        )
        cpu0, t0 = time.process_time(), time.perf_counter()
        for i in range(0, len(records), CHUNK):
            writer.record(records[i : i + CHUNK])
        assert writer.flush(300), "flush timed out"
        seconds, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        stats = writer.stats()
    finally:
        writer.close()
    if reachable:
        assert stats.written == len(records) and stored_rows(url) == len(records), "rows missing after flush"
    else:
        assert stats.spooled == len(records), "rows missing from the spool"
    return {"seconds": seconds, "cpu_seconds": cpu}


def repeated(runs: list[dict[str, Any]], n: int) -> dict[str, Any]:
    """Median and best of several runs (the machines are shared: one run says little)."""
    secs = sorted(r["seconds"] for r in runs)
    cpu = sorted(r["cpu_seconds"] for r in runs)
    median = secs[len(secs) // 2]
    return {
        "seconds": round(median, 3),
        "best_seconds": round(secs[0], 3),
        "runs_seconds": [round(r["seconds"], 3) for r in runs],
        "cpu_seconds": round(cpu[len(cpu) // 2], 3),
        "rows_per_s": round(n / median),
    }


def time_baseline(url: str, records: Sequence[AuditRecord]) -> dict[str, Any]:
    """One Core INSERT statement per row, one transaction: what a straightforward port does."""
    upgrade_database(url)
    batch = to_batch([records]).batch
    engine = create_audit_engine(url)
    try:
        t0 = time.perf_counter()
        with engine.begin() as conn:
            for table in (partition_transitions, replica_transitions):
                cols = LOADED_TABLES[table.name]
                stmt = insert(table)
                for row in batch.get(table.name, []):
                    conn.execute(stmt, dict(zip(cols, row, strict=True)))
        seconds = time.perf_counter() - t0
    finally:
        engine.dispose()
    return {"seconds": round(seconds, 3), "rows": len(records), "rows_per_s": round(len(records) / seconds)}


def compare(
    name: str, backend: str, figure: dict[str, Any], baseline: dict[str, Any], n: int
) -> dict[str, Any]:
    baseline_full = baseline["seconds"] * n / baseline["rows"]  # extrapolated when run on fewer rows
    return {
        "case": name,
        "backend": backend,
        "rows": n,
        **figure,
        "baseline": {**baseline, "seconds_for_all_rows": round(baseline_full, 3)},
        "speedup_vs_baseline": round(baseline_full / figure["seconds"], 1),
        "target_seconds": TARGETS.get(backend),
        "within_target": figure["seconds"] <= TARGETS.get(backend, float("inf")),
    }


def bench_sqlite(
    records: Sequence[AuditRecord], baseline_records: Sequence[AuditRecord], repeats: int
) -> list[dict[str, Any]]:
    out = []
    n = len(records)
    with tempfile.TemporaryDirectory(prefix="bench-audit-") as tmp:
        base = time_baseline(f"sqlite:///{tmp}/baseline.db", baseline_records)
        for sync in ("NORMAL", "FULL"):
            runs = [
                time_writer(
                    f"sqlite:///{tmp}/{sync}-{k}.db",
                    Path(tmp) / f"spool-{sync}-{k}",
                    records,
                    sqlite_synchronous=sync,
                )
                for k in range(repeats)
            ]
            out.append(compare(f"writer, WAL synchronous={sync}", "sqlite", repeated(runs, n), base, n))
        # the outage path: the database is unreachable, every batch is fsync'd into the spool
        runs = [
            time_writer(
                f"postgresql+psycopg://postgres@127.0.0.1:{free_port()}/down",
                Path(tmp) / f"spool-outage-{k}",
                records,
                reachable=False,
            )
            for k in range(repeats)
        ]
        out.append(
            compare("spool while the database is down (fsync per batch)", "spool", repeated(runs, n), base, n)
        )
    return out


def bench_postgres(
    records: Sequence[AuditRecord], baseline_records: Sequence[AuditRecord], repeats: int
) -> list[dict[str, Any]]:
    if not server_available(DEFAULT_ADMIN_URL):
        return [
            {"case": "writer, COPY", "backend": "postgresql", "skipped": f"no server at {DEFAULT_ADMIN_URL}"}
        ]
    runs = []
    with tempfile.TemporaryDirectory(prefix="bench-audit-pg-") as tmp:
        with temporary_database(DEFAULT_ADMIN_URL, prefix="audit_bench") as url:
            base = time_baseline(url, baseline_records)
        for k in range(repeats):
            with temporary_database(DEFAULT_ADMIN_URL, prefix="audit_bench") as url:
                runs.append(time_writer(url, Path(tmp) / f"spool-{k}", records))
    return [compare("writer, COPY", "postgresql", repeated(runs, len(records)), base, len(records))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument(
        "--baseline-rows", type=int, default=None, help="rows for the baseline (default: --rows)"
    )
    parser.add_argument("--repeat", type=int, default=3, help="writer runs per case; the median is reported")
    parser.add_argument("--skip-postgres", action="store_true")
    parser.add_argument("--no-save", action="store_true", help="do not append to bench/results/audit.jsonl")
    args = parser.parse_args(argv)
    records = make_records(args.rows)
    baseline_records = records[: args.baseline_rows] if args.baseline_rows else records
    results = bench_sqlite(records, baseline_records, args.repeat)
    if not args.skip_postgres:
        results += bench_postgres(records, baseline_records, args.repeat)
    doc = {
        "bench": "audit",
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "host": {
            "cpus": os.cpu_count(),
            "load_avg_1m": round(os.getloadavg()[0], 2),
            "python": platform.python_version(),
        },
        "results": results,
    }
    line = orjson.dumps(doc).decode()
    print(orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode())
    if not args.no_save:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        with RESULTS.open("a") as f:
            f.write(line + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
