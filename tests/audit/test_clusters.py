"""One audit store for several clusters: revision 0004 upgrades a store in place (old rows keep no
cluster), idempotency keys hold within a cluster, the writer stamps its cluster on every row, and a
cluster id is never anything the loaders could not write as a literal."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import Engine, func, select, text
from sqlalchemy.exc import IntegrityError

from kafka_controller.audit.migrate import current_revision, head_revision, upgrade_database
from kafka_controller.audit.operations import OperationLog
from kafka_controller.audit.reports import build_report
from kafka_controller.audit.schema import checked_cluster_id, controller_events, partition_transitions
from kafka_controller.audit.writer import AuditWriter
from kafka_controller.cli.main import main
from kafka_controller.domain.errors import InvalidArgumentError
from tests.audit.factories import controller_event, partition_transition
from tests.audit.test_ddl import schema_diff

_INSERT_0003 = text(
    "INSERT INTO partition_transitions (controller_id, controller_epoch, sequence, topic, partition, "
    "from_state, to_state, unclean, outcome, timestamp_ms, dry_run) VALUES "
    "(1, 1, :seq, 'orders', 0, 'NewPartition', 'OnlinePartition', false, 'ok', :ts, false)"
)
_INSERT_KEY = text(
    "INSERT INTO partition_transitions (controller_id, controller_epoch, sequence, topic, partition, "
    "from_state, to_state, unclean, outcome, timestamp_ms, dry_run, cluster_id) VALUES "
    "(1, 1, 7, 'orders', 0, 'NewPartition', 'OnlinePartition', false, 'ok', 1, false, :cluster) "
    "ON CONFLICT DO NOTHING"
)


def test_audit_upgrade_takes_an_0003_store_to_head_keeping_its_rows_without_a_cluster(
    blank_url: str, engine_for: Callable[[str], Engine], capsys: pytest.CaptureFixture[str]
) -> None:
    assert upgrade_database(blank_url, "0003") == "0003"
    engine = engine_for(blank_url)
    with engine.begin() as conn:
        conn.execute(_INSERT_0003, [{"seq": i, "ts": 1000 + i} for i in range(25)])
        conn.execute(
            text(
                "INSERT INTO operations (operation_id, kind, requester, reason, dry_run, status, started_ms) "
                "VALUES ('op-1', 'rolling_restart', 'bob', 'why', false, 'succeeded', 5)"
            )
        )
    assert main(["audit", "upgrade", "--url", blank_url]) == 0
    with engine.connect() as conn:
        assert current_revision(conn) == head_revision() == "0004"
        assert schema_diff(conn) == []
        rows = conn.execute(
            text("SELECT sequence, cluster_id FROM partition_transitions ORDER BY sequence")
        ).all()
        assert rows == [(i, None) for i in range(25)]
        assert conn.execute(text("SELECT kind, cluster_id, principal FROM operations")).all() == [
            ("rolling_restart", None, None)
        ]
    # a replayed old row (no cluster) is still a duplicate: the key holds for rows without one
    with pytest.raises(IntegrityError), engine.begin() as conn:
        conn.execute(_INSERT_0003, {"seq": 3, "ts": 1003})
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(partition_transitions)).scalar_one() == 25
    # one cluster in the store: the report reads as it did, with no option
    assert build_report(blank_url)["summary"]["partition_transitions"] == 25


def test_the_same_controller_key_in_two_clusters_is_two_rows(
    blank_url: str, engine_for: Callable[[str], Engine]
) -> None:
    upgrade_database(blank_url)
    engine = engine_for(blank_url)
    with engine.begin() as conn:
        for cluster in ("clusterA", "clusterB", "clusterA", None, None):
            conn.execute(_INSERT_KEY, {"cluster": cluster})
        by_cluster = conn.execute(
            select(partition_transitions.c.cluster_id, func.count()).group_by(
                partition_transitions.c.cluster_id
            )
        ).all()
    assert dict(by_cluster) == {"clusterA": 1, "clusterB": 1, None: 1}


def test_the_writer_stamps_its_cluster_on_every_row(
    audit_url: str, engine_for: Callable[[str], Engine], tmp_path: Path
) -> None:
    for cluster, spool in (("clusterA", "a"), ("clusterB", "b")):
        writer = AuditWriter(audit_url, spool_dir=tmp_path / spool, flush_interval=0.05, cluster_id=cluster)
        # the same controller, epoch and sequences in both clusters
        writer.record([partition_transition(i) for i in range(1, 6)] + [controller_event(3)])
        writer.flush(30)
        stats = writer.close(30)
        assert stats.written == 6, stats
    engine = engine_for(audit_url)
    with engine.connect() as conn:
        for table in (partition_transitions, controller_events):
            got = dict(
                conn.execute(select(table.c.cluster_id, func.count()).group_by(table.c.cluster_id)).all()
            )
            assert got == (
                {"clusterA": 5, "clusterB": 5}
                if table is partition_transitions
                else {"clusterA": 1, "clusterB": 1}
            )
    only_a = build_report(audit_url, cluster_id="clusterA")
    assert only_a["summary"]["partition_transitions"] == 5 and only_a["filters"]["cluster_id"] == "clusterA"
    assert build_report(audit_url)["summary"]["partition_transitions"] == 10


def test_operations_carry_cluster_and_the_request_that_made_them(sqlite_url: str) -> None:
    with OperationLog(sqlite_url) as log:
        op = log.start_operation(
            "CreateTopics",
            "User:ANONYMOUS",
            "CreateTopics request from 127.0.0.1:5000 (client id 'x'), outside any operation",
            {"api": "CreateTopics"},
            False,
            cluster_id="clusterA",
            principal="User:ANONYMOUS",
            client_id="x",
            client_address="127.0.0.1:5000",
            operation_id="5e6a3a8c-0000-4000-8000-000000000001",
            started_ms=10,
        )
        log.finish_operation(op, "succeeded", finished_ms=12)
        row = log.get_operation(op)
    assert row is not None
    assert (
        row["cluster_id"],
        row["client_id"],
        row["client_address"],
        row["started_ms"],
        row["finished_ms"],
    ) == (
        "clusterA",
        "x",
        "127.0.0.1:5000",
        10,
        12,
    )
    assert build_report(sqlite_url, cluster_id="clusterA")["summary"]["operations"] == 1
    assert build_report(sqlite_url, cluster_id="other")["summary"]["operations"] == 0
    with OperationLog(sqlite_url) as log:
        log.start_operation("topics_create", "alice", "OPS-1", None, False, cluster_id="clusterA")
        log.start_operation("rolling_restart", "bob", "r", None, False, airflow_dag_id="kc_rolling_restart")
    report = build_report(sqlite_url)
    assert report["summary"]["operations_by_source"] == {"airflow": 1, "command_line": 1, "listener": 1}
    from kafka_controller.audit.html import render_html
    from kafka_controller.audit.reports import render_text

    assert (
        "3 operations (1 from Airflow, 1 from the command line or the API, 1 admin requests to a broker"
        in (render_text(report))
    )
    assert "operations admin requests to a broker outside any operation" in render_html(report)


@pytest.mark.parametrize("bad", ["", "a'b", "x" * 65, "id with space", "a;drop", 7])
def test_a_cluster_id_is_checked_before_it_can_reach_sql(bad: object) -> None:
    with pytest.raises(InvalidArgumentError, match="bad cluster id"):
        checked_cluster_id(bad)


def test_a_kafka_cluster_id_passes() -> None:
    assert checked_cluster_id("dv0ZiRgnCln8VvI8dab0hQ") == "dv0ZiRgnCln8VvI8dab0hQ"
    assert checked_cluster_id(None) is None


def _unique_indexes(path: Path) -> dict[str, str]:
    import sqlite3

    with sqlite3.connect(path) as raw:
        rows = raw.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND name LIKE 'uq_%'"
        ).fetchall()
    return {name: " ".join(sql.split()) for name, sql in rows}


def test_the_per_cluster_keys_are_the_same_from_migrations_and_from_sql_files(tmp_path: Path) -> None:
    """Alembic cannot compare expression indexes on SQLite (``schema_diff`` skips them): compare
    the index definitions themselves."""
    import sqlite3

    from tests.audit.test_ddl import SQL_DIR

    migrated, from_sql = tmp_path / "migrated.db", tmp_path / "from-sql.db"
    upgrade_database(f"sqlite:///{migrated}", "0003")
    upgrade_database(f"sqlite:///{migrated}")
    with sqlite3.connect(from_sql) as raw:
        raw.executescript((SQL_DIR / "sqlite" / "schema.sql").read_text())
    cluster = "coalesce(cluster_id, ''))"
    expected = {
        "uq_controller_events_key": f"(broker_id, controller_epoch, kind, started_ms, {cluster}",
        "uq_partition_transitions_key": f"(controller_id, controller_epoch, sequence, {cluster}",
        "uq_replica_transitions_key": f"(controller_id, controller_epoch, sequence, {cluster}",
    }
    for path in (migrated, from_sql):
        got = _unique_indexes(path)
        assert sorted(got) == sorted(expected)
        for name, columns in expected.items():
            assert got[name].startswith(f"CREATE UNIQUE INDEX {name} ON ") and got[name].endswith(columns), (
                got[name]
            )
