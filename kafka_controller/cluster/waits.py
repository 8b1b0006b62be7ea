"""Reads and readiness waits of a ``LocalCluster``.

Every wait polls ZooKeeper (or a broker's Metadata API) against a deadline. ZooKeeper and
transport errors count as "not yet"; a broker process that died ends the wait at once. A timeout
raises ``ClusterError`` naming what was not reached and, when a broker crashed, its log tail.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, TypeVar

from kafka_controller.admin.describe import ClusterView, read_cluster_view
from kafka_controller.cluster.process import BrokerProcess
from kafka_controller.domain.errors import KafkaControllerError, MetadataStoreError
from kafka_controller.domain.values import LeaderIsrAndControllerEpoch, TopicPartition

if TYPE_CHECKING:
    from kafka_controller.broker.admin_client import AdminClient
    from kafka_controller.zk.store import ZkMetadataStore

T = TypeVar("T")
POLL_S = 0.05


class ClusterError(KafkaControllerError):
    """A cluster operation did not reach its goal in time; the message says what and where to look."""


def time_left(deadline: float) -> float:
    """Seconds until the ``time.monotonic()`` ``deadline``, never negative."""
    return max(0.0, deadline - time.monotonic())


class ClusterWaits:
    """``store`` and ``admin`` hand out the cluster's ZooKeeper store and admin client (both made
    when the cluster starts, so they are asked for at each use); ``processes`` is the cluster's own
    broker id -> process table (shared), read for crashed brokers; ``broker_ids`` are the cluster's
    brokers, and ``known(broker_id)`` returns one of them or raises, naming the cluster's ids."""

    def __init__(
        self,
        store: Callable[[], ZkMetadataStore],
        admin: Callable[[], AdminClient],
        processes: Mapping[int, BrokerProcess],
        broker_ids: Sequence[int],
        known: Callable[[int], int],
    ) -> None:
        self._store = store
        self._admin = admin
        self._processes = processes
        self._broker_ids = broker_ids
        self._known = known

    def running_broker_ids(self) -> list[int]:
        """The cluster's brokers whose process runs, in broker id order."""
        running = {b for b, p in self._processes.items() if p.is_running()}
        return [b for b in self._broker_ids if b in running]

    # -- reads -----------------------------------------------------------------------------------------
    def controller(self) -> tuple[int | None, int | None]:
        """``(controller id or None, controller epoch or None)`` from ZooKeeper."""
        store = self._store()
        cid = store.get_controller_id()
        epoch = store.get_controller_epoch()
        return cid, None if epoch is None else epoch[0]

    def controller_or_none(self) -> int | None:
        """The controller's id; None when there is none, or ZooKeeper cannot say (or is not open)."""
        try:
            return self.controller()[0]
        except KafkaControllerError:
            return None

    def registered(self) -> dict[int, int]:
        """Registered broker id -> broker epoch (czxid), one batched read."""
        return {b.id: epoch for b, epoch in self._store().get_all_brokers_and_epochs().items()}

    def partition_state(self, topic: str, partition: int) -> LeaderIsrAndControllerEpoch | None:
        tp = TopicPartition(topic, partition)
        read = self._store().get_partition_states([tp])[tp]
        return read if isinstance(read, LeaderIsrAndControllerEpoch) else None

    def describe(self, topics: Iterable[str] | None = None) -> ClusterView:
        return read_cluster_view(self._store(), None if topics is None else list(topics))

    # -- waits -----------------------------------------------------------------------------------------
    def wait_until(
        self, probe: Callable[[], T | None], timeout: float, what: str, *, interval: float = POLL_S
    ) -> T:
        """Poll ``probe`` until it returns something truthy (returned), or raise ``ClusterError``.
        ZooKeeper and transport errors count as "not yet"; a ``ClusterError`` from the probe (a
        broker died) ends the wait at once."""
        deadline = time.monotonic() + timeout
        last_error = ""
        while True:
            try:
                value = probe()
                if value:
                    return value
            except ClusterError:
                raise
            except (MetadataStoreError, KafkaControllerError) as e:
                last_error = f" (last error: {e})"
            if time.monotonic() >= deadline:
                raise ClusterError(
                    f"timed out after {timeout:g}s waiting for {what}{last_error}{self._crash_note()}"
                )
            time.sleep(interval)

    def _crash_note(self) -> str:
        dead = [
            p for p in self._processes.values() if p.returncode not in (None, 0, -9) and not p.is_running()
        ]
        if not dead:
            return ""
        p = dead[0]
        return f"; broker {p.broker_id} exited with {p.returncode} ({p.last_log_line()}; see {p.log_path})"

    def wait_registered(self, broker_ids: Iterable[int], timeout: float = 60.0) -> dict[int, int]:
        """Until every broker is registered; returns their broker epochs."""
        wanted = [self._known(b) for b in broker_ids]

        def probe() -> dict[int, int] | None:
            self._fail_if_exited(wanted)
            reg = self.registered()
            return {b: reg[b] for b in wanted} if all(b in reg for b in wanted) else None

        return self.wait_until(probe, timeout, f"brokers {wanted} to register")

    def _fail_if_exited(self, broker_ids: Iterable[int]) -> None:
        for b in broker_ids:
            p = self._processes.get(b)
            if p is not None and not p.is_running() and p.returncode is not None:
                raise ClusterError(
                    f"broker {b} exited with code {p.returncode} while starting; "
                    f"{p.last_log_line()} (see {p.log_path})"
                )

    def wait_deregistered(self, broker_id: int, timeout: float = 60.0) -> None:
        self.wait_until(
            lambda: broker_id not in self.registered(), timeout, f"broker {broker_id}'s registration to go"
        )

    def wait_for_controller(
        self, timeout: float = 60.0, *, exclude: Iterable[int] = (), min_epoch: int = 1
    ) -> tuple[int, int]:
        """Until a controller other than ``exclude`` holds an epoch >= ``min_epoch``."""
        excluded = set(exclude)

        def probe() -> tuple[int, int] | None:
            cid, epoch = self.controller()
            if cid is None or epoch is None or cid in excluded or epoch < min_epoch:
                return None
            return cid, epoch

        return self.wait_until(probe, timeout, f"a controller (not {sorted(excluded)}, epoch >= {min_epoch})")

    def wait_metadata(self, broker_ids: Iterable[int] | None = None, timeout: float = 60.0) -> None:
        """Until each running broker's metadata cache names the controller and every running broker."""
        targets = list(self.running_broker_ids() if broker_ids is None else broker_ids)

        def probe() -> bool:
            running = set(self.running_broker_ids())
            cid = self.controller()[0]
            admin = self._admin()
            for b in targets:
                md = admin.metadata(b)
                if md.controller_id != cid or {x.id for x in md.brokers} != running:
                    return False
            return True

        self.wait_until(probe, timeout, f"brokers {targets} to learn the controller and live brokers")

    def wait_topic_healthy(self, topic: str, timeout: float = 60.0) -> ClusterView:
        """Until every partition of ``topic`` has a live leader and a full ISR."""

        def probe() -> ClusterView | None:
            view = self.describe([topic])
            parts = view.partitions
            ok = parts and all(not p.offline and not p.under_replicated for p in parts)
            return view if ok else None

        return self.wait_until(
            probe, timeout, f"every partition of {topic!r} to have a live leader and full ISR"
        )
