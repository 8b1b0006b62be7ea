"""The harness's flows against Kafka's worked numbers, and its refusals of bad input.

The stateful test trusts ``CoreHarness`` to run Kafka's flows; these pin the flows down where
Kafka's outcomes are exact (the leader-epoch accounting of docs/controller-behaviour.md §8.8,
the controlled shutdown of docs/controller-behaviour.md §8.7, the initial leader and ISR of
docs/controller-behaviour.md §3.5), and check that a refused call writes nothing anywhere.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from kafka_controller.domain.errors import BrokerNotAvailableError, InvalidArgumentError
from kafka_controller.domain.requests import LeaderAndIsrRequest, StopReplicaRequest
from kafka_controller.domain.states import PartitionState, ReplicaState
from kafka_controller.domain.values import (
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    PartitionAndReplica,
    ReplicaAssignment,
    TopicPartition,
)
from kafka_controller.testing.core_harness import CoreHarness

TP = TopicPartition("t", 0)


def stored(h: CoreHarness, tp: TopicPartition = TP) -> LeaderAndIsr:
    read = h.store.get_partition_states([tp])[tp]
    assert isinstance(read, LeaderIsrAndControllerEpoch)
    return read.leader_and_isr


def snapshot(h: CoreHarness) -> tuple[Any, ...]:
    ctx = h.context
    return (
        {p: h.store.tree.get(p) for p in h.store.tree.paths()},
        dict(ctx.partition_states),
        dict(ctx.replica_states),
        {t: dict(a) for t, a in ctx.partition_assignments.items()},
        dict(ctx.partitions_leadership_info),
        ctx.live_broker_id_and_epochs,
        set(ctx.shutting_down_broker_ids),
        len(h.channel.sent),
    )


def test_new_topic_leads_with_first_live_replica_and_isr_of_live_replicas() -> None:
    h = CoreHarness([1, 2, 3])
    h.fail_brokers([2])
    h.create_topic("t", [[2, 3, 1], [2, 1, 3]])
    h.create_topic("u", [[2]])
    assert stored(h) == LeaderAndIsr(3, 0, (3, 1), 0)  # docs/controller-behaviour.md §3.5
    assert stored(h, TopicPartition("t", 1)) == LeaderAndIsr(1, 0, (1, 3), 0)
    assert h.context.partition_states[TopicPartition("u", 0)] is PartitionState.NEW_PARTITION
    requests = [s for s in h.channel.sent if isinstance(s.request, LeaderAndIsrRequest)]
    assert sorted(s.broker_id for s in requests) == [1, 3]  # isNew LeaderAndIsr to the new ISR
    assert all(p.is_new for s in requests for p in s.request.partition_states)  # type: ignore[union-attr]
    h.start_brokers([2])  # the New partition is initialised by trigger-online
    assert stored(h, TopicPartition("u", 0)) == LeaderAndIsr(2, 0, (2,), 0)


def test_reassignment_epochs_with_target_alive() -> None:
    """docs/controller-behaviour.md §8.8: [c] -> [o] with o alive: A1 gives 1; when o joins the
    ISR, B3 gives 2 and B4 gives 3."""
    h = CoreHarness([1, 2])
    h.create_topic("t", [[1]])
    assert h.reassign(TP, [2]) == ReplicaAssignment((2, 1), (2,), (1,))
    assert stored(h) == LeaderAndIsr(1, 1, (1,), 1)
    assert h.context.replica_states[PartitionAndReplica(TP, 2)] is ReplicaState.NEW_REPLICA
    h.set_isr(TP, [1, 2])
    assert h.context.partition_full_replica_assignment(TP) == ReplicaAssignment((2,))
    assert stored(h) == LeaderAndIsr(2, 3, (2,), 4)  # zk version 2 was the AlterIsr
    assert PartitionAndReplica(TP, 1) not in h.context.replica_states
    assert TP not in h.context.partitions_being_reassigned
    topic = h.store.get_replica_assignment_and_topic_ids(["t"])["t"]
    assert dict(topic.assignment) == {TP: ReplicaAssignment((2,))}  # type: ignore[union-attr]
    stops = [s for s in h.channel.sent if s.broker_id == 1 and isinstance(s.request, StopReplicaRequest)]
    assert stops, "the removed replica was never told to stop"


def test_reassignment_epochs_with_target_down_at_the_start() -> None:
    """docs/controller-behaviour.md §8.8: with o down, A1 gives 1; o's startup resumes the
    reassignment (A1 again: 2, and an invalid NewReplica); then B3 gives 3 and B4 gives 4. Only
    the ZooKeeper path allows a dead o."""
    h = CoreHarness([1, 2])
    h.create_topic("t", [[1]])
    h.fail_brokers([2])
    with pytest.raises(InvalidArgumentError, match=r"adding replicas \[2\] of t-0 are not live"):
        h.reassign(TP, [2])
    h.reassign(TP, [2], from_zk=True)
    assert stored(h).leader_epoch == 1
    h.start_brokers([2])
    assert stored(h).leader_epoch == 2
    invalid = [r for r in h.audit.records if r.outcome == "invalid"]  # type: ignore[attr-defined]
    assert [(r.replica, r.from_state, r.to_state) for r in invalid] == [(2, "OnlineReplica", "NewReplica")]
    h.set_isr(TP, [1, 2])
    assert stored(h) == LeaderAndIsr(2, 4, (2,), 5)


def test_controlled_shutdown_moves_led_partitions_and_reports_the_rest() -> None:
    h = CoreHarness([1, 2, 3])
    h.create_topic("t", [[1, 2], [2, 1]])
    h.create_topic("single", [[1]])
    assert h.controlled_shutdown(1) == set()  # "single" has RF 1: ignored, not reported
    # (docs/controller-behaviour.md §8.7: only partitions with more than one replica are acted on)
    assert stored(h) == LeaderAndIsr(2, 1, (2,), 1)  # every shutting-down broker leaves the ISR
    assert stored(h, TopicPartition("t", 1)) == LeaderAndIsr(2, 1, (2,), 1)  # follower: ISR shrink
    assert stored(h, TopicPartition("single", 0)) == LeaderAndIsr(1, 0, (1,), 0)
    h.create_topic("u", [[2, 1]])
    h.fail_brokers([1])
    h.start_brokers([1])
    # 1 came back but never rejoined an ISR: nothing can take over from 2
    assert h.controlled_shutdown(2) == {
        TopicPartition("u", 0),
        TopicPartition("t", 0),
        TopicPartition("t", 1),
    }


def test_refused_calls_write_nothing() -> None:
    h = CoreHarness([1, 2, 3])
    h.create_topic("t", [[1, 2]])
    before = snapshot(h)
    calls: list[tuple[Callable[[], object], type[Exception], str]] = [
        (lambda: h.create_topic("t", [[1]]), InvalidArgumentError, "already exists"),
        (lambda: h.create_topic("bad/name", [[1]]), InvalidArgumentError, "illegal characters"),
        (lambda: h.create_topic("u", [[1, 1]]), InvalidArgumentError, "duplicate"),
        (lambda: h.create_topic("u", [[1], [1, 2]]), InvalidArgumentError, "replication factors"),
        (lambda: h.fail_brokers([9]), BrokerNotAvailableError, "broker 9 is not registered"),
        (lambda: h.fail_brokers("1"), InvalidArgumentError, "string"),  # type: ignore[arg-type]
        (lambda: h.start_brokers([1]), InvalidArgumentError, "already registered"),
        (lambda: h.start_brokers([-1]), InvalidArgumentError, "non-negative"),
        (lambda: h.controlled_shutdown(9), BrokerNotAvailableError, "not registered"),
        (lambda: h.preferred_election([TopicPartition("t", 5)]), InvalidArgumentError, "unknown partition"),
        (lambda: h.unclean_election([TopicPartition("x", 0)]), InvalidArgumentError, "unknown partition"),
        (lambda: h.set_isr(TP, [2]), InvalidArgumentError, "must contain the leader 1"),
        (lambda: h.set_isr(TP, [1, 3]), InvalidArgumentError, r"distinct replicas of \[1, 2\]"),
        (lambda: h.set_isr(TP, [1, 1]), InvalidArgumentError, "distinct replicas"),
        (lambda: h.reassign(TP, []), InvalidArgumentError, "invalid target replicas"),
        (lambda: h.reassign(TP, [1, 1]), InvalidArgumentError, "invalid target replicas"),
        (lambda: h.reassign(TP, [-3]), InvalidArgumentError, "non-negative"),
        (lambda: h.enable_unclean_leader_election("x"), InvalidArgumentError, "unknown topic"),
    ]
    for call, error, message in calls:
        with pytest.raises(error, match=message):
            call()
        assert snapshot(h) == before, f"a refused call changed something ({message})"
    h.fail_brokers([2])
    h.set_isr(TP, [1])  # allowed: 2 is dead, shrinking is fine
    before = snapshot(h)
    with pytest.raises(InvalidArgumentError, match=r"brokers \[2\] are not live"):
        h.set_isr(TP, [1, 2])
    with pytest.raises(InvalidArgumentError, match=r"adding replicas \[4\] of t-0 are not live"):
        h.reassign(TP, [4, 2])  # 2 is dead but an origin replica: only 4 is "adding"
    assert snapshot(h) == before


def test_re_adding_a_kafka_5083_remnant_completes_at_once_and_leaves_a_stateless_leader() -> None:
    """Kafka-faithful, found by the stateful test. An adding replica that became the only ISR
    member is dropped by a cancel (U3: offline, but kept in the ISR, KAFKA-5083). Re-adding it
    finds TRS ⊆ ISR, so phase B runs at once: no NewReplica (A2), B1's NonExistent -> Online is
    invalid, and B3 elects it. It now leads with no replica state, so when its broker dies the
    OfflineReplica transition is invalid too and the store keeps the dead leader."""
    h = CoreHarness([1, 2, 3, 4, 5])
    h.create_topic("t", [[1]], {"unclean.leader.election.enable": "true"})
    h.fail_brokers([1])
    h.reassign(TP, [4])  # phase A: RS [4, 1]
    h.trigger_online()  # unclean: 4 (an adding replica) leads, ISR [4]
    assert stored(h) == LeaderAndIsr(4, 3, (4,), 3)
    h.reassign(TP, [1])  # cancel: 4 leaves the replicas but stays in the ISR, with no leader
    assert stored(h) == LeaderAndIsr(-1, 4, (4,), 4)
    assert PartitionAndReplica(TP, 4) not in h.context.replica_states
    h.reassign(TP, [4])  # complete at once
    assert h.context.partition_full_replica_assignment(TP) == ReplicaAssignment((4,))
    assert stored(h).leader == 4
    assert h.context.replica_states[PartitionAndReplica(TP, 4)] is ReplicaState.NON_EXISTENT_REPLICA
    invalid = [(r.replica, r.from_state, r.to_state) for r in h.audit.records if r.outcome == "invalid"]  # type: ignore[attr-defined]
    assert (4, "NonExistentReplica", "OnlineReplica") in invalid
    h.fail_brokers([4])
    assert h.context.partition_states[TP] is PartitionState.OFFLINE_PARTITION
    assert stored(h).leader == 4  # the dead leader stays: its replica could not go offline
