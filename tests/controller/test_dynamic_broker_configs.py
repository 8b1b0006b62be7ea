"""Controllers following the dynamic broker configs (``controller.dynamic_config``), in process:
the auto rebalance paused and resumed by ``auto.leader.rebalance.enable`` (the Airflow rolling
restart's pause), a controller elected while paused, and a dynamic unclean default.

Changes reach a controller as the broker's ``/config/changes`` listener hands them over
(``update_dynamic_broker_configs``); the znodes are written too, as the admin tools do, because a
new controller reads them at failover. The scheduler runs on the fake clock: a check runs only
when a test advances the clock past its due time.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kafka_controller.controller.kafka_controller import KafkaController
from kafka_controller.domain.audit_records import ControllerEventRecord
from kafka_controller.domain.config_keys import AUTO_LEADER_REBALANCE_ENABLE as AUTO
from kafka_controller.domain.config_keys import UNCLEAN_LEADER_ELECTION_ENABLE as UNCLEAN
from kafka_controller.domain.values import NO_LEADER, TopicPartition
from kafka_controller.dryrun.recording import RecordingAuditSink
from tests.controller.cluster import Cluster, SimBroker, wait_until

TASK = "auto-leader-rebalance-task"
TP = TopicPartition("t", 0)


@pytest.fixture
def sinks() -> dict[int, RecordingAuditSink]:
    return {}


@pytest.fixture
def cluster(sinks: dict[int, RecordingAuditSink]) -> Iterator[Cluster]:
    c = Cluster(
        config={"leader.imbalance.check.interval.seconds": 1},
        audit=lambda broker_id: sinks.setdefault(broker_id, RecordingAuditSink()),
    )
    yield c
    c.close()


def set_default(cluster: Cluster, config: dict[str, str], *to: SimBroker) -> None:
    """What ``kafka-configs.sh --entity-default`` does, then what each broker's listener does."""
    cluster.admin.set_or_create_entity_config("brokers", "<default>", config)
    for broker in to:
        broker.controller.update_dynamic_broker_configs(config, {})
    cluster.wait_idle()


def events(sink: RecordingAuditSink, kind: str) -> list[ControllerEventRecord]:
    return [r for r in sink.records if isinstance(r, ControllerEventRecord) and r.kind == kind]


def tick(cluster: Cluster, controller: KafkaController, seconds: float) -> None:
    cluster.clock.advance(seconds)
    controller.kafka_scheduler.wake()


def pending_tasks(controller: KafkaController) -> list[str]:
    return [name for name, _ in controller.kafka_scheduler.pending()]


def imbalance(cluster: Cluster, preferred: int, leader: int) -> int:
    """Topic t on [preferred, leader], led by ``leader`` with both in the ISR (the preferred replica
    was bounced); returns the leader epoch."""
    cluster.create_topic("t", {0: [preferred, leader]})
    cluster.stop(preferred)
    cluster.start(preferred)
    cluster.alter_isr(leader, TP, [leader, preferred])
    state = cluster.state(TP)
    assert state is not None and state.leader_and_isr.leader == leader
    assert set(state.leader_and_isr.isr) == {leader, preferred}
    return state.leader_and_isr.leader_epoch


def test_the_auto_rebalance_moves_nothing_while_paused_and_rebalances_after_resume(
    cluster: Cluster, sinks: dict[int, RecordingAuditSink]
) -> None:
    cluster.start_all([0, 1])
    active = cluster.active()
    other = 1 - active.id
    epoch = imbalance(cluster, other, active.id)
    controller = active.controller
    assert pending_tasks(controller) == [TASK]

    set_default(cluster, {AUTO: "false"}, *cluster.running())
    assert controller.config.auto_leader_rebalance_enable is False
    assert controller.static_config.auto_leader_rebalance_enable is True
    applied = events(sinks[active.id], "dynamic_config")
    assert [r.detail for r in applied] == [
        "auto.leader.rebalance.enable=false (cluster default), unclean.leader.election.enable=false (default)"
    ]

    for n in (1, 2):  # two checks while paused: each sees the imbalance and moves nothing
        tick(cluster, controller, 5)
        wait_until(lambda n=n: len(events(sinks[active.id], "rebalance_paused")) == n, f"paused check {n}")
        cluster.wait_idle()
        state = cluster.state(TP)
        assert state is not None
        assert (state.leader_and_isr.leader, state.leader_and_isr.leader_epoch) == (active.id, epoch)
    assert [r.detail for r in events(sinks[active.id], "rebalance_paused")] == [
        "1 partition(s) left off their preferred leader"
    ] * 2
    assert pending_tasks(controller) == [TASK]  # the task goes on, idle

    set_default(cluster, {}, *cluster.running())  # resume: the key is removed, static true again
    assert controller.config.auto_leader_rebalance_enable is True
    tick(cluster, controller, 1)
    cluster.wait_state(TP, 1, other, epoch + 1, "the first check after resume elects the preferred replica")


