"""The audit writer's default transactions stay small: a failover's backlog is converted and
written 5,000 rows at a time, and SQLite's page cache is sized for that, not for 20,000-row batches
(both are held beside a failing-over controller's peak memory)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kafka_controller.audit.migrate import upgrade_database
from kafka_controller.audit.writer import AuditWriter
from kafka_controller.domain.audit_records import ReplicaTransitionColumns
from tests.audit.factories import replica_transition

WAIT = 60.0
ROWS = 12_000


def _bulk(n: int) -> ReplicaTransitionColumns:
    r0 = replica_transition(0)
    bulk = ReplicaTransitionColumns(r0.to_state)
    for i in range(n):
        r = replica_transition(i)
        bulk.add(r.topic, r.partition, r.replica, r.from_state, r.leader_before, r.leader_after,
                 r.isr_before, r.isr_after, r.leader_epoch_before, r.leader_epoch_after)  # fmt: skip
    for name in ("controller_id", "controller_epoch", "event", "operation_id", "sequence", "timestamp_ms"):
        setattr(bulk, name, getattr(r0, name))
    return bulk


def test_a_large_backlog_is_written_in_transactions_of_at_most_5000_rows(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    upgrade_database(url)
    sizes: list[int] = []
    with AuditWriter(url, spool_dir=tmp_path / "spool") as writer:
        write = writer._loader.write

        def counting(batch: Any, **kw: Any) -> int:
            sizes.append(sum(len(rows) for rows in batch.values()))
            return write(batch, **kw)

        writer._loader.write = counting  # type: ignore[method-assign]
        writer.record([_bulk(ROWS)])
        assert writer.flush(WAIT)
        assert writer.stats().written == ROWS
    assert sum(sizes) == ROWS
    assert max(sizes) <= 5_000


def test_the_writers_sqlite_page_cache_is_4_mib(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    upgrade_database(url)
    with AuditWriter(url, spool_dir=tmp_path / "spool") as writer, writer._engine.connect() as conn:
        raw: Any = conn.connection.driver_connection
        assert raw.execute("PRAGMA cache_size").fetchone()[0] == -4096
