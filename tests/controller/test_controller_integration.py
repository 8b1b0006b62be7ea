"""Kafka's ControllerIntegrationTest, in process: real controllers, a shared in-memory
ZooKeeper tree, brokers simulated by their registrations. Every assertion reads the store, as
Kafka's do; "state" is (controller epoch, leader, leader epoch) of the partition's state znode.

Differences from Kafka's setup, each forced by having no broker processes: a follower joins the
ISR when the test sends the leader's AlterIsr (``cluster.alter_isr``), and "what a broker knows"
is read from the requests the controller sent it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from kafka_controller.controller.controller_state import ControllerState
from kafka_controller.controller.metrics import rate_and_time_metric
from kafka_controller.domain.errors import StaleBrokerEpochError
from kafka_controller.domain.requests import LeaderAndIsrRequest
from kafka_controller.domain.values import NO_LEADER, ReplicaAssignment, TopicPartition
from tests.controller.cluster import Answer, Cluster, wait_until

FIRST_EPOCH = 1
TP = TopicPartition("t", 0)


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    c = Cluster(config={"leader.imbalance.check.interval.seconds": 1})
    yield c
    c.close()


def two_brokers(cluster: Cluster) -> tuple[int, int]:
    """(controller id, other broker id) of a fresh two-broker cluster."""
    cluster.start_all([0, 1])
    controller = cluster.active().id
    return controller, 1 - controller


# ------------------------------------------------------------------------------------ election
def test_empty_cluster(cluster: Cluster) -> None:
    cluster.start(0)
    assert cluster.active().id == 0
    assert cluster.controller_epoch() == (1, 1)  # epoch 1, its znode's zkVersion 1


def test_controller_epoch_persists_when_all_brokers_down(cluster: Cluster) -> None:
    cluster.start(0)
    cluster.active()
    cluster.stop(0)
    assert cluster.admin.get_controller_id() is None
    assert cluster.controller_epoch()[0] == 1


def test_controller_move_increments_controller_epoch(cluster: Cluster) -> None:
    cluster.start(0)
    cluster.active()
    cluster.restart(0)
    cluster.active()
    assert cluster.controller_epoch() == (2, 2)


# ------------------------------------------------------------------------------------ topics
def test_topic_creation(cluster: Cluster) -> None:
    cluster.start(0)
    cluster.create_topic("t", {0: [0]})
    cluster.wait_state(TP, FIRST_EPOCH, 0, 0, "topic creation")


def test_topic_creation_with_offline_replica(cluster: Cluster) -> None:
    controller, other = two_brokers(cluster)
    cluster.stop(other)
    cluster.create_topic("t", {0: [other, controller]})
    state = cluster.wait_state(TP, FIRST_EPOCH, controller, 0, "topic creation with an offline replica")
    assert state.leader_and_isr.isr == (controller,)


def _expand(cluster: Cluster, assignment: dict[int, list[int]]) -> None:
    read = cluster.admin.get_replica_assignment_and_topic_ids(["t"])["t"]
    assert not isinstance(read, Exception)
    cluster.admin.set_topic_assignment(
        "t", read.topic_id, {p: ReplicaAssignment.of(r) for p, r in assignment.items()}, -1
    )
    cluster.wait_idle()


def test_topic_partition_expansion(cluster: Cluster) -> None:
    cluster.start(0)
    cluster.create_topic("t", {0: [0]})
    tp1 = TopicPartition("t", 1)
    _expand(cluster, {0: [0], 1: [0]})
    cluster.wait_state(tp1, FIRST_EPOCH, 0, 0, "partition expansion")
    sim = cluster.brokers[0]
    assert sim.last_metadata(sim.channel, tp1).leader == 0  # the metadata reached the live broker


def test_topic_partition_expansion_with_offline_replica(cluster: Cluster) -> None:
    controller, other = two_brokers(cluster)
    cluster.create_topic("t", {0: [controller]})
    cluster.stop(other)
    tp1 = TopicPartition("t", 1)
    _expand(cluster, {0: [controller], 1: [other, controller]})
    cluster.wait_state(tp1, FIRST_EPOCH, controller, 0, "partition expansion with an offline replica")
    sim = cluster.brokers[controller]
    state = sim.last_metadata(sim.channel, tp1)
    assert (state.leader, state.isr, state.offline_replicas) == (controller, (controller,), (other,))
    assert cluster.brokers[other].last_metadata(sim.channel, tp1) is None  # dead brokers get nothing


# ------------------------------------------------------------------------------------ reassignment
def _reassignment_timer_count(cluster: Cluster, broker: int) -> int:
    timer = cluster.brokers[broker].controller.metrics.get(
        rate_and_time_metric(ControllerState.ALTER_PARTITION_REASSIGNMENT)
    )
    return timer.count  # type: ignore[union-attr]


def test_partition_reassignment(cluster: Cluster) -> None:
    controller, other = two_brokers(cluster)
    cluster.create_topic("t", {0: [controller]})
    before = _reassignment_timer_count(cluster, controller)
    cluster.admin.create_partition_reassignment({TP: [other]})
    cluster.wait_state(TP, FIRST_EPOCH, controller, 1, "the new replica was told the new assignment (A1)")
    sent = cluster.brokers[controller].channel.requests_to(other, LeaderAndIsrRequest)
    # A1 tells the adding replica (is_new), then A2 moves it to NewReplica, which tells it again.
    assert [s.is_new for r in sent for s in r.partition_states if s.partition == 0] == [True, True]
    cluster.alter_isr(controller, TP, [controller, other])  # the new replica caught up
    cluster.wait_state(TP, FIRST_EPOCH, other, 3, "reassignment completed")
    read = cluster.admin.get_replica_assignment_and_topic_ids(["t"])["t"]
    assert not isinstance(read, Exception)
    assert dict(read.assignment) == {TP: ReplicaAssignment.of([other])}
    assert not cluster.admin.reassign_partitions_in_progress()
    assert _reassignment_timer_count(cluster, controller) > before


def test_partition_reassignment_with_offline_replica_halting_progress(cluster: Cluster) -> None:
    controller, other = two_brokers(cluster)
    cluster.create_topic("t", {0: [controller]})
    cluster.stop(other)
    cluster.admin.create_partition_reassignment({TP: [other]})
    cluster.wait_state(TP, FIRST_EPOCH, controller, 1, "the reassignment started")
    assert cluster.admin.reassign_partitions_in_progress()
    assert cluster.admin.get_partition_reassignment() == {TP: (other,)}


def test_partition_reassignment_resumes_after_replica_comes_online(cluster: Cluster) -> None:
    controller, other = two_brokers(cluster)
    cluster.create_topic("t", {0: [controller]})
    cluster.stop(other)
    cluster.admin.create_partition_reassignment({TP: [other]})
    cluster.wait_state(TP, FIRST_EPOCH, controller, 1, "the reassignment started")
    cluster.start(other)
    cluster.wait_state(TP, FIRST_EPOCH, controller, 2, "the reassignment resumed (A1 again)")
    cluster.alter_isr(controller, TP, [controller, other])
    cluster.wait_state(TP, FIRST_EPOCH, other, 4, "reassignment completed")
    read = cluster.admin.get_replica_assignment_and_topic_ids(["t"])["t"]
    assert not isinstance(read, Exception)
    assert dict(read.assignment) == {TP: ReplicaAssignment.of([other])}
    assert not cluster.admin.reassign_partitions_in_progress()


# ------------------------------------------------------------------------------------ preferred election
def _preferred_replica_leader_election(
    cluster: Cluster, controller: int, other: int, leader_epoch: int
) -> None:
    """Kafka's ``preferredReplicaLeaderElection`` helper: stop the preferred replica, bring it back
    into the ISR, ask for a preferred election through ZooKeeper."""
    cluster.stop(other)
    cluster.wait_state(TP, FIRST_EPOCH, controller, leader_epoch + 1, "failover to the other replica")
    cluster.start(other)
    cluster.alter_isr(controller, TP, [controller, other])
    state = cluster.state(TP)
    assert state is not None and set(state.leader_and_isr.isr) == {controller, other}
    cluster.admin.create_preferred_replica_election([TP])
    cluster.wait_idle()
    wait_until(lambda: cluster.admin.get_preferred_replica_election() == set(), "the znode was deleted")
    cluster.wait_state(TP, FIRST_EPOCH, other, leader_epoch + 2, "preferred replica elected")


def test_preferred_replica_leader_election(cluster: Cluster) -> None:
    controller, other = two_brokers(cluster)
    cluster.create_topic("t", {0: [other, controller]})
    cluster.wait_state(TP, FIRST_EPOCH, other, 0, "topic creation")
    _preferred_replica_leader_election(cluster, controller, other, 0)


def test_back_to_back_preferred_replica_leader_elections(cluster: Cluster) -> None:
    controller, other = two_brokers(cluster)
    cluster.create_topic("t", {0: [other, controller]})
    cluster.wait_state(TP, FIRST_EPOCH, other, 0, "topic creation")
    _preferred_replica_leader_election(cluster, controller, other, 0)
    _preferred_replica_leader_election(cluster, controller, other, 2)


def test_preferred_replica_leader_election_with_offline_preferred_replica(cluster: Cluster) -> None:
    controller, other = two_brokers(cluster)
    cluster.create_topic("t", {0: [other, controller]})
    cluster.stop(other)
    cluster.wait_state(TP, FIRST_EPOCH, controller, 1, "failover to the controller's replica")
    cluster.admin.create_preferred_replica_election([TP])
    cluster.wait_idle()
    assert cluster.admin.get_preferred_replica_election() == set()
    cluster.wait_state(TP, FIRST_EPOCH, controller, 1, "nothing changed")


def test_auto_preferred_replica_leader_election(cluster: Cluster) -> None:
    controller, other = two_brokers(cluster)
    cluster.create_topic("t", {0: [other, controller]})
    cluster.stop(other)
    cluster.wait_state(TP, FIRST_EPOCH, controller, 1, "failover to the controller's replica")
    cluster.start(other)
    cluster.alter_isr(controller, TP, [controller, other])
    cluster.wait_state(TP, FIRST_EPOCH, controller, 1, "the preferred replica is back in the ISR")
    scheduler = cluster.brokers[controller].controller.kafka_scheduler
    assert [name for name, _ in scheduler.pending()] == ["auto-leader-rebalance-task"]
    cluster.clock.advance(5)  # the first check runs 5 s after failover
    scheduler.wake()
    cluster.wait_state(TP, FIRST_EPOCH, other, 2, "auto rebalance moved leadership back")
    wait_until(lambda: len(scheduler.pending()) == 1, "the check was rescheduled")


# ------------------------------------------------------------------------------------ unclean
def _entire_isr_offline(cluster: Cluster) -> None:
    """Both variants end the same: no other replica exists, so no leader, epoch + 1, and the last
    ISR member is kept (KAFKA-5083)."""
    _, other = two_brokers(cluster)
    cluster.create_topic("t", {0: [other]})
    cluster.wait_state(TP, FIRST_EPOCH, other, 0, "topic creation")
    cluster.stop(other)
    state = cluster.wait_state(TP, FIRST_EPOCH, NO_LEADER, 1, "the entire ISR went offline")
    assert state.leader_and_isr.isr == (other,)


def test_leader_and_isr_when_entire_isr_offline_and_unclean_leader_election_disabled(
    cluster: Cluster,
) -> None:
    _entire_isr_offline(cluster)


def test_leader_and_isr_when_entire_isr_offline_and_unclean_leader_election_enabled() -> None:
    cluster = Cluster(config={"unclean.leader.election.enable": "true"})
    try:
        _entire_isr_offline(cluster)
    finally:
        cluster.close()


def test_unclean_leader_election_enabled_by_topic_config(cluster: Cluster) -> None:
    """KAFKA-6835: enabling unclean election on the topic takes effect without a controller change."""
    controller, other = two_brokers(cluster)
    cluster.create_topic("t", {0: [other, controller]})
    cluster.wait_state(TP, FIRST_EPOCH, other, 0, "topic creation")
    cluster.alter_isr(other, TP, [other])  # the leader drops the follower from the ISR
    cluster.stop(other)
    state = cluster.wait_state(TP, FIRST_EPOCH, NO_LEADER, 1, "no clean leader")
    assert state.leader_and_isr.isr == (other,)
    active = cluster.brokers[controller].controller
    assert active.controller_context.stats.unclean_leader_elections == 0
    cluster.admin.change_topic_config("t", {"unclean.leader.election.enable": "true"})
    active.enable_topic_unclean_leader_election("t")
    state = cluster.wait_state(TP, FIRST_EPOCH, controller, 2, "unclean leader elected")
    assert state.leader_and_isr.isr == (controller,)
    assert active.controller_context.stats.unclean_leader_elections == 1
    assert (
        active.metrics.get("kafka.controller:type=ControllerStats,name=UncleanLeaderElectionsPerSec").count
        == 1
    )  # type: ignore[union-attr]


def test_default_unclean_leader_election_enabled_dynamically(cluster: Cluster) -> None:
    controller, other = two_brokers(cluster)
    cluster.create_topic("t", {0: [other, controller]})
    cluster.alter_isr(other, TP, [other])
    cluster.stop(other)
    cluster.wait_state(TP, FIRST_EPOCH, NO_LEADER, 1, "no clean leader")
    cluster.brokers[controller].controller.enable_default_unclean_leader_election()
    cluster.wait_state(TP, FIRST_EPOCH, controller, 2, "unclean leader elected")


# ------------------------------------------------------------------------------------ controlled shutdown
def test_controlled_shutdown(cluster: Cluster) -> None:
    cluster.start_all([2, 1, 0])
    cluster.create_topic("test", {0: [0, 1, 2]})
    tp = TopicPartition("test", 0)
    cluster.wait_state(tp, FIRST_EPOCH, 0, 0, "topic creation")
    active = cluster.active()

    def shutdown(broker: int) -> set[TopicPartition]:
        answer = Answer()
        active.controller.controlled_shutdown(broker, cluster.brokers[broker].epoch, answer)
        result = answer.get()
        assert not isinstance(result, Exception), result
        return set(result)

    assert shutdown(2) == set()
    for b in (0, 1):
        state = cluster.brokers[b].last_metadata(active.channel, tp)
        assert (state.leader, state.isr) == (0, (0, 1))
    assert shutdown(1) == set()
    assert cluster.brokers[0].last_metadata(active.channel, tp).leader == 0
    assert shutdown(0) == {tp}  # every other replica is shutting down: broker 0 keeps leading
    for b in (0, 1, 2):
        assert cluster.brokers[b].last_metadata(active.channel, tp).leader == 0
    state = cluster.state(tp)
    assert state is not None and state.leader_and_isr.leader == 0


def test_controller_reject_controlled_shutdown_request_with_stale_broker_epoch(cluster: Cluster) -> None:
    controller, other = two_brokers(cluster)
    answer = Answer()
    cluster.brokers[controller].controller.controlled_shutdown(
        other, cluster.brokers[other].epoch - 1, answer
    )
    assert isinstance(answer.get(), StaleBrokerEpochError)


def test_controlled_shutdown_writes_the_isr_removal_in_its_own_call_after_the_elections(
    cluster: Cluster,
) -> None:
    """The followed partitions' ISR removal is written by the OfflineReplica move itself, on the
    event thread, after the led partitions' elections (Kafka's order), not ahead of its turn on a
    thread of its own: a write made ahead of the call that audits it is lost to the audit if the
    controller is killed in between (a fault trial found a kill -9 landing there)."""
    cluster.start_all([0, 1, 2])
    assignment = {0: [2, 0, 1], 1: [0, 2, 1], 2: [1, 2, 0], 3: [2, 1, 0]}
    cluster.create_topic("t", assignment)
    tps = [TopicPartition("t", p) for p in assignment]
    for tp in tps:
        cluster.wait_state(tp, FIRST_EPOCH, assignment[tp.partition][0], 0, "topic creation")
    active = cluster.active()
    writes: list[tuple[str, list[TopicPartition]]] = []
    store = active.store
    update = store.update_leader_and_isr

    def recorded(states: Any, *args: Any, **kwargs: Any) -> Any:
        writes.append((threading.current_thread().name, sorted(states)))
        return update(states, *args, **kwargs)

    store.update_leader_and_isr = recorded
    answer = Answer()
    active.controller.controlled_shutdown(2, cluster.brokers[2].epoch, answer)
    assert answer.get() == set()
    followed, led = [tps[1], tps[2]], [tps[0], tps[3]]
    assert [written for _, written in writes] == [led, followed]
    assert {name for name, _ in writes} == {"controller-event-thread"}
    for tp in tps:
        state = cluster.state(tp)
        assert state is not None
        lai = state.leader_and_isr
        assert 2 not in lai.isr and lai.leader != 2 and lai.leader_epoch == 1, (tp, lai)
