"""The controlled shutdown's followers' ISR removal written alongside the election
(``ReplicaIsrRemoval.start_isr_removal``, ``controller.shutdown`` module docs).

The write goes out on its own thread before the election's and is taken up by the replica state
machine's call: the store, the context, the requests and the audit records must be those of the
same flow written one stage after the other, also when the early write fails, and an early
write nobody takes up (the election raised) must still reach the context.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

import pytest

from kafka_controller.domain.audit_records import OUTCOME_FAILED
from kafka_controller.domain.errors import ControllerMovedError, StoreUnavailableError
from kafka_controller.domain.states import ReplicaState
from kafka_controller.domain.values import LeaderAndIsr, PartitionAndReplica, TopicPartition
from kafka_controller.testing.core_harness import UNCLEAN_LEADER_ELECTION_ENABLE, CoreHarness
from kafka_controller.testing.recording import RecordingAuditSink

BROKERS = [1, 2, 3, 4]
DEFAULTS = {UNCLEAN_LEADER_ELECTION_ENABLE: "false"}
#: Broker 2 leads t-1 and t-3 and follows t-0, t-2 and t-4 (t-5 does not host it: left alone).
LAYOUT = [[1, 2, 3], [2, 3, 4], [3, 2, 1], [2, 1, 4], [4, 2, 3], [1, 3, 4]]
FOLLOWED = {TopicPartition("t", p) for p in (0, 2, 4)}
LED = {TopicPartition("t", p) for p in (1, 3)}


def _harness(early: bool, audit: RecordingAuditSink | None = None) -> CoreHarness:
    h = CoreHarness(BROKERS, broker_config=DEFAULTS, audit=audit or RecordingAuditSink())
    h.create_topic("t", LAYOUT)
    if not early:  # the same flow, the ISR removal written by the replica state machine's call
        h.rsm.start_isr_removal = lambda replica_id, partitions: None  # type: ignore[method-assign]
    return h


def _writes(h: CoreHarness, fail_isr_write: bool = False) -> list[tuple[str, frozenset[TopicPartition]]]:
    """Record each state write's partitions and the thread that made it; optionally fail the
    followers' ISR-removal write (a lost session), as the store would."""
    calls: list[tuple[str, frozenset[TopicPartition]]] = []
    real = h.store.update_leader_and_isr

    def recording(states: Mapping[TopicPartition, LeaderAndIsr], epoch: int, zkv: int) -> Any:
        tps = frozenset(states)
        calls.append((threading.current_thread().name, tps))
        if fail_isr_write and tps == FOLLOWED:
            raise StoreUnavailableError("ZooKeeper session is suspended")
        return real(states, epoch, zkv)

    h.store.update_leader_and_isr = recording  # type: ignore[method-assign]
    return calls


def _outcome(h: CoreHarness, audit: RecordingAuditSink) -> dict[str, Any]:
    ctx = h.context
    tps = sorted(ctx.all_partitions)
    return {
        "store": {tp: repr(r) for tp, r in h.store.get_partition_states(tps).items()},
        "leadership": dict(ctx.partitions_leadership_info),
        "replica_states": dict(ctx.replica_states),
        "sent": sorted((s.broker_id, type(s.request).__name__, repr(s.request)) for s in h.channel.sent),
        "records": list(audit.records),
    }


def test_the_isr_removal_is_written_on_its_own_thread_before_the_election() -> None:
    h = _harness(early=True)
    calls = _writes(h)
    assert h.controlled_shutdown(2) == set()
    written = [tps for _, tps in calls]
    assert written == [FOLLOWED, LED]  # Kafka's order would be [LED, FOLLOWED]
    assert calls[0][0] == "isr-removal-2" and calls[1][0] == threading.current_thread().name
    assert h.rsm._early_removal is None  # taken up


