"""The audit writer under store faults, as a broker runs it (default settings), measured from outside.

* ``spool_full``: the spool's directory is a 1 MiB tmpfs and a private PostgreSQL is down for
  ``--outage-seconds`` while a controller records 500 transitions a second; the spool fills, then
  the writer holds what it cannot spool. Reported: the writer's log lines over the outage, and
  the seconds from PostgreSQL's start until everything is in it (the tmpfs still full), with every
  sequence number checked to be stored once.
* ``sqlite_deleted``: the SQLite file is deleted (with its WAL and index) under the same load.
  Reported: the seconds until the new file at the path has a row, and whether every transition
  recorded after the deletion is in it, once.

Needs root (the tmpfs) and PostgreSQL's server binaries (``kafka_controller.testing.postgres``).
"""

from __future__ import annotations

import argparse
import logging
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import report
from kafka_controller.audit.engine import create_audit_engine
from kafka_controller.audit.migrate import upgrade_database
from kafka_controller.audit.writer import AuditWriter
from kafka_controller.controller.auditing import ControllerAuditSink
from kafka_controller.domain.audit_records import PartitionTransition
from kafka_controller.ports import SystemClock
from kafka_controller.testing.postgres import PrivatePostgres, temporary_database

RATE_PER_TICK, TICK_S = 50, 0.1  # 500 transitions a second


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.by_level: dict[str, int] = {}

    def emit(self, record: logging.LogRecord) -> None:
        self.by_level[record.levelname] = self.by_level.get(record.levelname, 0) + 1


def transitions(n: int) -> list[PartitionTransition]:
    return [
        PartitionTransition(
            f"t{i % 20}",
            i % 50,
            "OnlinePartition",
            "OnlinePartition",
            leader_before=1,
            leader_after=2,
            isr_before=(1, 2),
            isr_after=(2,),
        )
        for i in range(n)
    ]


def stored(url: str) -> tuple[int, int, int | None, int | None]:
    engine = create_audit_engine(url)
    try:
        with engine.connect() as conn:
            raw: Any = conn.exec_driver_sql(
                "SELECT count(*), count(DISTINCT sequence), min(sequence), max(sequence) "
                "FROM partition_transitions"
            ).one()
            return int(raw[0]), int(raw[1]), raw[2], raw[3]
    finally:
        engine.dispose()


def spool_full(outage_s: float, lines: Lines) -> dict[str, Any]:
    spool = Path(tempfile.mkdtemp(prefix="kc-bench-spool-"))
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(spool)], check=True)
    try:
        with PrivatePostgres() as pg, temporary_database(pg.url, prefix="bench") as url:
            upgrade_database(url)
            pg.stop("immediate")
            writer = AuditWriter(url, spool_dir=spool)
            sink = ControllerAuditSink(writer, 1, SystemClock(), lambda: 3)
            recorded, started = 0, time.monotonic()
            while time.monotonic() - started < outage_s:
                sink.record(transitions(RATE_PER_TICK))  # type: ignore[arg-type]
                recorded += RATE_PER_TICK
                time.sleep(TICK_S)
            during = dict(lines.by_level)
            down = writer.stats()
            pg.start()
            back = time.monotonic()
            drained = writer.wait_replayed(600)
            drain_s = time.monotonic() - back
            stats = writer.close()
            rows, distinct, low, high = stored(url)
    finally:
        subprocess.run(["umount", "--lazy", str(spool)], check=False)
    return {
        "outage_seconds": outage_s,
        "recorded": recorded,
        "spooled_before_the_disk_filled": down.spool_rows,
        "held_in_memory": down.pending,
        "log_lines_during_outage": during,
        "drained": drained,
        "drain_seconds_after_start": round(drain_s, 2),
        "stored_rows": rows,
        "stored_once": rows == distinct == recorded and low == 1 and high == recorded,
        "replayed": stats.replayed,
    }


def sqlite_deleted(run_s: float) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="kc-bench-sqlite-"))
    db = work / "audit.db"
    url = f"sqlite:///{db}"
    writer = AuditWriter(url, spool_dir=work / "spool")
    sink = ControllerAuditSink(writer, 1, SystemClock(), lambda: 3)
    recorded, started, deleted_at, back_s = 0, time.monotonic(), None, None
    before = 0
    while time.monotonic() - started < run_s or back_s is None:
        sink.record(transitions(RATE_PER_TICK))  # type: ignore[arg-type]
        recorded += RATE_PER_TICK
        if deleted_at is None and time.monotonic() - started >= run_s / 2:
            before = recorded
            for f in work.glob("audit.db*"):
                f.unlink()
            deleted_at = time.monotonic()
        elif deleted_at is not None and back_s is None and db.exists():
            try:
                if stored(url)[0] > 0:
                    back_s = time.monotonic() - deleted_at
            except Exception:  # no schema yet
                pass
        time.sleep(TICK_S)
    writer.wait_replayed(600)
    writer.close()
    rows, distinct, low, high = stored(url)
    return {
        "recorded": recorded,
        "recorded_before_deletion": before,
        "new_file_has_rows_after_seconds": round(back_s, 2),
        "stored_rows": rows,
        "lowest_sequence_stored": low,
        "every_row_after_the_deletion_once": low is not None
        and rows == distinct == recorded - low + 1  # low..recorded, each once
        and high == recorded
        and low <= before + 1,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--outage-seconds", type=float, default=75.0)
    args = parser.parse_args()
    lines = Lines()
    logger = logging.getLogger("kafka_controller.audit.writer")
    logger.addHandler(lines)
    logger.setLevel(logging.INFO)
    report(
        "audit_store_faults",
        {
            "spool_full": spool_full(args.outage_seconds, lines),
            "sqlite_deleted": sqlite_deleted(min(args.outage_seconds, 20.0)),
        },
    )


if __name__ == "__main__":
    main()
