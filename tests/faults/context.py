"""What a fault trial works on: its seed and random choices, the cluster, and the observer.

``TrialContext`` holds the ``LocalCluster`` (real broker processes on the suite's own embedded
ZooKeeper), the trial's ``random.Random`` (every choice comes from it, so a seed replays a trial),
the audit store's URL and, for outage trials, the private PostgreSQL server. ``Observer`` samples
ZooKeeper and every reachable broker's replicas in the background and feeds the
``InvariantChecker``; paused brokers are skipped (a frozen process answers nothing).
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from kafka_controller.broker import apis as A
from kafka_controller.cluster.local import LocalCluster
from kafka_controller.domain.errors import KafkaControllerError
from kafka_controller.domain.values import TopicPartition
from kafka_controller.testing.fencing_invariants import ActedOn
from kafka_controller.testing.invariants import InvariantChecker, ReplicaView, Snapshot, read_snapshot
from kafka_controller.testing.violation import Violation
from kafka_controller.transport.client import TransportClient
from kafka_controller.zk.embedded import EmbeddedZooKeeper
from kafka_controller.zk.ensemble import ZooKeeperEnsemble

log = logging.getLogger("tests.faults")
T = TypeVar("T")

SAMPLE_INTERVAL_S = 0.4
VIEW_TIMEOUT_S = 2.0


class TrialFailed(AssertionError):
    """The workload or the cluster did not get where it had to within the trial's deadline."""


@dataclass
class TrialContext:
    seed: int
    rng: random.Random
    zk: EmbeddedZooKeeper | ZooKeeperEnsemble
    cluster: LocalCluster
    audit_url: str
    deadline: float
    postgres: Any = None  # a PrivatePostgres for audit-outage trials
    net: Any = None  # a FaultNet (hosts in network namespaces) for network-fault trials
    paused: set[int] = field(default_factory=set)
    notes: list[str] = field(default_factory=list)
    #: Held around every stop-then-start of a broker, so that a workload restarting brokers and a
    #: fault repairing them never start the same broker twice. Kills and pauses do not take it.
    lifecycle: threading.RLock = field(default_factory=threading.RLock)
    #: Controller epochs whose controller was SIGKILLed (its unflushed audit rows die with it).
    killed_controller_epochs: list[int] = field(default_factory=list)
    #: Seconds from a network or quorum heal until the cluster converged (faults that heal).
    convergence_s: float | None = None

    def left(self) -> float:
        return max(1.0, self.deadline - time.monotonic())

    def note(self, text: str) -> None:
        log.info("trial %d: %s", self.seed, text)
        self.notes.append(text)

    def wait(self, probe: Callable[[], T | None], what: str, timeout: float | None = None) -> T:
        """Poll ``probe`` until truthy; ``TrialFailed`` naming ``what`` at the deadline."""
        try:
            return self.cluster.waits.wait_until(
                probe, min(self.left(), timeout or self.left()), what, interval=0.1
            )
        except KafkaControllerError as e:
            raise TrialFailed(str(e)) from None

    def controller(self) -> int:
        """The active controller's id (waits for one)."""
        return self.wait(lambda: self.cluster.controller()[0], "a controller")

    def kill(self, broker: int) -> None:
        """SIGKILL ``broker``, remembering the epoch if it was the active controller."""
        controller, epoch = self.cluster.controller()
        if controller == broker and epoch is not None:
            self.killed_controller_epochs.append(epoch)
        self.cluster.kill_broker(broker)

    def crash(self, broker: int) -> None:
        """SIGKILL ``broker`` from outside its supervisor (an OOM kill): the cluster closes its session."""
        controller, epoch = self.cluster.controller()
        if controller == broker and epoch is not None:
            self.killed_controller_epochs.append(epoch)
        self.cluster.crash_broker(broker)

    def running(self) -> list[int]:
        return [b for b in self.cluster.running_broker_ids() if b not in self.paused]

    def broker_views(self, brokers: Iterable[int] | None = None) -> tuple[list[ReplicaView], ActedOn]:
        """Each broker's own replicas and the controllers it acted on per epoch (DescribeReplicas),
        from those that answer in time."""
        out: list[ReplicaView] = []
        acted_on: dict[int, tuple[tuple[int, tuple[int, ...]], ...]] = {}
        for b in self.running() if brokers is None else brokers:
            client = TransportClient(
                self.cluster.addresses.broker_host(b), self.cluster.ports[b], timeout_s=VIEW_TIMEOUT_S
            )
            try:
                response = client.request(A.DESCRIBE_REPLICAS, None)
            except KafkaControllerError:
                continue
            finally:
                client.close()
            acted_on[b] = response.acted_on
            out += [
                ReplicaView(
                    b,
                    TopicPartition(r.topic, r.partition),
                    r.leader_epoch,
                    r.is_leader,
                    r.log_end_offset,
                    r.high_watermark,
                )
                for r in response.replicas
            ]
        return out, acted_on

    def snapshot(self) -> Snapshot:
        return read_snapshot(self.cluster.store, *self.broker_views())


class Observer:
    """Samples the cluster every ``SAMPLE_INTERVAL_S`` on a thread, until ``stop``."""

    def __init__(self, trial: TrialContext, checker: InvariantChecker) -> None:
        self.trial = trial
        self.checker = checker
        self.violations: list[Violation] = []
        self.samples = 0
        self.skipped: dict[str, int] = {}  # why samples were skipped, by error type
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name=f"observer-{trial.seed}", daemon=True)

    def start(self) -> Observer:
        self._thread.start()
        return self

    def observe_once(self) -> Snapshot | None:
        try:
            snap = self.trial.snapshot()
        except Exception as e:  # ZooKeeper restarting, a broker going: skip this sample
            kind = type(e).__name__
            self.skipped[kind] = self.skipped.get(kind, 0) + 1
            log.debug("trial %d: sample skipped: %s: %s", self.trial.seed, kind, e)
            return None
        with self._lock:
            self.samples += 1
            self.violations += self.checker.observe(snap)
        return snap

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_INTERVAL_S):
            self.observe_once()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10.0)
