"""Fixtures for the audit store: a SQLite file per test, and a private database on the machine's
PostgreSQL per session (``KAFKA_CONTROLLER_TEST_PG_URL`` overrides the server). A server that does
not answer fails the PostgreSQL tests unless the developer allowed a skip (``pg_required``)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, text

from kafka_controller.audit.engine import create_audit_engine
from kafka_controller.audit.migrate import upgrade_database
from kafka_controller.audit.schema import metadata
from kafka_controller.testing.postgres import DEFAULT_ADMIN_URL, server_available, temporary_database
from tests.audit.pg_required import no_postgres

PG_ADMIN_URL = os.environ.get("KAFKA_CONTROLLER_TEST_PG_URL", DEFAULT_ADMIN_URL)


@pytest.fixture(scope="session")
def pg_admin_url() -> str:
    if not server_available(PG_ADMIN_URL):
        no_postgres(f"no PostgreSQL server at {PG_ADMIN_URL}")
    return PG_ADMIN_URL


@pytest.fixture(scope="session")
def pg_session_url(pg_admin_url: str) -> Iterator[str]:
    """One database for the session, at the head revision."""
    with temporary_database(pg_admin_url) as url:
        upgrade_database(url)
        yield url


@pytest.fixture
def pg_url(pg_session_url: str) -> Iterator[str]:
    """The session database, emptied before each test."""
    engine = create_audit_engine(pg_session_url)
    names = ", ".join(t.name for t in metadata.sorted_tables)
    with engine.begin() as conn:
        conn.execute(text(f"TRUNCATE {names} RESTART IDENTITY"))
    engine.dispose()
    yield pg_session_url


@pytest.fixture
def pg_blank_url(pg_admin_url: str) -> Iterator[str]:
    """A fresh database without any schema (for migration tests)."""
    with temporary_database(pg_admin_url) as url:
        yield url


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'audit.db'}"


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def audit_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Both backends, at the head revision and empty."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'audit.db'}"
        upgrade_database(url)
        return url
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture
def engine_for() -> Iterator[Callable[[str], Engine]]:
    engines: list[Engine] = []

    def make(url: str) -> Engine:
        engines.append(create_audit_engine(url))
        return engines[-1]

    yield make
    for e in engines:
        e.dispose()


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def blank_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Both backends, without any schema."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'blank.db'}"
    return str(request.getfixturevalue("pg_blank_url"))
