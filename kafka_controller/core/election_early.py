"""The offline election's write for the partitions a new controller's startup leaves to it
(deviation 20), started before the online replicas move (``core.early_write``, deviation 21).

``PartitionLeaderElection`` inherits this. The startup knows those partitions before its replica
state machine moves anything; each has an online replica of its assignment in its ISR, so the
offline election elects it cleanly from the cached state, reading no topic config. Nothing until
the partition state machine's election writes or re-caches them, so its cached round decides the
same leaders and ISRs: it takes the early write's outcome for the partitions whose decision is the
one written, and writes the others itself. Should a decision differ (never at startup), what the
early write wrote is cached (and audited) first, as ZooKeeper holds it, and the round's conditional
write of those partitions hits BADVERSION and goes Kafka's read-first way.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING

from kafka_controller.core.context import ControllerContext
from kafka_controller.core.early_write import EarlyWrite
from kafka_controller.core.election import offline_election_decisions
from kafka_controller.domain.values import LeaderAndIsr, TopicPartition
from kafka_controller.ports import AuditSink, PartitionStateStore, UpdateLeaderAndIsrResult

__all__ = ["EarlyElectionWrite"]


class EarlyElectionWrite:
    """The early write of the startup's offline elections, and taking it (module docs)."""

    controller_context: ControllerContext
    _store: PartitionStateStore
    _audit: AuditSink | None
    write_on_cached_zk_version: bool
    _early_election: EarlyWrite | None = None

    if TYPE_CHECKING:  # ``PartitionLeaderElection``'s, which inherits this

        def _collect_unclean_leader_election_state(
            self,
            valid: list[tuple[TopicPartition, LeaderAndIsr]],
            allow_unclean: bool,
            config_failures: dict[str, Exception],
        ) -> list[tuple[TopicPartition, LeaderAndIsr | None, bool]]: ...

    def start_election_prewrite(self, partitions: Collection[TopicPartition]) -> None:
        """Write now the clean offline election of each of ``partitions`` from its cached state."""
        self.abandon_election_prewrite()
        if not self.write_on_cached_zk_version or not partitions:
            return
        ctx = self.controller_context
        cached, _ = ctx.cached_leaderships(partitions)
        valid = [(tp, info.leader_and_isr) for tp, info in cached.items()]
        # the election's own split into partitions with and without an online ISR member; allowing
        # unclean marks the latter (and reads no config): only the clean ones are written early
        collected = self._collect_unclean_leader_election_state(valid, True, {})
        clean = [c for c in collected if not c[2]]
        states = {tp: lai for tp, lai, _, _ in offline_election_decisions(ctx, clean) if lai is not None}
        if states:
            self._early_election = EarlyWrite(
                self._store, states, ctx.epoch, ctx.epoch_zk_version, "election-prewrite"
            )

    def abandon_election_prewrite(self) -> None:
        """Wait for an early write no election took and cache what it wrote."""
        early, self._early_election = self._early_election, None
        if early is not None:
            early.cache_written(self.controller_context, self._audit)

    def _write_elected(
        self, to_update: dict[TopicPartition, LeaderAndIsr], epoch: int, epoch_zk_version: int
    ) -> UpdateLeaderAndIsrResult:
        """``update_leader_and_isr`` of a round's decisions, taking the early write's outcome for
        the partitions it wrote with the same decision."""
        early, self._early_election = self._early_election, None
        if early is None:
            return self._store.update_leader_and_isr(to_update, epoch, epoch_zk_version)
        written = early.states
        if any(to_update.get(tp) != lai for tp, lai in written.items()):
            early.cache_written(self.controller_context, self._audit)
            return self._store.update_leader_and_isr(to_update, epoch, epoch_zk_version)
        rest = {tp: lai for tp, lai in to_update.items() if tp not in written}
        done = early.result()
        other = self._store.update_leader_and_isr(rest, epoch, epoch_zk_version) if rest else None
        # one answer, in the order of ``to_update``: the order a single write answers in, which the
        # election's requests and audit records follow
        finished, more = done.finished, other.finished if other is not None else {}
        merged = {
            tp: finished[tp] if tp in finished else more[tp]
            for tp in to_update
            if tp in finished or tp in more
        }
        retry = set(done.to_retry).union(other.to_retry if other is not None else ())
        return UpdateLeaderAndIsrResult(merged, [tp for tp in to_update if tp in retry])
