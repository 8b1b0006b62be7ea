"""The controller's account of its process's CPU, by thread, logged once a failover and once a
controlled shutdown is done (``kafka_controller.thread_cpu``; ``bench/failover.py`` and
``bench/controlled_shutdown.py`` read these lines). Real controllers on the in-memory tree."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from kafka_controller.domain.values import TopicPartition
from tests.controller.cluster import Answer, Cluster, wait_until

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/task")


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    c = Cluster()
    yield c
    c.close()


def _accounts(caplog: pytest.LogCaptureFixture, needle: str) -> list[dict[str, Any]]:
    return [
        json.loads(r.getMessage().split("(s): ", 1)[1]) for r in caplog.records if needle in r.getMessage()
    ]


def test_a_failover_and_a_controlled_shutdown_log_their_cpu_by_thread(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="kafka_controller.controller"):
        cluster.start_all([0, 1, 2])
        active = cluster.active()
        wait_until(lambda: bool(_accounts(caplog, "Failover CPU by thread")), "the failover's CPU line")
        cluster.create_topic("t", {0: [0, 1, 2], 1: [1, 2, 0], 2: [2, 0, 1]})
        tp = TopicPartition("t", 2)
        cluster.wait_state(tp, 1, 2, 0, "topic creation")
        answer = Answer()
        victim = 2 if active.id != 2 else 1
        active.controller.controlled_shutdown(victim, cluster.brokers[victim].epoch, answer)
        assert not isinstance(answer.get(), Exception)
        needle = f"CPU by thread while shutting down broker {victim}"
        wait_until(lambda: bool(_accounts(caplog, needle)), "the controlled shutdown's CPU line")
    for account in _accounts(caplog, "Failover CPU by thread") + _accounts(caplog, needle):
        assert next(iter(account)) == "process" and account["process"] >= 0
        assert {"other threads", "ended threads"} <= account.keys()
        threads = {k: v for k, v in account.items() if k != "process"}
        assert all(v >= 0 for v in threads.values())
        # every share is within the process's total (ticks of 10 ms against a precise total)
        assert sum(threads.values()) <= account["process"] + 0.01 * len(threads) + 0.01
