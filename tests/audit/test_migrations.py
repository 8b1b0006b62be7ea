"""Alembic: a database at the previous revision upgrades in place, with its rows intact."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, inspect, select, text

from kafka_controller.audit.engine import AuditStoreError
from kafka_controller.audit.migrate import (
    current_revision,
    downgrade_database,
    head_revision,
    upgrade_database,
)
from kafka_controller.audit.schema import VERSION_TABLE
from kafka_controller.audit.views import VIEWS
from kafka_controller.domain.errors import InvalidArgumentError
from kafka_controller.testing.postgres import free_port
from tests.audit.test_ddl import schema_diff

_INSERT_0001 = text(
    "INSERT INTO partition_transitions (controller_id, controller_epoch, sequence, topic, partition, "
    "from_state, to_state, leader_before, leader_after, unclean, outcome, timestamp_ms) VALUES "
    "(:cid, 7, :seq, 'orders', :p, 'OfflinePartition', 'OnlinePartition', -1, :leader, :unclean, 'ok', :ts)"
)


def test_the_chain_ends_at_0004() -> None:
    assert head_revision() == "0004"


def test_upgrade_from_the_previous_revision_keeps_rows(blank_url: str, engine_for) -> None:  # type: ignore[no-untyped-def]
    assert upgrade_database(blank_url, "0001") == "0001"
    engine = engine_for(blank_url)
    rows = [
        {"cid": 2, "seq": i, "p": i % 4, "leader": i % 3, "unclean": i % 5 == 0, "ts": 1000 + i}
        for i in range(40)
    ]
    with engine.begin() as conn:
        assert not set(VIEWS) & set(inspect(conn).get_view_names())
        conn.execute(_INSERT_0001, rows)

    assert upgrade_database(blank_url) == head_revision()

    with engine.connect() as conn:
        assert current_revision(conn) == head_revision()
        assert schema_diff(conn) == []
        stored = conn.execute(
            text(
                "SELECT sequence, partition, leader_after, unclean, timestamp_ms "
                "FROM partition_transitions ORDER BY sequence"
            )
        ).all()
        assert [(r[0], r[1], r[2], bool(r[3]), r[4]) for r in stored] == [
            (r["seq"], r["p"], r["leader"], r["unclean"], r["ts"]) for r in rows
        ]
        # the views revision 0002 added see the rows written before it existed
        unclean = conn.execute(select(func.count()).select_from(text("v_unclean_elections"))).scalar_one()
        assert unclean == sum(1 for r in rows if r["unclean"])


def test_upgrade_is_idempotent_and_downgrade_removes_the_views(blank_url: str, engine_for) -> None:  # type: ignore[no-untyped-def]
    assert upgrade_database(blank_url) == head_revision()
    assert upgrade_database(blank_url) == head_revision()
    engine = engine_for(blank_url)
    with engine.connect() as conn:
        assert set(inspect(conn).get_view_names()) == set(VIEWS)
        assert conn.execute(text(f"SELECT count(*) FROM {VERSION_TABLE}")).scalar_one() == 1
    assert downgrade_database(blank_url, "0001") == "0001"
    with engine.connect() as conn:
        assert not set(VIEWS) & set(inspect(conn).get_view_names())
        assert inspect(conn).has_table("partition_transitions")
    assert downgrade_database(blank_url, "base") == "base"
    with engine.connect() as conn:
        assert not inspect(conn).has_table("partition_transitions")
    assert upgrade_database(blank_url) == head_revision()


def test_concurrent_upgrades_migrate_exactly_once(blank_url: str, engine_for) -> None:  # type: ignore[no-untyped-def]
    results: list[str] = []
    errors: list[BaseException] = []

    def upgrade() -> None:
        try:
            results.append(upgrade_database(blank_url))
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=upgrade) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == []
    assert results == [head_revision()] * 4
    with engine_for(blank_url).connect() as conn:
        assert conn.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalars().all() == [
            head_revision()
        ]


@pytest.mark.parametrize(
    "url, message",
    [
        ("not a url", "bad audit database URL"),
        ("mysql://h/db", "backend 'mysql' is not supported"),
        ("sqlite://", "in-memory SQLite database is not durable"),
    ],
)
def test_bad_urls_are_refused_with_one_line(url: str, message: str) -> None:
    with pytest.raises(InvalidArgumentError, match=message) as e:
        upgrade_database(url)
    assert "\n" not in str(e.value)


def test_unreachable_server_is_one_line_audit_store_error() -> None:
    with pytest.raises(AuditStoreError, match="cannot upgrade the audit database") as e:
        upgrade_database(f"postgresql+psycopg://postgres@127.0.0.1:{free_port()}/nowhere")
    assert "\n" not in str(e.value)


def test_missing_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(AuditStoreError, match="does not exist"):
        upgrade_database(f"sqlite:///{tmp_path / 'no' / 'such' / 'audit.db'}")


def test_an_sqlite_upgrade_that_finds_the_database_locked_is_retried(
    blank_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past SQLite's busy timeout on a loaded machine, "database is locked" is retried a few times,
    then surfaces as the one-line AuditStoreError."""
    from kafka_controller.audit import migrate
    from kafka_controller.audit.engine import AuditStoreError

    real = migrate._migrate_once
    calls: list[int] = []

    def locked_once(*args: Any) -> str:
        calls.append(1)
        if len(calls) == 1:
            raise migrate._SqliteLocked(AuditStoreError("cannot upgrade: database is locked"))
        return real(*args)

    monkeypatch.setattr(migrate, "SQLITE_LOCKED_BACKOFF_S", 0.0)
    monkeypatch.setattr(migrate, "_migrate_once", locked_once)
    assert upgrade_database(blank_url) == head_revision() and len(calls) == 2

    def always_locked(*args: Any) -> str:
        calls.append(1)
        raise migrate._SqliteLocked(AuditStoreError("cannot upgrade: database is locked"))

    calls.clear()
    monkeypatch.setattr(migrate, "_migrate_once", always_locked)
    with pytest.raises(AuditStoreError, match="database is locked"):
        upgrade_database(blank_url)
    assert len(calls) == migrate.SQLITE_LOCKED_ATTEMPTS
