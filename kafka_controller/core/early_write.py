"""State writes started ahead of their turn (README deviation 21).

A new controller's startup knows, before its online replicas move, two batches of state writes it
will make: the ISR removal's first round for the dead broker's replicas (``core.replica_isr``) and
the election of the partitions it led (``core.election_early``), both from the states the context
load cached. Moving the online replicas writes nothing and changes no cached state, so both batches
are exactly what the later steps would write; started early, each on a thread of its own,
ZooKeeper works through them while the event thread builds the online replicas' requests. The step
whose write it was takes the outcome where it would have written, so what is cached, sent, logged
and audited, and in which order, stays Kafka's; only the time of the writes moves.
"""

from __future__ import annotations

import threading

from kafka_controller.core.context import ControllerContext
from kafka_controller.domain.values import LeaderAndIsr, TopicPartition, build_leader_isr_and_controller_epoch
from kafka_controller.ports import PartitionStateStore, UpdateLeaderAndIsrResult

__all__ = ["EarlyWrite"]


class EarlyWrite:
    """One batch of conditional state writes (``update_leader_and_isr``) on a thread of its own."""

    def __init__(
        self,
        store: PartitionStateStore,
        states: dict[TopicPartition, LeaderAndIsr],
        epoch: int,
        epoch_zk_version: int,
        name: str,
    ) -> None:
        self.states = states
        self._outcome: UpdateLeaderAndIsrResult | BaseException | None = None
        self._thread = threading.Thread(
            target=self._write, args=(store, states, epoch, epoch_zk_version), name=name, daemon=True
        )
        self._thread.start()

    def _write(
        self,
        store: PartitionStateStore,
        states: dict[TopicPartition, LeaderAndIsr],
        epoch: int,
        version: int,
    ) -> None:
        try:
            self._outcome = store.update_leader_and_isr(states, epoch, version)
        except BaseException as e:  # re-raised on the event thread by ``result``
            self._outcome = e

    def take_states(self) -> dict[TopicPartition, LeaderAndIsr]:
        """The states written, handed over (the caller's write path drops them when done)."""
        states, self.states = self.states, {}
        return states

    def result(self) -> UpdateLeaderAndIsrResult:
        """The store's answer, or what it raised, as if the event thread had made the call."""
        self._thread.join()
        outcome, self._outcome = self._outcome, None
        if isinstance(outcome, BaseException):
            raise outcome
        assert outcome is not None
        return outcome

    def cache_written(self, ctx: ControllerContext) -> None:
        """For a write no step took (the startup failed first, or decided otherwise): wait for it
        and cache what it wrote, as a failure after Kafka's own write would leave the cache."""
        try:
            finished = self.result().finished
        except Exception:  # the startup's own failure is the one that counts
            return
        epoch = ctx.epoch
        ctx.put_partition_leadership_infos(
            (tp, build_leader_isr_and_controller_epoch(lai, epoch))
            for tp, lai in finished.items()
            if isinstance(lai, LeaderAndIsr)
        )
