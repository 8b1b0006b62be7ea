"""In-memory state machines and a recording deletion client (Kafka's ``MockPartitionStateMachine``
and ``MockReplicaStateMachine``; docs/controller-behaviour.md §9).

Kafka's ``TopicDeletionManagerTest`` and ``PartitionStateMachineTest`` #22 drive a real
``TopicDeletionManager`` against these. Unlike the real state machines they touch no store and
queue no requests, they **raise** ``IllegalControllerStateError`` on an invalid transition (so a
test cannot silently pass over one), and they count ``handle_state_changes`` calls per target
state, empty lists included, because the deletion tests assert how many batched steps were made.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Sequence
from typing import Any

from kafka_controller.core.context import ControllerContext
from kafka_controller.core.election import (
    ElectionResult,
    leader_for_controlled_shutdown,
    leader_for_offline,
    leader_for_preferred_replica,
    leader_for_reassign,
)
from kafka_controller.core.partition_state_machine import AbstractPartitionStateMachine
from kafka_controller.core.replica_state_machine import AbstractReplicaStateMachine
from kafka_controller.core.strategies import (
    ControlledShutdownPartitionLeaderElectionStrategy,
    OfflinePartitionLeaderElectionStrategy,
    PartitionLeaderElectionStrategy,
    PreferredReplicaPartitionLeaderElectionStrategy,
    ReassignPartitionLeaderElectionStrategy,
)
from kafka_controller.domain.errors import (
    IllegalControllerStateError,
    InvalidArgumentError,
    StateChangeFailedError,
)
from kafka_controller.domain.states import PartitionState, ReplicaState
from kafka_controller.domain.values import (
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    PartitionAndReplica,
    TopicPartition,
)

_NEW = PartitionState.NEW_PARTITION
_ONLINE = PartitionState.ONLINE_PARTITION
_OFFLINE = PartitionState.OFFLINE_PARTITION


class MockPartitionStateMachine(AbstractPartitionStateMachine):
    """Kafka's ``MockPartitionStateMachine``: elections on the cached leadership, no store."""

    def __init__(self, context: ControllerContext, unclean_leader_election_enabled: bool) -> None:
        super().__init__(context)
        self._mock_context = context
        self.unclean_leader_election_enabled = unclean_leader_election_enabled
        self._calls: Counter[PartitionState] = Counter()

    def state_changes_calls(self, target: PartitionState) -> int:
        return self._calls[target]

    def clear(self) -> None:
        self._calls.clear()

    def handle_state_changes(
        self,
        partitions: Sequence[TopicPartition],
        target: PartitionState,
        strategy: PartitionLeaderElectionStrategy | None = None,
    ) -> dict[TopicPartition, LeaderAndIsr | Exception]:
        self._calls[target] += 1
        ctx = self._mock_context
        for tp in partitions:
            ctx.put_partition_state_if_not_exists(tp, PartitionState.NON_EXISTENT_PARTITION)
        valid, invalid = ctx.check_valid_partition_state_change(partitions, target)
        if invalid:
            current = {str(tp): str(ctx.partition_states[tp]) for tp in invalid}
            raise IllegalControllerStateError(
                f"Invalid state transition to {target} for partitions {current}"
            )
        if target is not _ONLINE:
            for tp in valid:
                ctx.put_partition_state(tp, target)
            return {}
        # Both lists are taken before any state moves, so New -> Online is not also elected.
        uninitialized = [tp for tp in valid if ctx.partition_states[tp] is _NEW]
        to_elect = [tp for tp in valid if ctx.partition_states[tp] in (_OFFLINE, _ONLINE)]
        for tp in uninitialized:
            ctx.put_partition_state(tp, _ONLINE)
        if not to_elect:
            return {}
        if strategy is None:
            raise InvalidArgumentError(
                f"an election strategy is required to move Online/Offline partitions to {target}"
            )
        results = self._do_leader_elections(to_elect, strategy)
        for tp, outcome in results.items():
            if isinstance(outcome, LeaderAndIsr):
                ctx.put_partition_state(tp, _ONLINE)
        return results

    def _do_leader_elections(
        self, partitions: Sequence[TopicPartition], strategy: PartitionLeaderElectionStrategy
    ) -> dict[TopicPartition, LeaderAndIsr | Exception]:
        ctx = self._mock_context
        failed: dict[TopicPartition, LeaderAndIsr | Exception] = {}
        valid: list[tuple[TopicPartition, LeaderAndIsr]] = []
        for tp in partitions:
            cached = ctx.partition_leadership_info(tp)
            if cached is None:
                failed[tp] = StateChangeFailedError(
                    f"LeaderAndIsr information doesn't exist for partition {tp} in {ctx.partition_states[tp]}"
                    " state"
                )
            elif cached.controller_epoch > ctx.epoch:
                failed[tp] = StateChangeFailedError(
                    f"Aborted leader election for partition {tp} since the LeaderAndIsr path was already "
                    "written by another controller. This probably means that the current controller went "
                    "through a soft failure and another controller was elected with epoch "
                    f"{cached.controller_epoch}."
                )
            else:
                valid.append((tp, cached.leader_and_isr))

        election_results: list[ElectionResult]
        if isinstance(strategy, OfflinePartitionLeaderElectionStrategy):
            unclean = strategy.allow_unclean or self.unclean_leader_election_enabled
            election_results = leader_for_offline(ctx, [(tp, lai, unclean) for tp, lai in valid])
        elif isinstance(strategy, ReassignPartitionLeaderElectionStrategy):
            election_results = leader_for_reassign(ctx, valid)
        elif isinstance(strategy, PreferredReplicaPartitionLeaderElectionStrategy):
            election_results = leader_for_preferred_replica(ctx, valid)
        elif isinstance(strategy, ControlledShutdownPartitionLeaderElectionStrategy):
            election_results = leader_for_controlled_shutdown(ctx, valid)
        else:
            raise InvalidArgumentError(f"unknown leader election strategy {strategy!r}")

        results: dict[TopicPartition, LeaderAndIsr | Exception] = {}
        for result in election_results:
            tp = result.topic_partition
            lai = result.leader_and_isr
            if lai is None:
                results[tp] = StateChangeFailedError(
                    f"Failed to elect leader for partition {tp} under strategy {strategy}"
                )
            else:
                ctx.put_partition_leadership_info(tp, LeaderIsrAndControllerEpoch(lai, ctx.epoch))
                results[tp] = lai
        results.update(failed)
        return results


