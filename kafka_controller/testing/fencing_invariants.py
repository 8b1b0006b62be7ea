"""The two invariants only epoch fencing keeps, checked from outside:

* ``single_controller_per_epoch`` — no two controllers' requests are acted on at one controller
  epoch. Each broker reports, per epoch, the controllers whose LeaderAndIsr, UpdateMetadata or
  StopReplica it acted on (``DescribeReplicas``' ``acted_on``); an epoch is won exactly once (a
  conditional write of ``/controller_epoch``), so a second id in one epoch, on one broker or across
  brokers, means a zombie controller was obeyed.
* ``no_stale_epoch_write`` — no ZooKeeper write lands with an epoch older than the latest
  ``/controller_epoch``. ZooKeeper numbers every write (``mzxid``), so one batched read of
  ``/controller_epoch`` and the partition state znodes decides it exactly: a state znode whose
  embedded controller epoch is older than ``/controller_epoch``'s value but whose ``mzxid`` is
  newer than ``/controller_epoch``'s was written by a deposed controller after its successor won
  (KAFKA-6082's bug). The state znodes are the controller's writes that carry their epoch.

``FencingChecker`` remembers across observations (a broker restarted forgets what it acted on;
the checker does not), and reports each finding once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from kafka_controller.domain.errors import ZNodeDecodeError
from kafka_controller.domain.values import TopicPartition
from kafka_controller.testing.violation import Violation
from kafka_controller.zk import paths as P
from kafka_controller.zk.backend import OK, DataRead
from kafka_controller.zk.codecs import decode_controller_epoch, decode_partition_state

SINGLE_CONTROLLER_PER_EPOCH = "single_controller_per_epoch"
NO_STALE_EPOCH_WRITE = "no_stale_epoch_write"

#: Per broker: ``(controller epoch, ids of the controllers it acted on in that epoch)``.
ActedOn = Mapping[int, Sequence[tuple[int, Sequence[int]]]]


@dataclass(frozen=True, slots=True)
class EpochWrites:
    """``/controller_epoch`` and the partition state znodes, from one batched read."""

    controller_epoch: int
    controller_epoch_mzxid: int
    #: Partition -> (controller epoch written into its state znode, the znode's ``mzxid``).
    states: Mapping[TopicPartition, tuple[int, int]] = field(default_factory=dict)


def read_epoch_writes(
    read_raw: Callable[[Sequence[str]], list[DataRead]], partitions: Iterable[TopicPartition]
) -> EpochWrites | None:
    """One batched read (a store's ``read_raw``); None when ``/controller_epoch`` is unreadable
    (no controller ever elected, or ZooKeeper down: the sample is skipped, not failed)."""
    tps = sorted(partitions)
    reads = read_raw([P.CONTROLLER_EPOCH_PATH, *(P.topic_partition_state_path(tp) for tp in tps)])
    code, data, epoch_stat = reads[0]
    if code != OK or epoch_stat is None:
        return None
    try:
        epoch = decode_controller_epoch(data)
    except ZNodeDecodeError:
        return None
    states: dict[TopicPartition, tuple[int, int]] = {}
    for tp, (code, data, stat) in zip(tps, reads[1:], strict=True):
        if code != OK or stat is None:
            continue  # a partition being created or deleted: nothing written to judge
        try:
            state = decode_partition_state(data, stat.version, P.topic_partition_state_path(tp))
        except ZNodeDecodeError:
            continue  # reported by the snapshot's ``unreadable``
        if state is not None:
            states[tp] = (state.controller_epoch, stat.mzxid)
    return EpochWrites(epoch, epoch_stat.mzxid, states)


class FencingChecker:
    """Accumulates what brokers acted on; flags each broken invariant once."""

    def __init__(self) -> None:
        #: Controller epoch -> controller id -> brokers that acted on its requests in that epoch.
        self.obeyed: dict[int, dict[int, set[int]]] = {}
        self._reported: set[tuple[str, object]] = set()

    def observe(self, acted_on: ActedOn, writes: EpochWrites | None) -> list[Violation]:
        return self._check_obeyed(acted_on) + self._check_writes(writes)

    def _check_obeyed(self, acted_on: ActedOn) -> list[Violation]:
        for broker, history in acted_on.items():
            for epoch, controllers in history:
                by_controller = self.obeyed.setdefault(epoch, {})
                for controller in controllers:
                    by_controller.setdefault(controller, set()).add(broker)
        out: list[Violation] = []
        for epoch, by_controller in sorted(self.obeyed.items()):
            if len(by_controller) < 2 or not self._first((SINGLE_CONTROLLER_PER_EPOCH, epoch)):
                continue
            who = ", ".join(f"{c} (by brokers {sorted(b)})" for c, b in sorted(by_controller.items()))
            out.append(
                Violation(
                    SINGLE_CONTROLLER_PER_EPOCH,
                    f"controller epoch {epoch}",
                    f"requests of controllers {who} were acted on at one epoch",
                    {"controller_epoch": epoch},
                )
            )
        return out

    def _check_writes(self, writes: EpochWrites | None) -> list[Violation]:
        if writes is None:
            return []
        out: list[Violation] = []
        for tp, (epoch, mzxid) in sorted(writes.states.items()):
            stale = epoch < writes.controller_epoch and mzxid > writes.controller_epoch_mzxid
            if stale and self._first((NO_STALE_EPOCH_WRITE, (tp, mzxid))):
                out.append(
                    Violation(
                        NO_STALE_EPOCH_WRITE,
                        str(tp),
                        f"state written by controller epoch {epoch} at zxid {mzxid:#x}, after "
                        f"/controller_epoch became {writes.controller_epoch} at zxid "
                        f"{writes.controller_epoch_mzxid:#x}",
                        {"controller_epoch": epoch, "latest_controller_epoch": writes.controller_epoch},
                    )
                )
        return out

    def _first(self, key: tuple[str, object]) -> bool:
        if key in self._reported:
            return False
        self._reported.add(key)
        return True


__all__ = [
    "NO_STALE_EPOCH_WRITE",
    "SINGLE_CONTROLLER_PER_EPOCH",
    "ActedOn",
    "EpochWrites",
    "FencingChecker",
    "read_epoch_writes",
]
