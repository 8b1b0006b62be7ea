"""The audit trail is complete: replaying it gives ZooKeeper's leader and leader epoch for every
partition, whatever the controller did — checked in-process (real controllers on an in-memory
ZooKeeper, recording sinks) for the operations whose last write to a partition is not an election.

Found by the fault suite's replay invariant; kept here as a fast, deterministic reproduction.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kafka_controller.domain.values import TopicPartition
from kafka_controller.dryrun.recording import RecordingAuditSink
from kafka_controller.testing import audit_entries as AE
from kafka_controller.testing import invariants as I
from kafka_controller.testing import violation as V
from tests.controller.cluster import Answer, Cluster

TP = TopicPartition("t", 0)


@pytest.fixture
def cluster() -> Iterator[tuple[Cluster, dict[int, RecordingAuditSink]]]:
    sinks: dict[int, RecordingAuditSink] = {}
    c = Cluster(
        audit=lambda b: sinks.setdefault(b, RecordingAuditSink()),
        config={"auto.leader.rebalance.enable": "false"},
    )
    c.start_all([1, 2, 3])
    c.create_topic("t", {0: [1, 2]})
    yield c, sinks
    c.close()


def replay_violations(c: Cluster, sinks: dict[int, RecordingAuditSink]) -> list[V.Violation]:
    c.wait_idle()
    entries = AE.audit_entries_from_records(r for s in sinks.values() for r in s.records)
    return I.InvariantChecker().check_audit(entries, I.read_snapshot(c.admin))


def test_a_reassignment_that_keeps_its_leader_audits_its_leader_epoch_bumps(
    cluster: tuple[Cluster, dict[int, RecordingAuditSink]],
) -> None:
    """[1, 2] -> [1, 2, 3]: the leader stays, so the reassignment ends with Kafka's
    ``updateLeaderEpochAndSendRequest`` (docs/controller-behaviour.md §8.8, B3) — a leader-epoch
    write that must be audited
    like every other one, or the trail cannot say which epoch brokers were told."""
    c, sinks = cluster
    answer = Answer()
    c.active().controller.alter_partition_reassignments({TP: (1, 2, 3)}, answer)
    assert str(answer.get()[TP].error) == "NONE"
    c.respond_all()
    c.alter_isr(1, TP, [1, 2, 3])  # broker 3 caught up: the reassignment completes
    state = c.state(TP)
    assert state is not None and state.leader_and_isr.leader == 1 and state.leader_and_isr.leader_epoch == 2
    assert replay_violations(c, sinks) == []


def test_elections_failover_and_shutdown_leave_a_complete_trail(
    cluster: tuple[Cluster, dict[int, RecordingAuditSink]],
) -> None:
    c, sinks = cluster
    old = c.active().id
    c.stop(old)
    c.active()
    assert replay_violations(c, sinks) == []
    state = c.state(TP)
    assert state is not None and state.leader_and_isr.leader == 2  # the election is what replays
