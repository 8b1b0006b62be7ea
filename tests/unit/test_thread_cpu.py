"""``thread_cpu``: the CPU a step used, by thread, as the controller logs it after a failover and a
controlled shutdown. Real threads burning real CPU (measured with ``thread_time``, not slept)."""

from __future__ import annotations

import json
import sys
import threading
import time

import pytest

from kafka_controller.thread_cpu import CpuAccount, thread_cpu_seconds

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/task")


def _burn(seconds: float) -> None:
    start = time.thread_time()
    while time.thread_time() - start < seconds:
        pass


def _thread(name: str, target: object, *args: object) -> threading.Thread:
    t = threading.Thread(target=target, args=args, name=name, daemon=True)  # type: ignore[arg-type]
    t.start()
    return t


def test_each_live_thread_is_read_by_name() -> None:
    release = threading.Event()
    waiting = _thread("waiting-thread", release.wait, 30)
    try:
        names = {name for name, _ in thread_cpu_seconds().values()}
        assert {"MainThread", "waiting-thread"} <= names
        assert all(cpu >= 0 for _, cpu in thread_cpu_seconds().values())
    finally:
        release.set()
        waiting.join()


def test_only_the_cpu_used_since_the_account_opened_counts() -> None:
    first_done, go, second_done, release = (threading.Event() for _ in range(4))

    def busy_then_wait() -> None:
        _burn(0.3)  # before the account: not counted
        first_done.set()
        go.wait(30)
        _burn(0.3)  # inside it: counted
        second_done.set()
        release.wait(30)

    worker = _thread("busy-worker", busy_then_wait)
    try:
        assert first_done.wait(30)
        account = CpuAccount()
        go.set()
        assert second_done.wait(30)
        shares = account.by_thread()
    finally:
        go.set()
        release.set()
        worker.join()
    assert 0.2 <= shares["busy-worker"] <= 0.45  # /proc counts 10 ms ticks
    assert shares["process"] >= shares["busy-worker"] - 0.02
    assert next(iter(shares)) == "process"


def test_a_thread_that_ended_counts_in_the_total_as_ended() -> None:
    account = CpuAccount()
    _thread("short-lived", _burn, 0.3).join()
    shares = account.by_thread()
    assert "short-lived" not in shares
    assert shares["ended threads"] >= 0.2  # /proc counts 10 ms ticks
    assert shares["process"] >= shares["ended threads"]


def test_the_summary_is_one_json_object_with_the_total_first() -> None:
    account = CpuAccount()
    _burn(0.05)
    summary = json.loads(account.summary())
    assert next(iter(summary)) == "process" and summary["process"] >= 0.04
    assert summary.get("MainThread", 0.0) >= 0.03  # its burn, in 10 ms ticks
