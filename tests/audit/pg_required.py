"""PostgreSQL tests fail, not skip, when no server (or no server binaries) can be had: production
runs on PostgreSQL, and a skip let a run without one pass once. ``KAFKA_CONTROLLER_TEST_ALLOW_NO_PG=1``
skips them instead, for a developer without PostgreSQL."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest

ALLOW_NO_PG = "KAFKA_CONTROLLER_TEST_ALLOW_NO_PG"


def no_postgres(why: str) -> NoReturn:
    """Fail the test with ``why`` (one line), or skip it when the developer allowed that."""
    if os.environ.get(ALLOW_NO_PG) == "1":
        pytest.skip(why)
    pytest.fail(f"{why} (set {ALLOW_NO_PG}=1 to skip these tests)", pytrace=False)
