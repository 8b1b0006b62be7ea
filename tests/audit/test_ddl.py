"""``sql/`` is generated from the metadata and builds exactly the schema the metadata describes."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import psycopg
import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect
from sqlalchemy.engine import make_url

from kafka_controller.audit import ddl
from kafka_controller.audit.migrate import current_revision, head_revision, upgrade_database
from kafka_controller.audit.schema import VERSION_TABLE, metadata
from kafka_controller.audit.views import VIEWS

SQL_DIR = Path(__file__).resolve().parents[2] / "sql"


def schema_diff(conn: object) -> list[object]:
    ctx = MigrationContext.configure(conn, opts={"version_table": VERSION_TABLE, "compare_type": True})  # type: ignore[arg-type]
    return list(compare_metadata(ctx, metadata))


def test_committed_sql_files_equal_the_generated_ddl() -> None:
    rendered = ddl.rendered_files()
    assert set(rendered) == {
        "sqlite/schema.sql",
        "sqlite/views.sql",
        "postgresql/schema.sql",
        "postgresql/views.sql",
    }
    for rel, content in rendered.items():
        committed = (SQL_DIR / rel).read_text()
        assert committed == content, f"sql/{rel} is stale: run python -m kafka_controller.audit.ddl"


def test_ddl_check_flags_a_stale_file_and_write_mends_it(tmp_path: Path) -> None:
    assert ddl.main(["--out", str(tmp_path)]) == 0
    assert ddl.main(["--out", str(tmp_path), "--check"]) == 0
    stale = tmp_path / "postgresql" / "views.sql"
    stale.write_text(stale.read_text().replace("v_failover_recovery", "v_something_else"))
    assert ddl.main(["--out", str(tmp_path), "--check"]) == 1
    assert ddl.main(["--out", str(tmp_path)]) == 0
    assert stale.read_text() == ddl.render_views("postgresql")


def test_every_table_and_view_appears_in_both_dialects() -> None:
    for dialect in ddl.DIALECTS:
        schema_sql = ddl.render_schema(dialect)
        views_sql = ddl.render_views(dialect)
        for table in metadata.tables:
            assert f"CREATE TABLE {table} (" in schema_sql
        for view in VIEWS:
            assert f"CREATE VIEW {view} AS" in views_sql


def test_sqlite_files_build_the_metadata_schema_at_head(tmp_path: Path, engine_for) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "from-sql.db"
    with sqlite3.connect(path) as raw:
        raw.executescript((SQL_DIR / "sqlite" / "schema.sql").read_text())
        raw.executescript((SQL_DIR / "sqlite" / "views.sql").read_text())
    engine = engine_for(f"sqlite:///{path}")
    with engine.connect() as conn:
        assert schema_diff(conn) == []
        assert current_revision(conn) == head_revision()
        assert set(inspect(conn).get_view_names()) == set(VIEWS)
    assert upgrade_database(engine) == head_revision()


@pytest.mark.postgres
def test_postgresql_files_build_the_metadata_schema_at_head(pg_blank_url: str, engine_for) -> None:  # type: ignore[no-untyped-def]
    u = make_url(pg_blank_url)
    with psycopg.connect(
        host=u.host, port=u.port, user=u.username, dbname=u.database, autocommit=True
    ) as raw:
        raw.execute((SQL_DIR / "postgresql" / "schema.sql").read_text().encode())
        raw.execute((SQL_DIR / "postgresql" / "views.sql").read_text().encode())
    engine = engine_for(pg_blank_url)
    with engine.connect() as conn:
        assert schema_diff(conn) == []
        assert current_revision(conn) == head_revision()
        assert set(inspect(conn).get_view_names()) == set(VIEWS)
