"""Audit rows survive ``kill -9`` of the process that recorded them: the audit loses no row.

The controller records a transition after writing it to ZooKeeper; if the process is then killed,
the transition stays in ZooKeeper while its audit row exists only if the writer had made it durable.
A child process records rows through ``AuditWriter`` and SIGKILLs itself right after ``record``
returns; a second writer on the same database and spool (it replays the spool at start-up) must
then find every row in the database. The controller's own path too: rows recorded through its
``ControllerAuditSink`` in the middle of an event (a controlled shutdown that wrote a partition's
ISR and was killed before it ended, as the ``kill_controller`` fault trials do).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from sqlalchemy import Table, create_engine, func, select

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

#: The controller's path: its audit decorator, in the middle of an event, single and bulk records.
CHILD_IN_EVENT = textwrap.dedent(
    """
    import os, signal, sys
    from kafka_controller.audit.writer import AuditWriter
    from kafka_controller.controller.auditing import ControllerAuditSink
    from kafka_controller.domain.audit_records import PartitionTransition, ReplicaTransitionColumns
    from kafka_controller.ports import SystemClock

    url, spool, rows = sys.argv[1], sys.argv[2], int(sys.argv[3])
    writer = AuditWriter(url, spool_dir=spool)
    assert writer.flush(30), "the schema could not be created"
    audit = ControllerAuditSink(writer, 1, SystemClock(), lambda: 3)
    audit.begin_event("ControlledShutdown")
    for i in range(1, rows + 1):
        audit.record([PartitionTransition(
            "t", i % 7, "OnlinePartition", "OnlinePartition", leader_after=1, leader_epoch_after=i,
        )])
    bulk = ReplicaTransitionColumns("OfflineReplica")
    for i in range(rows):
        bulk.add("t", i % 7, i, "OnlineReplica", 1, 1, (1, 2), (1,), i, i + 1)
    audit.record([bulk])
    os.kill(os.getpid(), signal.SIGKILL)  # killed before the event ends
    """
)


def _count(url: str, table: Table = schema.partition_transitions) -> int:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return int(conn.execute(select(func.count()).select_from(table)).scalar_one())
    finally:
        engine.dispose()


def _run_and_kill(child_script: str, url: str, spool: Path) -> None:
    child = subprocess.run(
        [sys.executable, "-c", child_script, url, str(spool), str(ROWS)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert child.returncode == -9, (
        f"the child should have been killed: {child.returncode} {child.stderr[-500:]}"
    )
    survivor = AuditWriter(url, spool_dir=spool)  # replays whatever the dead one spooled
    try:
        assert survivor.wait_replayed(30)
    finally:
        survivor.close()


def test_rows_recorded_before_a_sigkill_reach_the_database(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    _run_and_kill(CHILD, url, tmp_path / "spool")
    assert _count(url) == ROWS, f"{ROWS - _count(url)} of {ROWS} recorded rows were lost to kill -9"


def test_rows_a_controller_recorded_in_an_event_killed_before_its_end_reach_the_database(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    _run_and_kill(CHILD_IN_EVENT, url, tmp_path / "spool")
    found = (_count(url), _count(url, schema.replica_transitions))
    assert found == (ROWS, ROWS), f"of {ROWS} partition and {ROWS} replica rows, {found} survived kill -9"