@pytest.mark.parametrize("fail_isr_write", [False, True])
def test_store_context_requests_and_records_are_those_of_the_staged_writes(fail_isr_write: bool) -> None:
    outcomes = []
    for early in (True, False):
        audit = RecordingAuditSink()
        h = _harness(early, audit)
        _writes(h, fail_isr_write)
        h.controlled_shutdown(2)
        outcomes.append(_outcome(h, audit))
    assert outcomes[0] == outcomes[1]
    failed = [r for r in outcomes[0]["records"] if getattr(r, "outcome", None) == OUTCOME_FAILED]
    assert len(failed) == (len(FOLLOWED) if fail_isr_write else 0)
    isrs = {tp: i.leader_and_isr.isr for tp, i in outcomes[0]["leadership"].items() if tp in FOLLOWED}
    assert all((2 in isr) == fail_isr_write for isr in isrs.values()), isrs


def test_an_early_write_the_election_leaves_behind_reaches_the_context() -> None:
    """The election raises (the controller moved): the ISR removal already written is cached, so
    the context matches the store; the replicas' transitions did not happen and are not recorded."""
    audit = RecordingAuditSink()
    h = _harness(early=True, audit=audit)

    def moved(*_: Any, **__: Any) -> Any:
        raise ControllerMovedError("Controller epoch zkVersion check fails")

    h.psm.handle_state_changes = moved  # type: ignore[method-assign]
    before = len(audit.records)
    with pytest.raises(ControllerMovedError):
        h.controlled_shutdown(2)
    assert h.rsm._early_removal is None
    stored = h.store.get_partition_states(sorted(FOLLOWED))
    for tp in FOLLOWED:
        cached = h.context.partition_leadership_info(tp)
        assert cached is not None and 2 not in cached.leader_and_isr.isr
        assert cached.leader_and_isr == stored[tp].leader_and_isr  # type: ignore[union-attr]
        assert h.context.replica_states[PartitionAndReplica(tp, 2)] is ReplicaState.ONLINE_REPLICA
    assert len(audit.records) == before


def test_nothing_is_written_early_when_a_replica_may_not_go_offline() -> None:
    """A followed replica whose transition would be refused: no early write (the replica state
    machine's own call decides, as in Kafka)."""
    h = _harness(early=True)
    replica = PartitionAndReplica(TopicPartition("t", 0), 2)
    h.context.replica_states[replica] = ReplicaState.NON_EXISTENT_REPLICA
    h.rsm.start_isr_removal(2, sorted(FOLLOWED))
    assert h.rsm._early_removal is None


def test_off_without_cached_writes() -> None:
    """Kafka's read-then-write rounds (the ported tests' setting) keep Kafka's order."""
    h = CoreHarness(BROKERS, broker_config=DEFAULTS, write_on_cached_zk_version=False)
    h.create_topic("t", LAYOUT)
    calls = _writes(h)
    h.controlled_shutdown(2)
    assert [tps for _, tps in calls] == [LED, FOLLOWED]


def test_the_controllers_controlled_shutdown_writes_the_isr_removal_early() -> None:
    """``KafkaController`` (``controller.shutdown``): the followed partitions' ISR removal is
    written on its own thread before the led partitions' election, and the outcome is Kafka's."""
    from tests.controller.cluster import Answer, Cluster

    cluster = Cluster()
    try:
        cluster.start_all([0, 1, 2])
        cluster.create_topic("t", {0: [0, 1, 2], 1: [1, 2, 0]})
        t0, t1 = TopicPartition("t", 0), TopicPartition("t", 1)
        cluster.wait_state(t0, 1, 0, 0, "topic creation")
        cluster.wait_state(t1, 1, 1, 0, "topic creation")
        active = cluster.active()
        victim = next(b for b in (1, 2) if b != active.id)
        store = active.store
        calls: list[tuple[str, frozenset[TopicPartition]]] = []
        real = store.update_leader_and_isr

        def recording(states: Mapping[TopicPartition, LeaderAndIsr], epoch: int, zkv: int) -> Any:
            calls.append((threading.current_thread().name, frozenset(states)))
            return real(states, epoch, zkv)

        store.update_leader_and_isr = recording
        answer = Answer()
        active.controller.controlled_shutdown(victim, cluster.brokers[victim].epoch, answer)
        led = {t1} if victim == 1 else set()
        assert set(answer.get()) == set()
        followed = {t0, t1} - led
        assert calls[0] == (f"isr-removal-{victim}", frozenset(followed))
        for tp in (t0, t1):
            state = cluster.state(tp)
            assert state is not None and victim not in state.leader_and_isr.isr
    finally:
        cluster.close()
