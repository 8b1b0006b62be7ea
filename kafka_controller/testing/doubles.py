"""Test doubles of the ports and of the request batch, used only by tests
(docs/rules.md, fakes are part of the product).

* ``RecordingRequestBatch`` records every call the state machines make on the request batch, so a
  test can assert the exact call list Kafka's EasyMock tests verify
  (docs/controller-behaviour.md §9, "expect exactly").
* ``ScriptedPartitionStateStore`` is a strict scripted ``PartitionStateStore``: each call must match
  the next expectation (method and arguments, compared by value) and returns its canned answer or
  raises its canned error. ``verify()`` checks nothing expected was left uncalled.
* ``HoldingAuditSink`` is a ``RecordingAuditSink`` that holds and releases as the ``AuditWriter``
  does.

The dry run uses none of them, so they live here rather than in ``kafka_controller.dryrun`` (whose
``RecordingAuditSink`` the dry run keeps its plan's rows in).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kafka_controller.core.batch_api import LeaderAndIsrEntry, isr_removal_entries, told_by_replica_id
from kafka_controller.core.replica_runs import ReplicaRuns
from kafka_controller.domain.audit_records import AuditItem, AuditRecord
from kafka_controller.domain.errors import MetadataStoreError
from kafka_controller.domain.values import (
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
    TopicPartition,
)
from kafka_controller.dryrun.recording import RecordingAuditSink
from kafka_controller.ports import BulkAuditSink, PartitionStateRead, UpdateLeaderAndIsrResult

Call = tuple[Any, ...]


class RecordingRequestBatch:
    """A request batch that only records calls (broker id lists become tuples, order kept)."""

    def __init__(self) -> None:
        self.calls: list[Call] = []

    def new_batch(self) -> None:
        self.calls.append(("new_batch",))

    def clear(self) -> None:
        self.calls.append(("clear",))

    def add_leader_and_isr_request_for_brokers(
        self,
        broker_ids: Iterable[int],
        tp: TopicPartition,
        leader_isr_and_controller_epoch: LeaderIsrAndControllerEpoch,
        replica_assignment: ReplicaAssignment,
        is_new: bool,
    ) -> None:
        self.calls.append(
            (
                "add_leader_and_isr_request_for_brokers",
                tuple(broker_ids),
                tp,
                leader_isr_and_controller_epoch,
                replica_assignment,
                is_new,
            )
        )

    def add_leader_and_isr_requests(
        self,
        entries: Iterable[LeaderAndIsrEntry],
        is_new: bool,
    ) -> None:
        """Recorded as the per-entry calls it stands for, so call lists match Kafka's either way."""
        for broker_ids, tp, leadership, assignment in entries:
            self.add_leader_and_isr_request_for_brokers(broker_ids, tp, leadership, assignment, is_new)

    def add_leader_and_isr_requests_by_broker(
        self,
        groups: Iterable[tuple[int, Sequence[TopicPartition]]],
        leadership: Mapping[TopicPartition, LeaderIsrAndControllerEpoch],
        full_assignment: Callable[[TopicPartition], ReplicaAssignment],
        is_new: bool,
    ) -> None:
        """Recorded as the per-entry calls it stands for."""
        for broker_id, partitions in groups:
            for tp in partitions:
                self.add_leader_and_isr_request_for_brokers(
                    (broker_id,), tp, leadership[tp], full_assignment(tp), is_new
                )

    def add_leader_and_isr_requests_by_replica(
        self,
        runs: ReplicaRuns,
        leadership: Mapping[TopicPartition, LeaderIsrAndControllerEpoch],
        full_assignment: Callable[[TopicPartition], ReplicaAssignment],
        skip: Collection[TopicPartition],
        is_new: bool,
    ) -> None:
        """Recorded as the per-entry calls it stands for."""
        groups = told_by_replica_id(runs.replicas, leadership, skip)
        self.add_leader_and_isr_requests_by_broker(groups, leadership, full_assignment, is_new)

    def add_isr_removal_requests(
        self,
        replica_id: int,
        removed: Sequence[tuple[TopicPartition, LeaderIsrAndControllerEpoch]],
        full_assignment: Callable[[TopicPartition], ReplicaAssignment],
        topics_to_be_deleted: Collection[str],
    ) -> None:
        """Recorded as the per-entry calls it stands for."""
        entries = isr_removal_entries(replica_id, removed, full_assignment, topics_to_be_deleted)
        self.add_leader_and_isr_requests(entries, False)

    def add_stop_replica_request_for_brokers(
        self, broker_ids: Iterable[int], tp: TopicPartition, delete_partition: bool
    ) -> None:
        self.calls.append(("add_stop_replica_request_for_brokers", tuple(broker_ids), tp, delete_partition))

    def add_stop_replica_requests(
        self, broker_ids: Sequence[int], partitions: Iterable[TopicPartition], delete_partition: bool
    ) -> None:
        """Recorded as the per-partition calls it stands for."""
        for tp in partitions:
            self.add_stop_replica_request_for_brokers(broker_ids, tp, delete_partition)

    def add_update_metadata_request_for_brokers(
        self, broker_ids: Iterable[int], partitions: Collection[TopicPartition] = ()
    ) -> None:
        self.calls.append(
            ("add_update_metadata_request_for_brokers", tuple(broker_ids), frozenset(partitions))
        )

    def send_requests_to_brokers(self, controller_epoch: int) -> None:
        self.calls.append(("send_requests_to_brokers", controller_epoch))

    def calls_named(self, name: str) -> list[Call]:
        return [c for c in self.calls if c[0] == name]


