"""The controller's small parts on their own: KafkaConfig, the scheduler, the audit decorator, the
events' preempt answers, and the metrics a controller registers."""

from __future__ import annotations

import threading

import pytest

from kafka_controller.controller import events as ev
from kafka_controller.controller.auditing import ControllerAuditSink
from kafka_controller.controller.config import KNOWN_KEYS, KafkaConfig
from kafka_controller.controller.controller_state import ControllerState
from kafka_controller.controller.metrics import KAFKA_CONTROLLER_GAUGES, MetricsRegistry
from kafka_controller.controller.scheduler import KafkaScheduler
from kafka_controller.domain.audit_records import (
    ControllerEventRecord,
    PartitionTransition,
    ReplicaTransition,
)
from kafka_controller.domain.errors import (
    ControllerMovedError,
    IllegalControllerStateError,
    InvalidArgumentError,
)
from kafka_controller.domain.requests import Errors
from kafka_controller.domain.values import TopicPartition
from kafka_controller.dryrun.recording import RecordingAuditSink
from kafka_controller.ports import NullAuditSink
from kafka_controller.testing.doubles import HoldingAuditSink
from tests.controller.cluster import Answer, Cluster, FakeClock, wait_until

TP = TopicPartition("t", 0)


# ------------------------------------------------------------------------------------ KafkaConfig
def test_config_defaults_are_kafkas() -> None:
    c = KafkaConfig.of(3)
    assert (c.broker_id, c.unclean_leader_election_enable, c.auto_leader_rebalance_enable) == (3, False, True)
    assert (c.leader_imbalance_per_broker_percentage, c.leader_imbalance_check_interval_seconds) == (10, 300)
    assert (c.delete_topic_enable, c.controlled_shutdown_enable, c.controlled_shutdown_max_retries) == (
        True,
        True,
        3,
    )
    assert (c.controlled_shutdown_retry_backoff_ms, c.replica_lag_time_max_ms) == (5000, 30000)
    assert c.zookeeper_session_timeout_ms == 18000
    assert str(c.inter_broker_protocol_version) == "2.8-IV1" and c.is_alter_isr_enabled and c.uses_topic_id
    assert c.originals() == {}


def test_config_parses_strings_and_values() -> None:
    c = KafkaConfig.of(
        1,
        {
            "unclean.leader.election.enable": "TRUE",
            "leader.imbalance.per.broker.percentage": "25",
            "leader.imbalance.check.interval.seconds": 1,
            "delete.topic.enable": False,
            "inter.broker.protocol.version": "2.6",
        },
    )
    assert c.unclean_leader_election_enable and not c.delete_topic_enable
    assert (c.leader_imbalance_per_broker_percentage, c.leader_imbalance_check_interval_seconds) == (25, 1)
    assert not c.is_alter_isr_enabled and not c.is_feature_versioning_supported
    assert c.originals()["delete.topic.enable"] == "false"
    assert c.with_overrides({"delete.topic.enable": "true"}).delete_topic_enable


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"unclean.leader.election": "true"}, "unknown broker config 'unclean.leader.election'"),
        (
            {"delete.topic.enable": "yes"},
            "invalid value 'yes' for delete.topic.enable: expected true or false",
        ),
        ({"leader.imbalance.per.broker.percentage": "101"}, "must be between 0 and 100"),
        ({"leader.imbalance.check.interval.seconds": "0"}, "must be at least 1"),
        ({"controlled.shutdown.max.retries": "three"}, "expected an integer"),
        ({"inter.broker.protocol.version": "9.9"}, "invalid value '9.9' for inter.broker.protocol.version"),
    ],
)
def test_config_refuses_bad_input_with_one_line(props: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidArgumentError) as info:
        KafkaConfig.of(0, props)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_config_knows_the_contract_keys() -> None:
    contract = {
        "unclean.leader.election.enable",
        "auto.leader.rebalance.enable",
        "leader.imbalance.per.broker.percentage",
        "leader.imbalance.check.interval.seconds",
        "delete.topic.enable",
        "controlled.shutdown.enable",
        "controlled.shutdown.max.retries",
        "controlled.shutdown.retry.backoff.ms",
        "replica.lag.time.max.ms",
        "zookeeper.session.timeout.ms",
    }
    assert contract <= set(KNOWN_KEYS)
    with pytest.raises(InvalidArgumentError, match="broker id"):
        KafkaConfig.of(-1)


