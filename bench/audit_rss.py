"""Peak RSS and CPU of an in-memory failover audited by a real ``AuditWriter`` (SQLite in a temp dir).

``bench/controller_inmemory.py --audit`` records into a ``RecordingAuditSink`` (a list), which says
nothing about what the writer holds; this runs the same failover (100,000 partitions at scale 1,
one run per process so that ``ru_maxrss`` is this run's peak) with the writer the broker uses, or
with no audit (``--mode off``), and prints one JSON line: seconds and CPU seconds until the
controller is idle (the whole process's, and the event thread's alone), CPU seconds until every
row is in the database too, and the peak RSS; appended to ``bench/results/audit_rss.jsonl``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import resource
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from controller_inmemory import BROKERS, Cluster, drain

from kafka_controller.audit.writer import AuditWriter
from kafka_controller.controller.event_manager import CONTROLLER_EVENT_THREAD_NAME
from kafka_controller.ports import BulkAuditSink
from kafka_controller.thread_cpu import stat_cpu_seconds


def _thread_cpu(name: str) -> float | None:
    """CPU seconds of the live thread called ``name`` so far (Linux ``/proc``), or None."""
    for t in threading.enumerate():
        if t.name == name and t.native_id is not None:
            return stat_cpu_seconds(f"/proc/self/task/{t.native_id}/stat")
    return None


class KeepingSink(BulkAuditSink):
    """Keeps what it is handed, as it is (bulk records too): the cost of building the records alone."""

    def __init__(self) -> None:
        self.items: list[Any] = []

    def record(self, records: Sequence[Any]) -> None:
        self.items.extend(records)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--mode",
        choices=["off", "writer", "keep"],
        default="writer",
        help="no audit, the SQLite AuditWriter, or a sink that only keeps what it is given",
    )
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--rf", type=int, default=3)
    parser.add_argument("--dead", type=int, default=1)
    parser.add_argument("--note", default=None, help="a note stored with the result")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("kafka_controller").setLevel(logging.ERROR)
    topics, per_topic = max(1, int(2000 * args.scale)), 50
    cluster = Cluster()
    assignment = {
        f"topic-{t}": {
            p: tuple((t * per_topic + p + k) % BROKERS for k in range(args.rf)) for p in range(per_topic)
        }
        for t in range(topics)
    }
    cluster.load(assignment)
    for b in range(BROKERS - args.dead, BROKERS):
        cluster.stores[b].expire_session()
    with tempfile.TemporaryDirectory(prefix="kc-audit-rss-") as tmp:
        writer: Any = None
        if args.mode == "keep":
            writer = KeepingSink()
        elif args.mode == "writer":
            writer = AuditWriter(f"sqlite:///{tmp}/audit.db", spool_dir=Path(tmp) / "spool")
            writer.flush(60)
        rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        controller = cluster.controller(0, writer)
        t0, c0 = time.perf_counter(), time.process_time()
        controller.startup()
        drain(controller)
        elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
        event_cpu = _thread_cpu(CONTROLLER_EVENT_THREAD_NAME)
        rows = None
        if isinstance(writer, AuditWriter):
            writer.flush(600)
            stats = writer.stats()
            rows = stats.written
        cpu_all = time.process_time() - c0
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        controller.shutdown()
        if isinstance(writer, AuditWriter):
            writer.close()
    cluster.close()
    result: dict[str, Any] = {
        "bench": "audit_rss",
        "mode": args.mode,
        "scale": args.scale,
        "rf": args.rf,
        "dead": args.dead,
        "load_1m": round(os.getloadavg()[0], 2),
        "seconds": round(elapsed, 3),
        "cpu_seconds": round(cpu, 3),
        "event_thread_cpu_seconds": None if event_cpu is None else round(event_cpu, 3),
        "cpu_seconds_until_written": round(cpu_all, 3),
        "rows_written": rows,
        "max_rss_mb_before_failover": round(rss_before / 1024),
        "max_rss_mb": round(rss / 1024),
    }
    if args.note:
        result["note"] = args.note
    line = json.dumps(result)
    print(line)
    results = os.environ.get("KAFKA_CONTROLLER_BENCH_RESULTS") or Path(__file__).resolve().parent / "results"
    out = Path(results) / "audit_rss.jsonl"
    out.parent.mkdir(exist_ok=True)
    with out.open("a") as f:
        f.write(line + "\n")


if __name__ == "__main__":
    main()
