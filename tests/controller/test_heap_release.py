"""After a failover, and after the audit writer has written a large backlog, the C heap's free
pages go back to the OS (``kafka_controller.heap``): the peak stays, what stays resident drops."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafka_controller import heap as _heap
from kafka_controller.audit import writer as writer_module
from kafka_controller.audit.migrate import upgrade_database
from kafka_controller.audit.writer import AuditWriter
from kafka_controller.controller import failover as failover_module
from tests.audit.factories import replica_transition
from tests.controller.cluster import Cluster


class Calls:
    def __init__(self) -> None:
        self.n = 0

    def __call__(self) -> bool:
        self.n += 1
        return True


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    c = Cluster()
    yield c
    c.close()


def test_release_free_heap_is_available_on_linux_and_never_raises() -> None:
    if sys.platform.startswith("linux"):
        assert _heap._TRIM is not None  # glibc on the supported platform
    assert _heap.release_free_heap() in (True, False)


def test_a_failover_releases_the_free_heap_once_it_is_done(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = Calls()
    monkeypatch.setattr(failover_module, "release_free_heap", calls)
    cluster.admin.create_topic("t", {0: [0]})
    assert calls.n == 0
    cluster.start_all([0])
    assert cluster.active().controller.is_active
    assert calls.n == 1


def test_the_audit_writer_releases_the_free_heap_after_a_large_backlog_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = Calls()
    monkeypatch.setattr(writer_module, "release_free_heap", calls)
    monkeypatch.setattr(writer_module, "TRIM_AFTER_ROWS", 50)
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    upgrade_database(url)
    with AuditWriter(url, spool_dir=tmp_path / "spool") as writer:
        writer.record([replica_transition(i, sequence=i + 1) for i in range(20)])
        assert writer.flush(60)
    assert calls.n == 0  # 20 rows: below the threshold, even once closed
    with AuditWriter(url, spool_dir=tmp_path / "spool-2") as writer:
        writer.record([replica_transition(i, sequence=i + 21) for i in range(60)])
        assert writer.flush(60)
    assert writer.stats().written == 60
    assert calls.n == 1  # the queue ran empty after 60 rows (at the latest as the writer closed)
