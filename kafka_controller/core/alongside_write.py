"""States written in the same store call as an election's: the controlled shutdown's followers' ISR
removal (``ReplicaIsrRemoval.start_isr_removal``, deviation 18 in the README)."""

from __future__ import annotations

from dataclasses import dataclass

from kafka_controller.domain.values import LeaderAndIsr, TopicPartition
from kafka_controller.ports import UpdateLeaderAndIsrResult

__all__ = ["AlongsideWrite"]


@dataclass(eq=False)
class AlongsideWrite:
    """The first (cached) round of ``remove_replicas_from_isr(replica_id, partitions)``: its new
    ``states``, the partitions it left to Kafka's read rounds (``unread``), and, once the election's
    store call has carried the states, that call's outcome for them (``written``). ``None`` means
    not written: the replica state machine's call then writes them itself."""

    replica_id: int
    partitions: list[TopicPartition]
    states: dict[TopicPartition, LeaderAndIsr]
    unread: list[TopicPartition]
    written: UpdateLeaderAndIsrResult | Exception | None = None

    def take_states(self) -> dict[TopicPartition, LeaderAndIsr]:
        """The states, handed over once (the caller drops them as it caches the outcome)."""
        states, self.states = self.states, {}
        return states

    def settle(self, outcome: UpdateLeaderAndIsrResult | Exception) -> None:
        """Keep this write's share of the election's store call: its partitions' outcomes and
        those of them to retry (BADVERSION), or the exception that failed the whole call."""
        if isinstance(outcome, Exception):
            self.written = outcome
            return
        states, finished = self.states, outcome.finished
        self.written = UpdateLeaderAndIsrResult(
            {tp: finished[tp] for tp in states if tp in finished},
            [tp for tp in outcome.to_retry if tp in states],
        )