# ------------------------------------------------------------------------------------ scheduler
def test_scheduler_runs_tasks_when_the_clock_reaches_them() -> None:
    clock = FakeClock()
    scheduler = KafkaScheduler(clock)
    ran: list[str] = []
    scheduler.startup()
    try:
        scheduler.schedule("b", lambda: ran.append("b"), 10)
        scheduler.schedule("a", lambda: ran.append("a"), 5)
        assert [n for n, _ in scheduler.pending()] == ["a", "b"]
        assert scheduler.run_due() == 0 and ran == []
        clock.advance(5)
        scheduler.wake()
        wait_until(lambda: ran == ["a"], "task a ran on the scheduler thread")
        clock.advance(5)
        assert scheduler.run_due() in (0, 1)  # the thread may have taken it already
        wait_until(lambda: ran == ["a", "b"], "task b ran")
        assert scheduler.pending() == []
    finally:
        scheduler.shutdown()
    assert not scheduler.is_started


def test_scheduler_refuses_work_when_stopped_and_bad_delays() -> None:
    scheduler = KafkaScheduler(FakeClock())
    with pytest.raises(IllegalControllerStateError, match="not running"):
        scheduler.schedule("x", lambda: None, 1)
    scheduler.startup()
    try:
        with pytest.raises(InvalidArgumentError, match="delay must be >= 0"):
            scheduler.schedule("x", lambda: None, -1)
        with pytest.raises(IllegalControllerStateError, match="already started"):
            scheduler.startup()
        scheduler.schedule("x", lambda: None, 1)
    finally:
        scheduler.shutdown()
    assert scheduler.pending() == []  # shutdown drops pending tasks


def test_scheduler_survives_a_failing_task() -> None:
    clock = FakeClock()
    scheduler = KafkaScheduler(clock)
    ran = threading.Event()
    scheduler.startup()
    try:
        scheduler.schedule("boom", lambda: 1 / 0, 0)  # type: ignore[func-returns-value]
        scheduler.schedule("ok", ran.set, 0)
        scheduler.wake()
        assert ran.wait(5)
    finally:
        scheduler.shutdown()


# ------------------------------------------------------------------------------------ audit decorator
def _transition(p: int) -> PartitionTransition:
    return PartitionTransition("t", p, "NewPartition", "OnlinePartition")


def test_audit_decorator_stamps_and_numbers_records() -> None:
    clock = FakeClock(1000.0)
    epoch = [4]
    sink = RecordingAuditSink()
    audit = ControllerAuditSink(sink, 7, clock, lambda: epoch[0])
    assert audit.enabled
    audit.begin_event("ReplicaLeaderElection", "op-1")
    audit.record([_transition(0), _transition(1)])
    audit.end_event()
    clock.advance(1)
    epoch[0] = 5
    replica = ReplicaTransition("t", 0, 1, "OnlineReplica", "OfflineReplica")
    audit.record([replica])
    audit.record_controller_event("elected", 5, 1.5, "epoch 5")
    first, _, third, fourth = sink.records
    assert [r.sequence for r in sink.records] == [1, 2, 3, 4]
    assert isinstance(first, PartitionTransition) and isinstance(third, ReplicaTransition)
    assert (first.controller_id, first.controller_epoch, first.event, first.operation_id) == (
        7,
        4,
        "ReplicaLeaderElection",
        "op-1",
    )
    assert first.timestamp_ms == 1_000_000 and third.timestamp_ms == 1_001_000
    assert (third.controller_epoch, third.event, third.operation_id) == (5, None, None)
    assert isinstance(fourth, ControllerEventRecord)
    assert (fourth.kind, fourth.broker_id, fourth.controller_epoch, fourth.detail) == (
        "elected",
        7,
        5,
        "epoch 5",
    )
    assert audit.last_sequence == 4


