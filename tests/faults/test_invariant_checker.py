"""The invariant checker itself: each invariant is caught when broken, and a healthy in-process
cluster (real controllers, in-memory ZooKeeper, recording audit sinks) passes them all — also
through a failover, a controlled shutdown, an election and a deletion."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kafka_controller.domain.audit_records import (
    AuditRecord,
    ControllerEventRecord,
    PartitionTransition,
    ReplicaTransition,
)
from kafka_controller.domain.values import (
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
    TopicPartition,
)
from kafka_controller.dryrun.recording import RecordingAuditSink
from kafka_controller.testing import audit_entries as AE
from kafka_controller.testing import invariants as I
from kafka_controller.testing import violation as V
from tests.controller.cluster import Answer, Cluster, wait_until

TP = TopicPartition("t", 0)


def snap(
    leader: int = 1,
    epoch: int = 3,
    isr: tuple[int, ...] = (1, 2),
    *,
    live: tuple[int, ...] = (1, 2, 3),
    controller_epoch: int = 2,
    replicas: tuple[I.ReplicaView, ...] = (),
) -> I.Snapshot:
    state = LeaderIsrAndControllerEpoch(LeaderAndIsr(leader, epoch, isr, 5), controller_epoch)
    return I.Snapshot(
        1, controller_epoch, frozenset(live), {TP: ReplicaAssignment.of([1, 2])}, {TP: state}, {}, replicas
    )


def view(broker: int, epoch: int, leader: bool, leo: int = 100, hw: int = 90) -> I.ReplicaView:
    return I.ReplicaView(broker, TP, epoch, leader, leo, hw)


def names(violations: list[V.Violation]) -> set[str]:
    return {v.invariant for v in violations}


def test_a_healthy_history_has_no_violation() -> None:
    checker = I.InvariantChecker()
    assert checker.observe(snap(replicas=(view(1, 3, True, 100, 90), view(2, 3, False, 95, 90)))) == []
    later = snap(leader=2, epoch=4, isr=(2,), controller_epoch=3, replicas=(view(2, 4, True, 120, 95),))
    assert checker.observe(later) == []
    assert checker.check_settled(later) == []


def test_leader_outside_the_isr() -> None:
    assert names(I.InvariantChecker().observe(snap(leader=3, isr=(1, 2)))) == {I.LEADER_IN_ISR}


def test_leader_and_controller_epochs_never_go_back() -> None:
    checker = I.InvariantChecker()
    checker.observe(snap(epoch=5, controller_epoch=4))
    found = checker.observe(snap(epoch=4, controller_epoch=3))
    assert names(found) == {I.LEADER_EPOCH_MONOTONIC, I.CONTROLLER_EPOCH_MONOTONIC}


def test_two_leaders_in_one_leader_epoch_even_at_different_times() -> None:
    checker = I.InvariantChecker()
    assert checker.observe(snap(replicas=(view(1, 3, True),))) == []
    assert names(checker.observe(snap(replicas=(view(2, 3, True),)))) == {I.SINGLE_LEADER_PER_EPOCH}


def test_partition_with_a_live_isr_replica_and_no_live_leader() -> None:
    checker = I.InvariantChecker()
    assert names(checker.check_settled(snap(leader=1, isr=(1, 2), live=(2, 3)))) == {I.LIVE_LEADER}
    assert checker.check_settled(snap(leader=-1, isr=(1,), live=(2, 3))) == []  # nobody to elect


def test_committed_high_watermark_lost_unless_an_unclean_election_is_recorded() -> None:
    checker = I.InvariantChecker()
    checker.observe(snap(replicas=(view(1, 3, True, 100, 90),)))
    after = snap(leader=2, epoch=4, isr=(2,), replicas=(view(2, 4, True, 50, 40),))
    checker.observe(after)
    assert names(checker.check_settled(after)) == {I.COMMITTED_DATA_KEPT}
    assert checker.check_settled(after, unclean={TP}) == []


def entry(
    seq: int | None, epoch_after: int | None = None, leader: int | None = None, **kw: object
) -> AE.AuditEntry:
    fields: dict[str, object] = {
        "kind": "partition",
        "controller_id": 1,
        "controller_epoch": 2,
        "sequence": seq,
    }
    fields.update(topic="t", partition=0, to_state="OnlinePartition", outcome="ok")
    fields.update(leader_after=leader, leader_epoch_after=epoch_after)
    fields.update(kw)
    return AE.AuditEntry(**fields)  # type: ignore[arg-type]


def test_audit_gaps_duplicates_and_missing_sequences() -> None:
    s = snap(leader=1, epoch=3)
    good = [AE.AuditEntry("event", 1, 2, 1, event="elected"), entry(2, 3, 1), entry(3)]
    assert I.InvariantChecker().check_audit(good, s) == []
    gap = [AE.AuditEntry("event", 1, 2, 1, event="elected"), entry(3, 3, 1)]
    dup = [*good, entry(3)]
    none = [*good, entry(None)]
    for broken in (gap, dup, none):
        assert names(I.InvariantChecker().check_audit(broken, s)) == {I.AUDIT_EXACTLY_ONCE}


def test_audit_replay_must_give_zookeeper_state() -> None:
    s = snap(leader=1, epoch=3)
    assert I.InvariantChecker().check_audit([entry(1, 2, 1)], s)[0].invariant == I.AUDIT_REPLAY
    assert I.InvariantChecker().check_audit([entry(1, 3, 2)], s)[0].invariant == I.AUDIT_REPLAY
    assert (
        I.InvariantChecker().check_audit([entry(1, 3, 1, outcome="failed")], s)[0].invariant == I.AUDIT_REPLAY
    )
    gone = I.Snapshot(1, 2, frozenset({1, 2}), {}, {})
    found = I.InvariantChecker().check_audit([entry(1, 3, 1)], gone)
    assert [v.invariant for v in found] == [I.AUDIT_REPLAY]  # deleted without a recorded deletion
    deleted = [
        entry(1, 3, 1),
        entry(2, to_state="OfflinePartition"),
        entry(3, to_state="NonExistentPartition"),
    ]
    assert I.InvariantChecker().check_audit(deleted, gone) == []


# -- a real (in-process) cluster -----------------------------------------------------------------
@pytest.fixture
def cluster() -> Iterator[tuple[Cluster, dict[int, RecordingAuditSink]]]:
    sinks: dict[int, RecordingAuditSink] = {}

    def sink(b: int) -> RecordingAuditSink:
        sinks.setdefault(b, RecordingAuditSink())  # one sink per broker id, across restarts
        return sinks[b]

    c = Cluster(audit=sink, config={"auto.leader.rebalance.enable": "false"})
    c.start_all([1, 2, 3])
    yield c, sinks
    c.close()


def _entries(sinks: dict[int, RecordingAuditSink]) -> list[AE.AuditEntry]:
    return AE.audit_entries_from_records(r for s in sinks.values() for r in s.records)


def test_an_in_process_cluster_keeps_every_invariant_through_faults(
    cluster: tuple[Cluster, dict[int, RecordingAuditSink]],
) -> None:
    c, sinks = cluster
    checker = I.InvariantChecker()

    def check() -> list[V.Violation]:
        c.wait_idle()
        s = I.read_snapshot(c.admin)
        return checker.observe(s) + checker.check_settled(s) + checker.check_audit(_entries(sinks), s)

    c.create_topic("t", {p: [1 + p % 3, 1 + (p + 1) % 3, 1 + (p + 2) % 3] for p in range(6)})
    c.create_topic("gone", {0: [2, 3]})
    assert check() == []
    old = c.active().id
    c.stop(old)  # failover
    wait_until(lambda: c.admin.get_controller_id() not in (None, old), "a new controller")
    assert check() == []
    active = c.active()
    victim = next(b for b in (1, 2, 3) if b not in (old, active.id))
    answer = Answer()
    active.controller.controlled_shutdown(victim, c.brokers[victim].epoch, answer)
    answer.get()
    c.stop(victim)
    assert check() == []
    c.start(old)
    c.start(victim)
    elected = Answer()
    active.controller.elect_leaders(None, "preferred", elected)
    elected.get()
    c.admin.create_delete_topic_path("gone")

    def deleted() -> bool:
        c.respond_all()
        return not c.admin.topic_exists("gone")

    wait_until(deleted, "topic deletion completes")
    assert check() == []
    assert checker.observations == 4


def test_the_audit_store_reads_back_as_the_records_that_went_in(tmp_path: Path) -> None:
    """``read_audit_entries`` (the audit database) and ``audit_entries_from_records`` (an in-memory
    sink) see the same trail, so the fault suite checks exactly what the controller recorded."""
    from kafka_controller.audit.writer import AuditWriter

    records: list[AuditRecord] = [
        ControllerEventRecord("elected", 2, 5, 1_700_000_000_000, 1.5, "epoch 5", sequence=1),
        PartitionTransition(
            "t", 0, "OfflinePartition", "OnlinePartition", leader_before=1, leader_after=2,
            leader_epoch_before=3, leader_epoch_after=4, unclean=True, controller_id=2,
            controller_epoch=5, sequence=2, timestamp_ms=1_700_000_000_001,
        ),
        ReplicaTransition(
            "t", 0, 1, "OnlineReplica", "OfflineReplica", leader_before=2, leader_after=2,
            leader_epoch_before=4, leader_epoch_after=5, controller_id=2, controller_epoch=5,
            sequence=3, timestamp_ms=1_700_000_000_002,
        ),
    ]  # fmt: skip
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    writer = AuditWriter(url, spool_dir=tmp_path / "spool")
    writer.record(records)
    assert writer.wait_replayed(30)
    writer.close()
    expected = AE.audit_entries_from_records(records)
    assert sorted(AE.read_audit_entries(url), key=repr) == sorted(expected, key=repr)
    assert AE.unclean_partitions(expected) == {TP}
    assert [e.wrote_leader_epoch for e in expected] == [False, True, True]
