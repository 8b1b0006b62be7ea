"""Repeating errors are logged once per interval with a count of what was held back, on an injected
clock: the helper itself, and the writer's spool errors through it."""

from __future__ import annotations

import errno
import logging
from pathlib import Path

import pytest

from kafka_controller.audit.repeat_log import RepeatedLog
from kafka_controller.audit.writer import AuditWriter
from kafka_controller.testing.clock import ManualClock
from kafka_controller.testing.postgres import free_port
from tests.audit.factories import partition_transition
from tests.broker.helpers import wait_until

LOGGER = "kafka_controller.audit.writer"


def lines(caplog: pytest.LogCaptureFixture, needle: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if needle in r.getMessage()]


def test_first_line_at_once_then_one_per_interval_with_the_count(caplog: pytest.LogCaptureFixture) -> None:
    clock = ManualClock()
    repeated = RepeatedLog(logging.getLogger("test.repeat"), clock, interval=30.0)
    caplog.set_level(logging.INFO, logger="test.repeat")

    assert repeated.log("disk", logging.ERROR, "disk full: %s", "ENOSPC") is True
    for _ in range(9):
        clock.advance(1.0)
        assert repeated.log("disk", logging.ERROR, "disk full: %s", "ENOSPC") is False
    assert repeated.log("other", logging.WARNING, "another trouble") is True  # keys are apart
    clock.advance(21.0)  # 30 s since the first line
    assert repeated.log("disk", logging.ERROR, "disk full: %s", "ENOSPC") is True
    assert lines(caplog, "disk full") == [
        "disk full: ENOSPC",
        "disk full: ENOSPC (9 more like this in the last 30 s)",
    ]
    clock.advance(30.0)
    assert repeated.log("disk", logging.ERROR, "disk full: %s", "ENOSPC") is True  # nothing held back
    assert lines(caplog, "disk full")[-1] == "disk full: ENOSPC"

    assert repeated.resolved("disk", "disk writable again") == 12
    assert lines(caplog, "writable")[-1] == "disk writable again (after 12 failures)"
    assert repeated.resolved("disk", "disk writable again") == 0  # once
    assert repeated.log("disk", logging.ERROR, "disk full: %s", "ENOSPC") is True  # a new streak


def test_a_failing_spool_is_logged_once_per_interval_by_the_writer(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The database is unreachable and every spool append fails with ENOSPC: the writer retries
    every cycle (about every 20 ms here) but logs the failure once until the injected clock has
    moved a whole interval, then once more with the count."""
    clock = ManualClock(start_s=5_000.0)
    attempts: list[int] = []

    def full(batch: object) -> None:
        attempts.append(1)
        raise OSError(errno.ENOSPC, "No space left on device")

    caplog.set_level(logging.WARNING, logger=LOGGER)
    unreachable = f"postgresql+psycopg://postgres@127.0.0.1:{free_port()}/gone"
    writer = AuditWriter(
        unreachable, spool_dir=tmp_path / "spool", flush_interval=0.02, clock=clock, error_log_interval=60.0
    )
    try:
        writer._spool.append = full  # type: ignore[method-assign]  # the disk under the spool is full
        writer.record([partition_transition(i) for i in range(1, 11)])
        wait_until(lambda: len(attempts) >= 20, "20 attempts to spool the batch")
        assert len(lines(caplog, "cannot take a batch")) == 1
        clock.advance(60.0)
        seen = len(attempts)
        wait_until(lambda: len(attempts) >= seen + 2, "more attempts after the interval")
        logged = lines(caplog, "cannot take a batch")
        assert len(logged) == 2
        assert "holding 10 records in memory" in logged[0]
        held_back = int(logged[1].split("(")[1].split(" more")[0])
        assert held_back >= 19
        assert writer.stats().pending == 10  # held, not lost
    finally:
        writer.close(timeout=2)
