"""The controlled shutdown's followers' ISR removal written in the election's store call
(``ReplicaIsrRemoval.start_isr_removal``, ``controller.shutdown`` module docs, deviation 18).

Its outcome is taken up by the replica state machine's call: the store, the context, the requests
and the audit records must be those of the same flow written one stage after the other, also when
some of its writes fail or hit BADVERSION, and a write nobody takes up (the election raised after
its call) must still reach the context.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from kafka_controller.domain.audit_records import OUTCOME_FAILED
from kafka_controller.domain.errors import ControllerMovedError, MetadataStoreError
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


def _writes(h: CoreHarness, fail_isr_writes: bool = False) -> list[frozenset[TopicPartition]]:
    """Record each state write call's partitions; optionally fail t-0's ISR removal (a per-znode
    error) and send t-2's back for a retry (BADVERSION), leaving both znodes unwritten."""
    calls: list[frozenset[TopicPartition]] = []
    real = h.store.update_leader_and_isr
    t0, t2 = TopicPartition("t", 0), TopicPartition("t", 2)

    def recording(states: Mapping[TopicPartition, LeaderAndIsr], epoch: int, zkv: int) -> Any:
        calls.append(frozenset(states))
        broken = {t0, t2} if fail_isr_writes and t0 in states else set()  # the removal's first round
        result = real({tp: s for tp, s in states.items() if tp not in broken}, epoch, zkv)
        if t0 in broken:
            result.finished[t0] = MetadataStoreError("CONNECTIONLOSS")
        if t2 in broken:
            result.to_retry.append(t2)
        return result

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


def test_the_isr_removal_goes_in_the_elections_store_call() -> None:
    h = _harness(early=True)
    calls = _writes(h)
    assert h.controlled_shutdown(2) == set()
    assert calls == [LED | FOLLOWED]  # Kafka's order: [LED, FOLLOWED], one write stage after the other
    assert h.rsm._early_removal is None  # taken up


@pytest.mark.parametrize("fail_isr_writes", [False, True])
def test_store_context_requests_and_records_are_those_of_the_staged_writes(fail_isr_writes: bool) -> None:
    outcomes = []
    for early in (True, False):
        audit = RecordingAuditSink()
        h = _harness(early, audit)
        _writes(h, fail_isr_writes)
        h.controlled_shutdown(2)
        outcomes.append(_outcome(h, audit))
    assert outcomes[0] == outcomes[1]
    failed = [r for r in outcomes[0]["records"] if getattr(r, "outcome", None) == OUTCOME_FAILED]
    assert len(failed) == (1 if fail_isr_writes else 0)  # t-0; t-2 is retried (read, written)
    isrs = {
        tp.partition: i.leader_and_isr.isr for tp, i in outcomes[0]["leadership"].items() if tp in FOLLOWED
    }
    assert {p for p, isr in isrs.items() if 2 in isr} == ({0} if fail_isr_writes else set()), isrs


def test_a_write_the_election_leaves_behind_reaches_the_context() -> None:
    """The election's store call carried the ISR removal, then the controller moved (the election
    raises): what was written is cached, so the context matches the store; the replicas'
    transitions did not happen and are not recorded."""
    audit = RecordingAuditSink()
    h = _harness(early=True, audit=audit)
    calls = _writes(h)
    elect = h.psm.handle_state_changes

    def moved(*args: Any, **kwargs: Any) -> Any:
        elect(*args, **kwargs)
        raise ControllerMovedError("Controller epoch zkVersion check fails")

    h.psm.handle_state_changes = moved  # type: ignore[method-assign]
    before = len(audit.records)
    with pytest.raises(ControllerMovedError):
        h.controlled_shutdown(2)
    assert calls == [LED | FOLLOWED]
    assert h.rsm._early_removal is None and h.psm.write_alongside is None
    stored = h.store.get_partition_states(sorted(FOLLOWED))
    for tp in FOLLOWED:
        cached = h.context.partition_leadership_info(tp)
        assert cached is not None and 2 not in cached.leader_and_isr.isr
        assert cached.leader_and_isr == stored[tp].leader_and_isr  # type: ignore[union-attr]
        assert h.context.replica_states[PartitionAndReplica(tp, 2)] is ReplicaState.ONLINE_REPLICA
    assert len(audit.records) == before + len(LED)  # the election's own records only


def test_not_carried_when_no_election_writes() -> None:
    """Broker 2 leads nothing: no election store call carries the ISR removal, which the replica
    state machine's call writes itself, as in Kafka."""
    h = CoreHarness(BROKERS, broker_config=DEFAULTS)
    h.create_topic("t", [[1, 2], [3, 2]])
    calls = _writes(h)
    h.controlled_shutdown(2)
    assert calls == [frozenset({TopicPartition("t", 0), TopicPartition("t", 1)})]
    assert all(2 not in i.leader_and_isr.isr for i in h.context.partitions_leadership_info.values())


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
    assert calls == [LED, FOLLOWED]


def test_the_controllers_controlled_shutdown_writes_the_isr_removal_early() -> None:
    """``KafkaController`` (``controller.shutdown``): the followed partitions' ISR removal goes
    in the led partitions' election's store call, and the outcome is Kafka's."""
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
        calls: list[frozenset[TopicPartition]] = []
        real = store.update_leader_and_isr

        def recording(states: Mapping[TopicPartition, LeaderAndIsr], epoch: int, zkv: int) -> Any:
            calls.append(frozenset(states))
            return real(states, epoch, zkv)

        store.update_leader_and_isr = recording
        answer = Answer()
        active.controller.controlled_shutdown(victim, cluster.brokers[victim].epoch, answer)
        led = {t1} if victim == 1 else set()
        assert set(answer.get()) == set()
        followed = {t0, t1} - led
        assert calls[0] == frozenset(led | followed)
        for tp in (t0, t1):
            state = cluster.state(tp)
            assert state is not None and victim not in state.leader_and_isr.isr
    finally:
        cluster.close()
