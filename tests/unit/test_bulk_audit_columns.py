"""A bulk audit sink gets a failover's OfflineReplica and election records as columns built at
C speed (no per-row ``add``), and they expand to exactly the rows, in the order, that a sink
taking single records gets, failures in the middle of a run included."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import pytest

from kafka_controller.core.context import ControllerContext
from kafka_controller.core.log_budget import LogBudget
from kafka_controller.core.partition_state_machine import PartitionStateMachine
from kafka_controller.core.replica_state_machine import ReplicaStateMachine
from kafka_controller.core.strategies import OfflinePartitionLeaderElectionStrategy
from kafka_controller.domain.audit_records import (
    AuditItem,
    AuditRecord,
    PartitionTransitionColumns,
    ReplicaTransitionColumns,
)
from kafka_controller.domain.states import PartitionState, ReplicaState
from kafka_controller.domain.values import (
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    PartitionAndReplica,
    TopicPartition,
)
from kafka_controller.dryrun.memory_store import InMemoryMetadataStore
from kafka_controller.dryrun.recording import RecordingAuditSink
from kafka_controller.testing.doubles import RecordingRequestBatch
from tests.unit.offline_cluster import offline_cluster

N = 40
MISSING = {7, 23}  # partitions whose state znode is gone: their ISR removal fails


class SingleRecordSink:
    """A sink that takes no bulk records: the state machines build one record per row for it."""

    def __init__(self) -> None:
        self.records: list[AuditRecord] = []

    def record(self, records: Sequence[AuditItem]) -> None:
        assert not any(isinstance(r, ReplicaTransitionColumns | PartitionTransitionColumns) for r in records)
        self.records.extend(records)  # type: ignore[arg-type]


def _cluster(
    isr_of: dict[int, tuple[int, ...]],
) -> tuple[ControllerContext, InMemoryMetadataStore, list[TopicPartition]]:
    """``N`` partitions on brokers (1, 2) led by broker 1 (dead), broker 2 alive; partition ``p``'s
    ISR is ``isr_of.get(p, (1, 2))``; no state znode for the ``MISSING`` ones."""
    tps = [TopicPartition("t", p) for p in range(N)]
    states = {
        tp: LeaderIsrAndControllerEpoch(
            LeaderAndIsr(1, 3 + tp.partition, isr_of.get(tp.partition, (1, 2)), 0), 1
        )
        for tp in tps
    }
    return offline_cluster(states, MISSING)


def _offline_replicas(sink: object, arm: object = None) -> list[AuditRecord]:
    ctx, store, tps = _cluster({})
    if callable(arm):
        arm()
    rsm = ReplicaStateMachine(7, ctx, store, RecordingRequestBatch(), audit=sink)  # type: ignore[arg-type]
    replicas = [PartitionAndReplica(tp, 1) for tp in tps]
    for r in replicas:
        ctx.put_replica_state(r, ReplicaState.ONLINE_REPLICA)
    rsm.handle_state_changes(replicas, ReplicaState.OFFLINE_REPLICA)
    return list(sink.records)  # type: ignore[attr-defined]


def _elections(sink: object) -> list[AuditRecord]:
    # odd partitions: ISR only the dead broker 1, so no clean election (failed); even: broker 2 elected
    ctx, store, tps = _cluster({p: (1,) for p in range(1, N, 2)})
    psm = PartitionStateMachine(7, ctx, store, RecordingRequestBatch(), audit=sink)  # type: ignore[arg-type]
    psm.handle_state_changes(
        [tp for tp in tps if tp.partition not in MISSING],
        PartitionState.ONLINE_PARTITION,
        OfflinePartitionLeaderElectionStrategy(False),
    )
    return list(sink.records)  # type: ignore[attr-defined]


def _no_per_row_add(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: object, **__: object) -> None:
        raise AssertionError("a bulk record was filled one row at a time")

    monkeypatch.setattr(ReplicaTransitionColumns, "add", refuse)
    monkeypatch.setattr(PartitionTransitionColumns, "add", refuse)


def test_offline_replicas_go_to_a_bulk_sink_as_columns_with_the_single_records_rows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    expected = _offline_replicas(SingleRecordSink())
    assert [getattr(r, "outcome", None) for r in expected].count("failed") == len(MISSING)  # failures mid-run
    assert [r.partition for r in expected if r.outcome == "failed"] == sorted(MISSING)  # type: ignore[union-attr]
    _no_per_row_add(monkeypatch)
    assert _offline_replicas(RecordingAuditSink()) == expected


def test_elections_go_to_a_bulk_sink_as_columns_with_the_single_records_rows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    expected = _elections(SingleRecordSink())
    outcomes = [getattr(r, "outcome", None) for r in expected]
    assert outcomes.count("ok") == N // 2 and outcomes.count("failed") == N // 2 - len(MISSING)
    _no_per_row_add(monkeypatch)
    assert _elections(RecordingAuditSink()) == expected


def test_a_replica_call_aborted_mid_run_still_records_the_runs_successes_as_successes(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The successes held in a run when the call fails are recorded "ok", the rest "failed"."""
    # the ISR-removal info line is asked for once per success, in the loop that holds the run
    caplog.set_level(logging.INFO, logger="kafka_controller.state_change")

    def run_until_aborted(sink: object) -> list[AuditRecord]:
        calls: dict[int, int] = {}  # per budget: the failure lines have their own
        real = LogBudget.take

        def flaky(self: LogBudget) -> bool:
            calls[id(self)] = calls.get(id(self), 0) + 1
            if calls[id(self)] == N // 2:
                raise RuntimeError("boom")
            return real(self)

        with monkeypatch.context() as m:
            arm = lambda: m.setattr(LogBudget, "take", flaky)  # noqa: E731
            return _offline_replicas(sink, arm)

    expected = run_until_aborted(SingleRecordSink())
    _no_per_row_add(monkeypatch)
    got = run_until_aborted(RecordingAuditSink())
    assert got == expected
    # the 20th success's log line raised: 19 recorded "ok", every other replica "failed"
    assert [getattr(r, "outcome", None) for r in got].count("ok") == N // 2 - 1
