"""The two fencing invariants (docs/reliability.md): caught when broken, quiet when kept — the stale-write one
also on a real ZooKeeper, whose zxids it relies on."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from kafka_controller.domain.values import (
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
    TopicPartition,
)
from kafka_controller.testing import fencing_invariants as FI
from kafka_controller.testing import invariants as I
from kafka_controller.testing import violation as V
from kafka_controller.testing.fencing_invariants import EpochWrites, FencingChecker, read_epoch_writes
from kafka_controller.zk import paths as P
from kafka_controller.zk.codecs import encode_partition_state
from kafka_controller.zk.kazoo_backend import KazooMetadataStore

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)


def names(violations: list[V.Violation]) -> list[str]:
    return [v.invariant for v in violations]


def test_one_controller_per_epoch_across_brokers_and_observations() -> None:
    checker = FencingChecker()
    assert checker.observe({1: [(4, [2])], 2: [(4, [2]), (5, [3])]}, None) == []
    # broker 3 answered only now, and it obeyed controller 1 at epoch 4: a zombie got through
    found = checker.observe({3: [(4, [1])]}, None)
    assert names(found) == [FI.SINGLE_CONTROLLER_PER_EPOCH]
    assert found[0].facts == {"controller_epoch": 4}
    assert "1 (by brokers [3])" in found[0].detail and "2 (by brokers [1, 2])" in found[0].detail
    assert checker.observe({3: [(4, [1])]}, None) == []  # reported once
    # one broker obeying two controllers in one epoch counts too
    assert names(FencingChecker().observe({1: [(7, [1, 2])]}, None)) == [FI.SINGLE_CONTROLLER_PER_EPOCH]


def test_state_written_with_an_older_epoch_after_the_epoch_moved() -> None:
    writes = EpochWrites(5, 0x200, {T0: (4, 0x1FF), T1: (4, 0x201)})
    found = FencingChecker().observe({}, writes)
    assert names(found) == [FI.NO_STALE_EPOCH_WRITE]
    assert found[0].subject == str(T1) and found[0].facts == {
        "controller_epoch": 4,
        "latest_controller_epoch": 5,
    }
    # the current controller's later writes, and older writes made before the bump, are fine
    assert FencingChecker().observe({}, EpochWrites(5, 0x200, {T0: (4, 0x1FF), T1: (5, 0x300)})) == []


def test_the_invariant_checker_runs_both_on_every_observation() -> None:
    state = LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 3, (1,), 0), 4)
    snap = I.Snapshot(
        1,
        5,
        frozenset({1}),
        {},
        {T0: state},
        acted_on={1: [(5, [1, 2])]},
        writes=EpochWrites(5, 10, {T0: (4, 11)}),
    )
    assert set(names(I.InvariantChecker().observe(snap))) == {
        FI.SINGLE_CONTROLLER_PER_EPOCH,
        FI.NO_STALE_EPOCH_WRITE,
    }
    assert {FI.SINGLE_CONTROLLER_PER_EPOCH, FI.NO_STALE_EPOCH_WRITE} <= set(I.INVARIANTS)


def _state(controller_epoch: int, leader_epoch: int) -> bytes:
    return encode_partition_state(
        LeaderIsrAndControllerEpoch(LeaderAndIsr(1, leader_epoch, (1,), 0), controller_epoch)
    )


@pytest.mark.zk
def test_a_late_write_by_a_deposed_controller_is_found_by_zxid(
    zk_connect: str, zk_client_factory: Any
) -> None:
    client = zk_client_factory()
    client.create(P.CONTROLLER_EPOCH_PATH, b"4", makepath=True)
    for tp in (T0, T1):
        client.create(P.topic_partition_state_path(tp), _state(4, 0), makepath=True)
    client.set(P.topic_partition_state_path(T0), _state(4, 1))  # epoch 4's write, before the bump
    client.set(P.CONTROLLER_EPOCH_PATH, b"5")  # a new controller won epoch 5
    client.set(P.topic_partition_state_path(T1), _state(4, 1))  # epoch 4's write lands after it
    store = KazooMetadataStore(zk_connect)
    try:
        writes = read_epoch_writes(store.read_raw, [T0, T1, TopicPartition("gone", 0)])
    finally:
        store.close()
    assert writes is not None and writes.controller_epoch == 5
    assert set(writes.states) == {T0, T1}
    found = FencingChecker().observe({}, writes)
    assert [v.subject for v in found] == [str(T1)]


@pytest.mark.zk
def test_no_controller_epoch_yet_reads_as_nothing_to_judge(zk_connect: str, zk_client_factory: Any) -> None:
    zk_client_factory().ensure_path("/")
    store = KazooMetadataStore(zk_connect)
    try:
        assert read_epoch_writes(store.read_raw, [T0]) is None
    finally:
        store.close()


class _ElectionDuringTheRead:
    """The six reads of ``read_snapshot``; a new controller (epoch 2) is elected and rewrites the
    state while the partition states are being read — the race the soak hit (seeds 500047 and
    500318: ``written by controller epoch 2 > 1``)."""

    def __init__(self) -> None:
        self.epoch = 1

    def get_controller_id(self) -> int:
        return 1

    def get_controller_epoch(self) -> tuple[int, int]:
        return self.epoch, self.epoch

    def get_all_brokers_and_epochs(self) -> list[Any]:
        return [SimpleNamespace(id=1), SimpleNamespace(id=2)]

    def get_all_topics(self) -> set[str]:
        return {"t"}

    def get_replica_assignment_and_topic_ids(self, topics: list[str]) -> dict[str, Any]:
        return {"t": SimpleNamespace(assignment={T0: ReplicaAssignment.of([1, 2])})}

    def get_partition_states(self, tps: list[TopicPartition]) -> dict[TopicPartition, Any]:
        self.epoch = 2
        return {T0: LeaderIsrAndControllerEpoch(LeaderAndIsr(2, 4, (2,), 3), 2)}


def test_a_controller_elected_during_a_snapshot_is_no_future_controller() -> None:
    checker = I.InvariantChecker()
    snap = I.read_snapshot(_ElectionDuringTheRead())  # type: ignore[arg-type]
    assert snap.controller_epoch == 2
    assert checker.observe(snap) == []
