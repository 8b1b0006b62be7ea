"""Deliberate deviations from Kafka 2.8 that no other test pins (README, "Deviations from Kafka
2.8"). In process, on the shared in-memory tree: a fenced write is made by moving ``/controller``
while the controller's event thread is blocked, as Kafka's ``testControllerMove`` does."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from kafka_controller.controller.events import ApiError, MockEvent
from kafka_controller.controller.kafka_controller import KafkaController
from kafka_controller.domain.requests import Errors
from kafka_controller.domain.values import LeaderAndIsr, TopicPartition
from tests.controller.cluster import Answer, Cluster, drain, wait_until

TP = TopicPartition("t", 0)


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    c = Cluster()
    yield c
    c.close()


def _blocked(controller: KafkaController) -> threading.Event:
    """Block the event thread until the returned latch is set."""
    latch = threading.Event()
    controller.event_manager.put(MockEvent(lambda: latch.wait(10)))
    return latch


def _move_controller_away(cluster: Cluster, controller: KafkaController) -> None:
    cluster.admin.delete_controller(controller.controller_context.epoch_zk_version)
    cluster.admin.register_controller_and_increment_controller_epoch(len(cluster.brokers))


def _two_brokers_and_a_topic(cluster: Cluster) -> tuple[KafkaController, int]:
    """The active controller and the other broker, which leads ``t-0`` (replicas [other, controller])."""
    cluster.start_all([0, 1])
    active = cluster.active()
    other = 1 - active.id
    cluster.create_topic("t", {0: [other, active.id]})
    return active.controller, other


def test_a_fenced_alter_isr_is_answered_not_controller_and_the_controller_resigns(cluster: Cluster) -> None:
    """Kafka 2.8 answers UNKNOWN_SERVER_ERROR and stays controller; here the leader hears
    NOT_CONTROLLER (it then looks for the new controller) and the fenced controller resigns."""
    controller, other = _two_brokers_and_a_topic(cluster)
    before = cluster.state(TP)
    assert before is not None and before.leader_and_isr.leader == other
    lai = before.leader_and_isr
    latch = _blocked(controller)
    answer = Answer()
    shrunk = {TP: LeaderAndIsr(other, lai.leader_epoch, (other,), lai.zk_version)}
    controller.alter_isr(other, cluster.brokers[other].epoch, shrunk, answer)
    _move_controller_away(cluster, controller)
    latch.set()
    assert answer.get() is Errors.NOT_CONTROLLER
    wait_until(lambda: not controller.is_active, "the fenced controller resigns")
    drain(controller)
    assert cluster.state(TP) == before  # the fenced write wrote nothing
    assert answer.calls == 1


def test_an_admin_request_whose_write_is_fenced_is_answered_not_controller(cluster: Cluster) -> None:
    """Kafka 2.8 never calls back when a ControllerMovedException ends the event (the client times
    out); here every caller is answered, with NOT_CONTROLLER."""
    controller, other = _two_brokers_and_a_topic(cluster)
    latch = _blocked(controller)
    answer = Answer()
    controller.alter_partition_reassignments({TP: [controller.controller_id, other]}, answer)
    _move_controller_away(cluster, controller)
    latch.set()
    error = answer.get()
    assert isinstance(error, ApiError) and error.error is Errors.NOT_CONTROLLER
    wait_until(lambda: not controller.is_active, "the fenced controller resigns")
    drain(controller)
    assert answer.calls == 1


def test_kafka_3_1_broker_count_gauges_are_registered(cluster: Cluster) -> None:
    """ActiveBrokerCount and FencedBrokerCount came with Kafka 3.1 (KIP-748); they are here too, with
    no broker ever fenced in ZooKeeper mode."""
    cluster.start_all([0, 1])
    controller = cluster.active().controller
    assert controller.metric("ActiveBrokerCount") == 2
    assert controller.metric("FencedBrokerCount") == 0
    text = controller.metrics.render_prometheus()
    assert "# HELP kafka_controller_kafkacontroller_activebrokercount ActiveBrokerCount (Kafka 3.1+" in text
    assert "# HELP kafka_controller_kafkacontroller_fencedbrokercount FencedBrokerCount (Kafka 3.1+" in text
