"""``heap.limit_malloc_arenas``: a broker's threads share a couple of glibc arenas instead of one
each, so that a chunk one thread frees is there for the others (the failover's peak memory)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kafka_controller import heap
from kafka_controller.cli import broker_cmd

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or heap._LIBC is None, reason="glibc's mallopt only"
)

ROOT = Path(__file__).resolve().parents[2]

#: Six threads each allocate a block above Python's small-object pools (so from glibc), held until
#: all have; then glibc's own statistics (``malloc_stats``: one "Arena N:" line per arena) go to stderr.
PROBE = """
import ctypes, sys, threading
from kafka_controller import heap
if sys.argv[1] == "limit":
    heap.limit_malloc_arenas(2)
barrier = threading.Barrier(7)
kept = []
def work():
    kept.append(bytearray(1 << 16))
    barrier.wait()
threads = [threading.Thread(target=work) for _ in range(6)]
for t in threads:
    t.start()
barrier.wait()
for t in threads:
    t.join()
ctypes.CDLL("libc.so.6").malloc_stats()
"""


def arenas(mode: str, **env: str) -> int:
    environ = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    environ.update(env, PYTHONPATH=str(ROOT))
    done = subprocess.run(
        [sys.executable, "-c", PROBE, mode],
        env=environ,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return sum(line.startswith("Arena ") for line in done.stderr.splitlines())


def test_threads_share_at_most_the_arenas_allowed() -> None:
    assert arenas("none") > 2  # glibc's default: an arena per thread
    assert arenas("limit") <= 2


def test_an_operators_malloc_arena_max_wins() -> None:
    assert arenas("limit", MALLOC_ARENA_MAX="4") > 2


def test_the_broker_command_limits_the_arenas_before_it_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[object, ...]] = []

    def limit(*a: object) -> bool:
        calls.append(a)
        return True

    monkeypatch.setattr(heap, "limit_malloc_arenas", limit)

    class Stop(Exception):
        pass

    def no_server(*_a: object, **_k: object) -> None:
        assert calls == [()], "the arenas are limited before the server starts a thread"
        raise Stop

    monkeypatch.setattr("kafka_controller.broker.server.BrokerServer", no_server)
    monkeypatch.setattr("logging.basicConfig", lambda **_k: None)
    args = argparse.Namespace(
        broker_id=1,
        config=[],
        config_file=None,
        listener="127.0.0.1:0",
        metrics_port=None,
        metrics_host=None,
        log_level="INFO",
        zookeeper="127.0.0.1:2181",
        rack=None,
        audit_url=None,
        audit_spool_dir=None,
        data_dir=None,
    )
    with pytest.raises(Stop):
        broker_cmd.run(args)
    assert calls == [()]