def test_audit_decorator_is_free_when_auditing_is_off_and_never_raises() -> None:
    audit = ControllerAuditSink(NullAuditSink(), 1, FakeClock(), lambda: 1)
    assert not audit.enabled
    audit.record_controller_event("elected", 0, 0.0)
    assert audit.last_sequence == 0

    class Broken:
        def record(self, records: object) -> None:
            raise RuntimeError("database down")

    broken = ControllerAuditSink(Broken(), 1, FakeClock(), lambda: 1)
    broken.record([_transition(0)])  # logged, not raised
    assert broken.last_sequence == 1


def test_audit_timed_records_failures() -> None:
    clock = FakeClock()
    sink = RecordingAuditSink()
    audit = ControllerAuditSink(sink, 1, clock, lambda: 2)
    with pytest.raises(ValueError), audit.timed("failover", lambda: "3 topics"):
        clock.advance(0.25)
        raise ValueError("bad")
    (record,) = sink.records
    assert isinstance(record, ControllerEventRecord)
    assert record.kind == "failover" and record.duration_ms == pytest.approx(250.0)
    assert record.detail == "3 topics; failed: ValueError: bad"


def test_controller_audit_sequences_increase_across_events_and_carry_the_operation_id() -> None:
    sinks = {0: RecordingAuditSink(), 1: RecordingAuditSink()}
    cluster = Cluster(audit=lambda broker_id: sinks[broker_id])
    try:
        cluster.start_all([0, 1])
        cluster.create_topic("t", {0: [1, 0]})
        cluster.stop(1)
        cluster.start(1)
        cluster.alter_isr(0, TP, [0, 1])
        answer = Answer()
        active = cluster.active()
        active.controller.elect_leaders({TP}, "preferred", answer, operation_id="op-42")
        assert answer.get() == {TP: 1}
        cluster.wait_idle()
        records = sinks[active.id].records
        seqs = [r.sequence for r in records]
        assert seqs == list(range(1, len(records) + 1))  # strictly increasing, in delivery order
        transitions = [r for r in records if not isinstance(r, ControllerEventRecord)]
        assert {r.controller_id for r in transitions} == {active.id}
        assert {r.controller_epoch for r in transitions} == {1}
        tagged = [r for r in transitions if r.operation_id == "op-42"]
        assert tagged and all(r.event == "ReplicaLeaderElection" for r in tagged)
        election = [r for r in tagged if isinstance(r, PartitionTransition)]
        assert [(r.leader_before, r.leader_after, r.election_strategy) for r in election] == [
            (0, 1, "PreferredReplicaPartitionLeaderElectionStrategy")
        ]
        broker_change = [r for r in transitions if r.event == "BrokerChange"]
        assert broker_change and all(r.operation_id is None for r in broker_change)
    finally:
        cluster.close()


# ------------------------------------------------------------------------------------ events
def test_events_have_kafkas_states() -> None:
    assert ev.Startup.state is ControllerState.CONTROLLER_CHANGE
    assert ev.BrokerModifications(1).state is ControllerState.BROKER_CHANGE
    assert ev.ApiPartitionReassignment({}, Answer()).state is ControllerState.ALTER_PARTITION_REASSIGNMENT
    assert ev.ListPartitionReassignments(None, Answer()).state is ControllerState.LIST_PARTITION_REASSIGNMENT
    assert ev.UpdateMetadataResponseReceived.state is ControllerState.UPDATE_METADATA_RESPONSE_RECEIVED
    assert (
        ev.TopicUncleanLeaderElectionEnable("t").state is ControllerState.TOPIC_UNCLEAN_LEADER_ELECTION_ENABLE
    )
    assert (
        repr(ev.Startup()) == "Startup" and ev.event_name(ev.BrokerModifications(1)) == "BrokerModifications"
    )


