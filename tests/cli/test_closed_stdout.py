"""``kafka-controller ... | head -1``: a reader that goes away ends the command quietly, with the
exit status of a Unix tool killed by SIGPIPE, and no traceback.

The command runs as a process whose stdout is a pipe already closed at the reading end, so its
first write fails as it would once ``head`` has exited."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from kafka_controller.cli.main import CLOSED_STDOUT_EXIT
from kafka_controller.domain.values import Broker, EndPoint, ReplicaAssignment
from kafka_controller.zk.kazoo_backend import KazooMetadataStore


def run_into_closed_pipe(*argv: str) -> subprocess.CompletedProcess[str]:
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(
            [sys.executable, "-m", "kafka_controller.cli.main", *argv],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    finally:
        os.close(write_end)


@pytest.mark.zk
def test_describe_into_a_closed_pipe(zk_connect: str) -> None:
    store = KazooMetadataStore(zk_connect)
    try:
        for b in (1, 2):
            store.register_broker(Broker(b, (EndPoint("127.0.0.1", 1),)))
        store.create_topic("t", {p: ReplicaAssignment.of([1, 2]) for p in range(4)})
        done = run_into_closed_pipe("describe", "--zookeeper", zk_connect, "--timeout", "20")
    finally:
        store.close()
    assert "Traceback" not in done.stderr and "BrokenPipeError" not in done.stderr, done.stderr
    assert done.stderr == ""
    assert done.returncode == CLOSED_STDOUT_EXIT
