"""The interface the state machines use to queue broker requests (docs/controller-behaviour.md §6).

``ControllerBrokerRequestBatch`` (``core.request_batch``) implements it for real; tests that port
Kafka's EasyMock expectations use ``kafka_controller.testing.doubles.RecordingRequestBatch``.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Protocol

from kafka_controller.core.replica_runs import ReplicaRuns
from kafka_controller.domain.values import (
    LeaderIsrAndControllerEpoch,
    PartitionAndReplica,
    ReplicaAssignment,
    TopicPartition,
)

#: One ``add_leader_and_isr_requests`` entry: recipients, partition, its leadership and assignment.
LeaderAndIsrEntry = tuple[Iterable[int], TopicPartition, LeaderIsrAndControllerEpoch, ReplicaAssignment]


class RequestBatch(Protocol):
    def new_batch(self) -> None:
        """Start a batch; raises IllegalControllerStateError if LeaderAndIsr, StopReplica or the
        UpdateMetadata broker set still hold requests (the UpdateMetadata partition map is not checked)."""
        ...

    def clear(self) -> None: ...

    def add_leader_and_isr_request_for_brokers(
        self,
        broker_ids: Iterable[int],
        tp: TopicPartition,
        leader_isr_and_controller_epoch: LeaderIsrAndControllerEpoch,
        replica_assignment: ReplicaAssignment,
        is_new: bool,
    ) -> None: ...

    def add_leader_and_isr_requests(
        self,
        entries: Iterable[LeaderAndIsrEntry],
        is_new: bool,
    ) -> None:
        """``add_leader_and_isr_request_for_brokers(*entry, is_new)`` for each entry, in order: the
        bulk form the state machines use (the real batch reads the context once for all)."""
        ...

    def add_leader_and_isr_requests_by_broker(
        self,
        groups: Iterable[tuple[int, Sequence[TopicPartition]]],
        leadership: Mapping[TopicPartition, LeaderIsrAndControllerEpoch],
        full_assignment: Callable[[TopicPartition], ReplicaAssignment],
        is_new: bool,
    ) -> None:
        """``add_leader_and_isr_request_for_brokers((broker_id,), tp, leadership[tp],
        full_assignment(tp), is_new)`` for each ``(broker_id, partitions)`` and each of its
        partitions, in order: the replica state machine's form (one broker per entry, the
        leadership and assignment looked up by the batch, once per partition for the real one)."""
        ...

    def add_leader_and_isr_requests_by_replica(
        self,
        runs: ReplicaRuns,
        leadership: Mapping[TopicPartition, LeaderIsrAndControllerEpoch],
        full_assignment: Callable[[TopicPartition], ReplicaAssignment],
        skip: Collection[TopicPartition],
        is_new: bool,
    ) -> None:
        """``add_leader_and_isr_requests_by_broker(told_by_replica_id(runs.replicas, leadership, skip),
        leadership, full_assignment, is_new)``: an OnlineReplica call's entries, grouped as Kafka's
        ``handleStateChanges`` groups replicas (the real batch builds them partition by partition)."""
        ...

    def add_isr_removal_requests(
        self,
        replica_id: int,
        removed: Sequence[tuple[TopicPartition, LeaderIsrAndControllerEpoch]],
        full_assignment: Callable[[TopicPartition], ReplicaAssignment],
        topics_to_be_deleted: Collection[str],
    ) -> None:
        """``add_leader_and_isr_requests(isr_removal_entries(replica_id, removed, full_assignment,
        topics_to_be_deleted), False)``: the OfflineReplica step's requests after its ISR removal
        (the real batch builds them partition by partition, without the entries)."""
        ...

    def add_stop_replica_request_for_brokers(
        self, broker_ids: Iterable[int], tp: TopicPartition, delete_partition: bool
    ) -> None: ...

    def add_stop_replica_requests(
        self, broker_ids: Sequence[int], partitions: Iterable[TopicPartition], delete_partition: bool
    ) -> None:
        """``add_stop_replica_request_for_brokers(broker_ids, tp, delete_partition)`` for each
        partition, in order: the bulk form (the real batch reads the context once for all)."""
        ...

    def add_update_metadata_request_for_brokers(
        self, broker_ids: Iterable[int], partitions: Collection[TopicPartition] = ()
    ) -> None: ...

    def send_requests_to_brokers(self, controller_epoch: int) -> None: ...


def told_by_replica_id(
    replicas: Iterable[PartitionAndReplica],
    leadership: Mapping[TopicPartition, LeaderIsrAndControllerEpoch],
    skip: Collection[TopicPartition],
) -> list[tuple[int, list[TopicPartition]]]:
    """``replicas`` grouped by replica id, in order of first appearance (Kafka's ``groupBy`` in
    ``handleStateChanges``), each group the partitions of its replicas, in order, that have a
    leadership in ``leadership`` and are not in ``skip``: who an OnlineReplica move tells what."""
    groups: dict[int, list[TopicPartition]] = {}
    for tp, replica_id in replicas:
        group = groups.get(replica_id)
        if group is None:
            group = groups[replica_id] = []
        if tp in leadership and tp not in skip:
            group.append(tp)
    return list(groups.items())


def isr_removal_entries(
    replica_id: int,
    removed: Iterable[tuple[TopicPartition, LeaderIsrAndControllerEpoch]],
    full_assignment: Callable[[TopicPartition], ReplicaAssignment],
    topics_to_be_deleted: Collection[str],
) -> list[LeaderAndIsrEntry]:
    """Kafka's ``doHandleStateChanges(OfflineReplica)`` entries after ``removeReplicasFromIsr``: for
    each partition ``replica_id`` was taken out of, in order, with its new leadership, unless its
    topic is queued for deletion, LeaderAndIsr to the partition's replicas but ``replica_id``."""
    entries: list[LeaderAndIsrEntry] = []
    for tp, info in removed:
        if tp.topic not in topics_to_be_deleted:
            assignment = full_assignment(tp)
            recipients = tuple(b for b in assignment.replicas if b != replica_id)
            entries.append((recipients, tp, info, assignment))
    return entries
