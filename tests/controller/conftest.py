"""The in-process cluster most controller tests run on; a module that needs other settings
defines its own ``cluster`` fixture, which takes precedence."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.controller.cluster import Cluster


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    c = Cluster()
    yield c
    c.close()
