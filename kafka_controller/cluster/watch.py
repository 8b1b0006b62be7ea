"""Watching one broker's leadership through ZooKeeper while it shuts down.

"Leads nothing at exit" is what a controlled shutdown promises, so the tooling measures it rather
than trusting the broker. A whole shutdown can take less than one polling interval, so sampling
alone cannot say what the broker led at the instant it left; ZooKeeper's transaction ids can:

* the broker's registration is deleted at some zxid ``Z`` (when its session closes); right after,
  ``/brokers/ids``'s ``pzxid`` is ``Z`` (later if another broker registered meanwhile);
* a state znode whose ``mzxid`` is below ``Z`` still holds what it held at ``Z``;
* one written after ``Z`` but exactly once since our last look held that look's value at ``Z``;
* any other (written more than once since our last look) cannot be proven, and counts as led.

Each look is one batched read of the broker's state znodes plus its registration.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kafka_controller.domain.errors import KafkaControllerError, MetadataStoreError, ZNodeDecodeError
from kafka_controller.domain.values import NO_LEADER, LeaderIsrAndControllerEpoch, TopicPartition
from kafka_controller.ports import MetadataStore
from kafka_controller.zk import paths as P
from kafka_controller.zk.backend import NONODE, OK, ZkBackend
from kafka_controller.zk.codecs import decode_partition_state

POLL_S = 0.02


class ShutdownTimeoutError(KafkaControllerError):
    """The broker was still registered at the deadline."""


@dataclass(frozen=True, slots=True)
class ShutdownReport:
    broker_id: int
    led_before: tuple[TopicPartition, ...]
    led_at_exit: tuple[TopicPartition, ...]
    seconds: float
    exit_code: int | None = None


@dataclass(frozen=True, slots=True)
class _Look:
    version: int
    mzxid: int
    leader: int


def partitions_of(store: MetadataStore, broker_id: int) -> list[TopicPartition]:
    """Every partition with ``broker_id`` among its replicas (one batched read of the topic znodes)."""
    out: list[TopicPartition] = []
    for read in store.get_replica_assignment_and_topic_ids(sorted(store.get_all_topics())).values():
        if not isinstance(read, MetadataStoreError):
            out += [tp for tp, ra in read.assignment.items() if broker_id in ra.replicas]
    return sorted(out)


def leaders_among(
    store: MetadataStore, partitions: Sequence[TopicPartition], broker_id: int
) -> list[TopicPartition]:
    """Those of ``partitions`` whose state znode names ``broker_id`` as leader (one batched read)."""
    if not partitions:
        return []
    states = store.get_partition_states(partitions)
    return [
        tp
        for tp in partitions
        if isinstance(s := states.get(tp), LeaderIsrAndControllerEpoch)
        and s.leader_and_isr.leader == broker_id
    ]


def backend_of(store: Any) -> ZkBackend:
    """The raw backend under a ``ZkMetadataStore`` (stats carry the zxids this module needs)."""
    backend = getattr(store, "backend", None) or getattr(store, "_backend", None)
    if backend is None:
        raise TypeError(f"{type(store).__name__} has no ZooKeeper backend")
    return backend  # type: ignore[no-any-return]


def _look(path: str, read: tuple[int, bytes | None, Any]) -> _Look | None:
    code, data, stat = read
    if code != OK or stat is None:
        return None
    try:
        state = decode_partition_state(data, stat.version, path)
    except ZNodeDecodeError:
        state = None
    leader = NO_LEADER if state is None else state.leader_and_isr.leader
    return _Look(stat.version, stat.mzxid, leader)


class LeadershipWatch:
    """Take the first look now (before the broker is told to stop), then ``wait_deregistered``."""

    def __init__(self, store: MetadataStore, broker_id: int, partitions: Sequence[TopicPartition]) -> None:
        self.broker_id = broker_id
        self._backend = backend_of(store)
        self._tps = list(partitions)
        self._paths = [P.topic_partition_state_path(tp) for tp in self._tps]
        self._probe = [*self._paths, P.broker_id_path(broker_id), P.BROKER_IDS_PATH]
        self._seen: dict[TopicPartition, _Look] = {}
        if self._look() is not None:
            raise KafkaControllerError(f"broker {broker_id} is not registered")

    @property
    def led(self) -> list[TopicPartition]:
        """What it led at the latest look taken while it was registered."""
        return sorted(tp for tp, look in self._seen.items() if look.leader == self.broker_id)

    def _look(self) -> list[TopicPartition] | None:
        """One batched read; None while registered, else what it led when its registration went."""
        reads = self._backend.get_data_many(self._probe)
        looks = {tp: _look(path, r) for tp, path, r in zip(self._tps, self._paths, reads, strict=False)}
        if reads[-2][0] != NONODE:  # the registration is read after the states, in the same request
            self._seen.update({tp: look for tp, look in looks.items() if look is not None})
            return None
        ids_stat = reads[-1][2]
        deleted_at = ids_stat.pzxid if ids_stat is not None else 0
        return sorted(
            tp for tp in self._tps if _led_at(self.broker_id, looks.get(tp), self._seen.get(tp), deleted_at)
        )

    def wait_deregistered(
        self,
        deadline: float,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> list[TopicPartition]:
        """Poll until ``/brokers/ids/<id>`` is gone; returns the partitions it led at that instant."""
        while (result := self._look()) is None:
            if monotonic() >= deadline:
                raise ShutdownTimeoutError(
                    f"broker {self.broker_id} is still registered at the deadline; "
                    f"it leads {len(self.led)} partition(s)"
                )
            sleep(POLL_S)
        return result


def _led_at(broker_id: int, now: _Look | None, before: _Look | None, deleted_at: int) -> bool:
    """Did ``broker_id`` lead at the deletion (zxid ``deleted_at``)? See the module docstring."""
    if now is not None and now.mzxid < deleted_at:
        return now.leader == broker_id
    if before is None:
        return now is not None and now.leader == broker_id  # never seen: only a live look can tell
    if now is None or now.version == before.version + 1:
        return before.leader == broker_id  # gone, or written once since the look: after the exit
    return True  # written more than once since the look: cannot prove it did not lead
