"""Audit rows survive ``kill -9`` of the process that recorded them (issue 9: "lose no audit rows").

The controller records a transition after writing it to ZooKeeper; if the process is then killed,
the transition stays in ZooKeeper while its audit row exists only if the writer had made it durable.
A child process records rows through ``AuditWriter`` and SIGKILLs itself right after ``record``
returns; a second writer on the same database and spool (it replays the spool at start-up) must
then find every row in the database.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from sqlalchemy import create_engine, func, select

from kafka_controller.audit import schema
from kafka_controller.audit.writer import AuditWriter

ROWS = 200

CHILD = textwrap.dedent(
    """
    import os, signal, sys
    from kafka_controller.audit.writer import AuditWriter
    from kafka_controller.domain.audit_records import PartitionTransition

    url, spool, rows = sys.argv[1], sys.argv[2], int(sys.argv[3])
    writer = AuditWriter(url, spool_dir=spool)
    assert writer.flush(30), "the schema could not be created"
    for i in range(1, rows + 1):
        writer.record([PartitionTransition(
            "t", i % 7, "OnlinePartition", "OnlinePartition", leader_after=1, leader_epoch_after=i,
            controller_id=1, controller_epoch=3, sequence=i, timestamp_ms=1_700_000_000_000 + i,
        )])
    os.kill(os.getpid(), signal.SIGKILL)  # the controller's process dies right after recording
    """
)


def _count(url: str) -> int:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return int(
                conn.execute(select(func.count()).select_from(schema.partition_transitions)).scalar_one()
            )
    finally:
        engine.dispose()


def test_rows_recorded_before_a_sigkill_reach_the_database(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    spool = tmp_path / "spool"
    child = subprocess.run(
        [sys.executable, "-c", CHILD, url, str(spool), str(ROWS)], capture_output=True, text=True, timeout=120
    )
    assert child.returncode == -9, (
        f"the child should have been killed: {child.returncode} {child.stderr[-500:]}"
    )
    survivor = AuditWriter(url, spool_dir=spool)  # replays whatever the dead one spooled
    try:
        assert survivor.wait_replayed(30)
    finally:
        survivor.close()
    assert _count(url) == ROWS, f"{ROWS - _count(url)} of {ROWS} recorded rows were lost to kill -9"
