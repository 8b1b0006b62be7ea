"""State writes started ahead of their turn (README deviation 21).

A new controller's startup knows, before its online replicas move, two batches of state writes it
will make: the ISR removal's first round for the dead broker's replicas (``core.replica_isr``) and
the election of the partitions it led (``core.partition_election``), both from the states the context
load cached. Moving the online replicas writes nothing and changes no cached state, so both batches
are exactly what the later steps would write; started early, each on a thread of its own,
ZooKeeper works through them while the event thread builds the online replicas' requests. The step
whose write it was takes the outcome where it would have written, so what is cached, sent, logged
and audited, and in which order, stays Kafka's; only the time of the writes moves. A write no step
takes (the startup failed first, or decided otherwise) is cached and audited as it stands
(``cache_written``): the audit accounts for every state this controller wrote.
"""

from __future__ import annotations

import threading

from kafka_controller.core.context import ControllerContext
from kafka_controller.core.partition_records import partition_transition
from kafka_controller.domain.audit_records import OUTCOME_OK, PartitionTransition
from kafka_controller.domain.states import PartitionState
from kafka_controller.domain.values import LeaderAndIsr, TopicPartition, build_leader_isr_and_controller_epoch
from kafka_controller.ports import AuditSink, PartitionStateStore, UpdateLeaderAndIsrResult

__all__ = ["EARLY_WRITE_NOT_TAKEN", "EarlyWrite"]

#: The election strategy column of the audit rows of a write no step took (``cache_written``).
EARLY_WRITE_NOT_TAKEN = "EarlyWriteNotTaken"


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

    def cache_written(self, ctx: ControllerContext, audit: AuditSink | None) -> None:
        """For a write no step took (the startup failed first, or decided otherwise): wait for it
        and cache what it wrote, as a failure after Kafka's own write would leave the cache; and
        audit each state written, as a transition that keeps the partition's state (the one the
        context has, else the one its leader's liveness gives): the audit log accounts for every
        leader epoch written (replaying it gives ZooKeeper's state)."""
        try:
            finished = self.result().finished
        except Exception:  # the startup's own failure is the one that counts
            return
        written = [(tp, lai) for tp, lai in finished.items() if isinstance(lai, LeaderAndIsr)]
        if audit is not None and written:
            audit.record([_not_taken(ctx, tp, lai) for tp, lai in written])
        epoch = ctx.epoch
        ctx.put_partition_leadership_infos(
            (tp, build_leader_isr_and_controller_epoch(lai, epoch)) for tp, lai in written
        )


def _not_taken(ctx: ControllerContext, tp: TopicPartition, after: LeaderAndIsr) -> PartitionTransition:
    info = ctx.partition_leadership_info(tp)
    state = ctx.partition_states.get(tp)
    if state is None:
        online = ctx.is_replica_online(after.leader, tp)
        state = PartitionState.ONLINE_PARTITION if online else PartitionState.OFFLINE_PARTITION
    before = info.leader_and_isr if info is not None else None
    return partition_transition(tp, state, state, OUTCOME_OK, before, after, EARLY_WRITE_NOT_TAKEN)