def test_preempt_answers_waiting_callers() -> None:
    answers = [Answer() for _ in range(4)]
    ev.ReplicaLeaderElection(
        {TP}, ev.ElectionType.UNCLEAN, ev.ElectionTrigger.ADMIN_CLIENT_TRIGGERED, answers[0]
    ).preempt()
    ev.ControlledShutdown(1, 2, answers[1]).preempt()
    ev.ApiPartitionReassignment({TP: None}, answers[2]).preempt()
    ev.ListPartitionReassignments(None, answers[3]).preempt()
    assert answers[0].get() == {TP: ev.ApiError(Errors.NOT_CONTROLLER)}
    assert isinstance(answers[1].get(), ControllerMovedError)
    assert answers[2].get() == ev.ApiError(Errors.NOT_CONTROLLER)
    assert answers[3].get() == ev.ApiError(Errors.NOT_CONTROLLER)
    ev.TopicChange().preempt()  # nobody waits: nothing to answer
    assert str(ev.ApiError(Errors.NOT_CONTROLLER, "moved")) == "NOT_CONTROLLER: moved"


def test_controller_registers_kafkas_metrics() -> None:
    cluster = Cluster()
    try:
        registry = MetricsRegistry(cluster.clock)
        cluster.start(0)
        sim = cluster.brokers[0]
        assert sim.controller.metric("ActiveControllerCount") == 1
        assert set(KAFKA_CONTROLLER_GAUGES) <= set(sim.controller.metrics.names())
        assert (
            "kafka.controller:type=ControllerStats,name=LeaderElectionRateAndTimeMs"
            in sim.controller.metrics.names()
        )
        text = sim.controller.metrics.render_prometheus()
        assert "kafka_controller_kafkacontroller_activecontrollercount 1" in text
        assert registry.names() == []  # each controller has its own registry unless one is given
        with pytest.raises(InvalidArgumentError, match="unknown controller metric"):
            sim.controller.metric("Nope")
    finally:
        cluster.close()


def test_wait_until_idle_returns_after_shutdown() -> None:
    cluster = Cluster()
    try:
        sim = cluster.start(0)
        assert sim.controller.wait_until_idle(5)
        cluster.stop(0)
        assert sim.controller.wait_until_idle(5)  # preempted at once: nothing will run any more
    finally:
        cluster.close()


def test_an_event_holds_its_records_back_at_most_max_hold_ms() -> None:
    """Records reach the sink (the writer's journal) at once; a sink that holds is held from the
    event's first record to its end, or until the oldest held record is ``max_hold_ms`` old, so the
    audit store trails the controller by a bounded time."""
    clock = FakeClock(1000.0)
    sink = HoldingAuditSink()
    audit = ControllerAuditSink(sink, 7, clock, lambda: 4, max_hold_ms=2000)
    audit.begin_event("ControllerChange")
    audit.record([_transition(0)])
    clock.advance(1.999)
    audit.record([_transition(1)])
    assert [r.sequence for r in sink.records] == [1, 2]  # journaled at once
    assert sink.writable == 0  # within the bound: held
    assert (audit.held_records(), audit.hold_ms()) == (2, 1999)
    clock.advance(0.001)
    audit.record([_transition(2)])
    assert sink.writable == 3  # the oldest was 2 s old: released
    clock.advance(1.0)
    audit.record([_transition(3)])
    assert (sink.writable, len(sink.records)) == (3, 4)  # the bound restarts with the next held record
    audit.end_event()
    assert sink.writable == 4 and sink.calls == ["hold", "release", "hold", "release"]
    assert (audit.held_records(), audit.hold_ms()) == (0, 0)