@dataclass
class _Expectation:
    call: Call
    result: Any = None
    error: BaseException | None = None


class ScriptedPartitionStateStore:
    """A strict, scripted ``PartitionStateStore`` (Kafka's replayed EasyMock ``KafkaZkClient``).

    Arguments are normalised before comparison: partition sequences to lists (order matters, as
    Kafka's ``Seq`` equality does), mappings to dicts, topic collections to sets.
    """

    def __init__(self) -> None:
        self._expected: deque[_Expectation] = deque()
        self.calls: list[Call] = []

    def expect(self, *call: Any, result: Any = None, error: BaseException | None = None) -> None:
        self._expected.append(_Expectation(tuple(call), result, error))

    def verify(self) -> None:
        if self._expected:
            left = [e.call for e in self._expected]
            raise AssertionError(f"expected calls not made: {left}")

    def _call(self, *call: Any) -> Any:
        self.calls.append(call)
        if not self._expected:
            raise AssertionError(f"unexpected call {call}")
        exp = self._expected.popleft()
        if exp.call != call:
            raise AssertionError(f"unexpected call {call}; expected {exp.call}")
        if exp.error is not None:
            raise exp.error
        return exp.result

    def get_partition_states(
        self, partitions: Sequence[TopicPartition]
    ) -> dict[TopicPartition, PartitionStateRead]:
        result: dict[TopicPartition, PartitionStateRead] = self._call(
            "get_partition_states", list(partitions)
        )
        return result

    def create_partition_states(
        self,
        states: Mapping[TopicPartition, LeaderIsrAndControllerEpoch],
        expected_controller_epoch_zk_version: int,
    ) -> dict[TopicPartition, MetadataStoreError | None]:
        result: dict[TopicPartition, MetadataStoreError | None] = self._call(
            "create_partition_states", dict(states), expected_controller_epoch_zk_version
        )
        return result

    def update_leader_and_isr(
        self,
        leader_and_isrs: Mapping[TopicPartition, LeaderAndIsr],
        controller_epoch: int,
        expected_controller_epoch_zk_version: int,
    ) -> UpdateLeaderAndIsrResult:
        result: UpdateLeaderAndIsrResult = self._call(
            "update_leader_and_isr",
            dict(leader_and_isrs),
            controller_epoch,
            expected_controller_epoch_zk_version,
        )
        return result

    def get_log_configs(
        self, topics: Collection[str], broker_defaults: Mapping[str, str]
    ) -> tuple[dict[str, dict[str, str]], dict[str, MetadataStoreError]]:
        result: tuple[dict[str, dict[str, str]], dict[str, MetadataStoreError]] = self._call(
            "get_log_configs", set(topics), dict(broker_defaults)
        )
        return result


class HoldingAuditSink(BulkAuditSink):
    """An audit sink that holds as the ``AuditWriter`` does (``hold`` and ``release``): ``records``
    is everything recorded (the writer's journal, kept by a ``RecordingAuditSink``), ``writable``
    how many of them the writer may write to the store now, and ``calls`` the hold and release
    calls, in order."""

    def __init__(self) -> None:
        self._journal = RecordingAuditSink()
        self.calls: list[str] = []
        self._holding_from: int | None = None

    @property
    def records(self) -> list[AuditRecord]:
        return self._journal.records

    def record(self, records: Sequence[AuditItem]) -> None:
        self._journal.record(records)

    def hold(self) -> None:
        self.calls.append("hold")
        if self._holding_from is None:
            self._holding_from = len(self.records)

    def release(self) -> None:
        self.calls.append("release")
        self._holding_from = None

    @property
    def writable(self) -> int:
        return len(self.records) if self._holding_from is None else self._holding_from
