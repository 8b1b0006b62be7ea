"""Not collected on its own (no ``test_`` prefix): ``test_interrupt_leaves_nothing`` runs it through
``.ci/test`` and interrupts that run while this test holds a cluster (ZooKeeper's JVM and a
broker), to see that nothing the run started outlives it."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from kafka_controller.cluster.local import LocalCluster

READY_ENV = "KAFKA_CONTROLLER_INTERRUPT_TARGET_READY"
#: The outer test interrupts well before this; it only bounds a run nobody interrupts.
HOLD_S = 300.0


def test_hold_a_cluster_until_interrupted(tmp_path: Path) -> None:
    ready = Path(os.environ[READY_ENV])
    with LocalCluster(1, data_dir=tmp_path / "cluster") as cluster:
        pids = [p.pid for p in cluster.processes.values()]
        ready.write_text(" ".join(map(str, [os.getpid(), *pids])))
        interrupted = threading.Event()
        assert not interrupted.wait(HOLD_S), "unreachable"
    raise AssertionError(f"nobody interrupted this run within {HOLD_S:g}s")