def test_a_controller_elected_while_paused_stays_paused_until_resumed(
    cluster: Cluster, sinks: dict[int, RecordingAuditSink]
) -> None:
    set_default(cluster, {AUTO: "false"})  # before any broker runs: only failover can read it
    cluster.start_all([0, 1, 2])
    first = cluster.active()
    assert first.controller.config.auto_leader_rebalance_enable is False
    assert TASK not in pending_tasks(first.controller)

    cluster.stop(first.id)
    wait_until(lambda: cluster.admin.get_controller_id() not in (None, first.id), "a new controller")
    second = cluster.active()
    controller = second.controller
    assert cluster.controller_epoch()[0] == 2
    assert controller.config.auto_leader_rebalance_enable is False
    assert TASK not in pending_tasks(controller)
    assert [r.controller_epoch for r in events(sinks[second.id], "dynamic_config")] == [2]

    preferred = next(b.id for b in cluster.running() if b.id != second.id)
    epoch = imbalance(cluster, preferred, second.id)
    tick(cluster, controller, 60)  # nothing is scheduled, so nothing runs
    cluster.wait_idle()
    state = cluster.state(TP)
    assert state is not None and state.leader_and_isr.leader_epoch == epoch

    set_default(cluster, {AUTO: "true"}, *cluster.running())
    assert pending_tasks(controller) == [TASK]  # started on resume, as failover would have
    tick(cluster, controller, 5)
    cluster.wait_state(TP, 2, preferred, epoch + 1, "the auto rebalance started by the resume")


def test_a_per_broker_value_overrides_the_cluster_default(cluster: Cluster) -> None:
    cluster.start_all([0])
    controller = cluster.active().controller
    controller.update_dynamic_broker_configs({AUTO: "false"}, {AUTO: "true"})
    cluster.wait_idle()
    assert controller.config.auto_leader_rebalance_enable is True
    controller.update_dynamic_broker_configs(None, {})  # the default unreadable: kept as last read
    cluster.wait_idle()
    assert controller.config.auto_leader_rebalance_enable is False


def test_a_dynamic_unclean_default_elects_a_replica_out_of_the_isr(
    cluster: Cluster, sinks: dict[int, RecordingAuditSink]
) -> None:
    cluster.start_all([0, 1])
    active = cluster.active()
    other = 1 - active.id
    cluster.create_topic("t", {0: [other, active.id]})
    cluster.create_topic("clean", {0: [other, active.id]}, **{UNCLEAN: "false"})
    clean = TopicPartition("clean", 0)
    for tp in (TP, clean):
        cluster.alter_isr(other, tp, [other])  # the leader drops the follower from the ISR
    cluster.stop(other)
    for tp in (TP, clean):
        cluster.wait_state(tp, 1, NO_LEADER, 1, "no clean leader")
    controller = active.controller
    assert controller.controller_context.stats.unclean_leader_elections == 0

    set_default(cluster, {UNCLEAN: "true"}, *cluster.running())
    state = cluster.wait_state(TP, 1, active.id, 2, "unclean leader elected under the dynamic default")
    assert state.leader_and_isr.isr == (active.id,)
    assert controller.controller_context.stats.unclean_leader_elections == 1
    # the topic's own false is merged over the default and wins
    cluster.wait_state(clean, 1, NO_LEADER, 1, "a topic that disables unclean election stays offline")
    assert events(sinks[active.id], "dynamic_config")[-1].detail == (
        "auto.leader.rebalance.enable=true (default), unclean.leader.election.enable=true (cluster default)"
    )


def test_bad_dynamic_config_arguments_are_refused_before_queueing(cluster: Cluster) -> None:
    from kafka_controller.domain.errors import InvalidArgumentError

    cluster.start_all([0])
    controller = cluster.active().controller
    with pytest.raises(InvalidArgumentError, match="cluster default broker config"):
        controller.update_dynamic_broker_configs({AUTO: False}, {})  # type: ignore[dict-item]
    assert controller.event_manager.is_empty
