"""The state part of ``ControllerContext``: partition and replica states, the valid-transition
checks, and the offline partition count kept as states change (spec §5.4)."""

from __future__ import annotations

from collections.abc import Collection, Iterable

from kafka_controller.domain.errors import IllegalControllerStateError
from kafka_controller.domain.states import PartitionState, ReplicaState
from kafka_controller.domain.values import PartitionAndReplica, TopicPartition

__all__ = ["ContextStates"]

_OFFLINE = PartitionState.OFFLINE_PARTITION
_NON_EXISTENT = PartitionState.NON_EXISTENT_PARTITION


class ContextStates:
    """State methods of ``ControllerContext``, which holds the fields declared here."""

    offline_partition_count: int
    partition_states: dict[TopicPartition, PartitionState]
    replica_states: dict[PartitionAndReplica, ReplicaState]
    topics_with_deletion_started: set[str]

    def partitions_for_topic(self, topic: str) -> list[TopicPartition]:
        raise NotImplementedError  # ControllerContext's

    def replicas_for_topic(self, topic: str) -> list[PartitionAndReplica]:
        raise NotImplementedError  # ControllerContext's

    def partitions_in_state(self, state: PartitionState) -> list[TopicPartition]:
        return [tp for tp, s in self.partition_states.items() if s is state]

    def partitions_in_states(self, states: Collection[PartitionState]) -> list[TopicPartition]:
        return [tp for tp, s in self.partition_states.items() if s in states]

    def partitions_in_state_for_topic(self, topic: str, state: PartitionState) -> list[TopicPartition]:
        return [tp for tp in self.partitions_for_topic(topic) if self.partition_states.get(tp) is state]

    def check_valid_partition_state_change(
        self, partitions: Iterable[TopicPartition], target: PartitionState
    ) -> tuple[list[TopicPartition], list[TopicPartition]]:
        """Split into (valid, invalid) for ``target``, keeping input order; a missing entry is NonExistent."""
        allowed = target.valid_previous_states
        states = self.partition_states
        valid: list[TopicPartition] = []
        invalid: list[TopicPartition] = []
        for tp in partitions:
            (valid if states.get(tp, _NON_EXISTENT) in allowed else invalid).append(tp)
        return valid, invalid

    def check_valid_replica_state_change(
        self, replicas: Iterable[PartitionAndReplica], target: ReplicaState
    ) -> tuple[list[PartitionAndReplica], list[PartitionAndReplica]]:
        """Split into (valid, invalid) for ``target``, keeping input order; a missing entry is NonExistent."""
        allowed = target.valid_previous_states
        states = self.replica_states
        valid: list[PartitionAndReplica] = []
        invalid: list[PartitionAndReplica] = []
        for r in replicas:
            (valid if states.get(r, ReplicaState.NON_EXISTENT_REPLICA) in allowed else invalid).append(r)
        return valid, invalid

    def partition_state(self, tp: TopicPartition) -> PartitionState:
        return self.partition_states[tp]

    def put_partition_state(self, tp: TopicPartition, target: PartitionState) -> None:
        current = self.partition_states.get(tp, _NON_EXISTENT)
        self.partition_states[tp] = target
        self._update_partition_state_metrics(tp, current, target)

    def put_partition_states(self, items: Iterable[tuple[TopicPartition, PartitionState]]) -> None:
        """``put_partition_state`` for many partitions at once (a failover sets all of them): the
        same states and offline count, without a method call per partition.

        Without topics whose deletion started and without a partition given twice, the count moves
        by the targets' Offline count minus the replaced states' one, and the whole update runs at
        C speed; otherwise partition by partition."""
        pairs = items if isinstance(items, list) else list(items)
        states = self.partition_states
        deletion_started = self.topics_with_deletion_started
        if not deletion_started:
            updates = dict(pairs)
            if len(updates) == len(pairs):
                currents = list(map(states.get, updates))
                states.update(updates)
                targets = list(updates.values())
                self.offline_partition_count += targets.count(_OFFLINE) - currents.count(_OFFLINE)
                return
        delta = 0
        for tp, target in pairs:
            current = states.get(tp, _NON_EXISTENT)
            states[tp] = target
            if tp.topic in deletion_started:
                continue
            if current is not _OFFLINE and target is _OFFLINE:
                delta += 1
            elif current is _OFFLINE and target is not _OFFLINE:
                delta -= 1
        self.offline_partition_count += delta

    def put_partition_state_if_not_exists(self, tp: TopicPartition, state: PartitionState) -> None:
        if tp not in self.partition_states:
            self.partition_states[tp] = state
            self._update_partition_state_metrics(tp, _NON_EXISTENT, state)

    def _update_partition_state_metrics(
        self, tp: TopicPartition, current: PartitionState, target: PartitionState
    ) -> None:
        if tp.topic in self.topics_with_deletion_started:
            return
        if current is not _OFFLINE and target is _OFFLINE:
            self.offline_partition_count += 1
        elif current is _OFFLINE and target is not _OFFLINE:
            self.offline_partition_count -= 1

    def replica_state(self, replica: PartitionAndReplica) -> ReplicaState:
        return self.replica_states[replica]

    def put_replica_state(self, replica: PartitionAndReplica, state: ReplicaState) -> None:
        self.replica_states[replica] = state

    def put_replica_state_if_not_exists(self, replica: PartitionAndReplica, state: ReplicaState) -> None:
        self.replica_states.setdefault(replica, state)

    def remove_replica_state(self, replica: PartitionAndReplica) -> None:
        self.replica_states.pop(replica, None)

    def replicas_in_state(self, topic: str, state: ReplicaState) -> set[PartitionAndReplica]:
        return {r for r in self.replicas_for_topic(topic) if self._replica_state_or_raise(r) is state}

    def are_all_replicas_in_state(self, topic: str, state: ReplicaState) -> bool:
        return all(self._replica_state_or_raise(r) is state for r in self.replicas_for_topic(topic))

    def is_any_replica_in_state(self, topic: str, state: ReplicaState) -> bool:
        return any(self._replica_state_or_raise(r) is state for r in self.replicas_for_topic(topic))

    def _replica_state_or_raise(self, replica: PartitionAndReplica) -> ReplicaState:
        state = self.replica_states.get(replica)
        if state is None:
            raise IllegalControllerStateError(f"replica {replica} has no state")
        return state
