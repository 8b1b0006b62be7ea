"""Reads and waits the integration tests share (all poll ZooKeeper against a deadline)."""

from __future__ import annotations

import queue
import subprocess
import threading

from kafka_controller.admin.describe import ClusterView
from kafka_controller.cluster.local import LocalCluster
from kafka_controller.domain.values import LeaderIsrAndControllerEpoch

TIMEOUT = 60.0


def state(cluster: LocalCluster, topic: str, partition: int = 0) -> tuple[int, int, int, tuple[int, ...]]:
    """``(controller_epoch, leader, leader_epoch, isr)`` of a partition's state znode."""
    s = cluster.waits.partition_state(topic, partition)
    assert isinstance(s, LeaderIsrAndControllerEpoch), f"{topic}-{partition} has no state znode"
    lai = s.leader_and_isr
    return s.controller_epoch, lai.leader, lai.leader_epoch, lai.isr


def wait_state(
    cluster: LocalCluster, topic: str, partition: int, *, leader: int, isr: tuple[int, ...] | None = None
) -> tuple[int, int, int, tuple[int, ...]]:
    def probe() -> tuple[int, int, int, tuple[int, ...]] | None:
        s = cluster.waits.partition_state(topic, partition)
        if s is None:
            return None
        lai = s.leader_and_isr
        ok = lai.leader == leader and (isr is None or set(lai.isr) == set(isr))
        return (s.controller_epoch, lai.leader, lai.leader_epoch, lai.isr) if ok else None

    return cluster.waits.wait_until(probe, TIMEOUT, f"{topic}-{partition} led by {leader} with ISR {isr}")


def live_replicas_have_live_leaders(view: ClusterView) -> bool:
    live = {b.id for b in view.brokers}
    return all(not p.offline for p in view.partitions if set(p.replicas) & live)


def wait_all_led(cluster: LocalCluster) -> ClusterView:
    def probe() -> ClusterView | None:
        view = cluster.waits.describe()
        return view if live_replicas_have_live_leaders(view) else None

    return cluster.waits.wait_until(
        probe, TIMEOUT, "every partition with a live replica to have a live leader"
    )


def wait_healthy(cluster: LocalCluster) -> ClusterView:
    def probe() -> ClusterView | None:
        view = cluster.waits.describe()
        return view if all(not p.offline and not p.under_replicated for p in view.partitions) else None

    return cluster.waits.wait_until(probe, TIMEOUT, "every partition to have a live leader and a full ISR")


def pump_stderr(proc: subprocess.Popen[str]) -> queue.Queue[str | None]:
    """Every stderr line of ``proc`` on a queue, then None at its end (read by a daemon thread), so
    that a test can wait for a line with a timeout instead of blocking on the pipe."""
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.put(line.rstrip("\n"))
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    return lines