class MockReplicaStateMachine(AbstractReplicaStateMachine):
    """Kafka's ``MockReplicaStateMachine``: states only; the assignment is never touched."""

    def __init__(self, context: ControllerContext) -> None:
        super().__init__(context)
        self._mock_context = context
        self._calls: Counter[ReplicaState] = Counter()

    def state_changes_calls(self, target: ReplicaState) -> int:
        return self._calls[target]

    def clear(self) -> None:
        self._calls.clear()

    def handle_state_changes(self, replicas: Sequence[PartitionAndReplica], target: ReplicaState) -> None:
        self._calls[target] += 1
        ctx = self._mock_context
        for r in replicas:
            ctx.put_replica_state_if_not_exists(r, ReplicaState.NON_EXISTENT_REPLICA)
        valid, invalid = ctx.check_valid_replica_state_change(replicas, target)
        if invalid:
            current = {str(r): str(ctx.replica_states[r]) for r in invalid}
            raise IllegalControllerStateError(f"Invalid state transition to {target} for replicas {current}")
        if target is ReplicaState.NON_EXISTENT_REPLICA:
            for r in valid:
                ctx.remove_replica_state(r)
        else:
            for r in valid:
                ctx.put_replica_state(r, target)


class RecordingDeletionClient:
    """A ``DeletionClient`` that records its calls (Kafka's tests use a Mockito mock).

    Topic and partition collections are recorded as frozensets: Kafka passes Scala ``Set``s, and
    the tests compare them as sets.
    """

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def delete_topic(self, topic: str, expected_controller_epoch_zk_version: int) -> None:
        self.calls.append(("delete_topic", topic, expected_controller_epoch_zk_version))

    def delete_topic_deletions(
        self, topics: Collection[str], expected_controller_epoch_zk_version: int
    ) -> None:
        self.calls.append(("delete_topic_deletions", frozenset(topics), expected_controller_epoch_zk_version))

    def mute_partition_modifications(self, topic: str) -> None:
        self.calls.append(("mute_partition_modifications", topic))

    def send_metadata_update(self, partitions: Collection[TopicPartition]) -> None:
        self.calls.append(("send_metadata_update", frozenset(partitions)))

    def calls_named(self, name: str) -> list[tuple[Any, ...]]:
        return [c for c in self.calls if c[0] == name]
