"""The Airflow test session: one private ``AIRFLOW_HOME``, the metadata DB created once, the repo's
``dags/`` and ``plugins/``, connections through ``AIRFLOW_CONN_*`` environment variables.

Airflow reads its configuration when it is first imported, so the environment is set when this
file is imported, before any test module imports Airflow (and a loud error if one already did).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.airflow.support import REPO, audit_conn_env

AIRFLOW_HOME = Path(tempfile.mkdtemp(prefix="kc-airflow-home-"))

if "airflow" in sys.modules and os.environ.get("AIRFLOW_HOME") != str(AIRFLOW_HOME):
    raise RuntimeError("airflow was imported before tests/airflow/conftest.py could set AIRFLOW_HOME")
os.environ.update(
    {
        "AIRFLOW_HOME": str(AIRFLOW_HOME),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"),
        "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "WARNING",
    }
)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    shutil.rmtree(AIRFLOW_HOME, ignore_errors=True)


@pytest.fixture(scope="session")
def airflow_db() -> Path:
    """Airflow's metadata database in the session's ``AIRFLOW_HOME`` (created once, ~6 s)."""
    from airflow.utils.db import initdb

    initdb()
    return AIRFLOW_HOME


@pytest.fixture
def audit_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'audit.db'}"


@pytest.fixture
def audit_env(monkeypatch: pytest.MonkeyPatch, audit_url: str) -> Iterator[str]:
    monkeypatch.setenv(*audit_conn_env(audit_url))
    yield audit_url
