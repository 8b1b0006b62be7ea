"""A new controller's context load (docs/controller-behaviour.md §8.3): the partitions it finds
being reassigned, and only those, are in its context; the topics around them, which no partition
of theirs is reassigning, are skipped without a look at each partition."""

from __future__ import annotations

from kafka_controller.controller import events as ev
from kafka_controller.domain.requests import Errors
from kafka_controller.domain.values import TopicPartition
from tests.controller.cluster import Answer, Cluster

MOVING = TopicPartition("t", 1)


def test_a_new_controller_loads_the_reassignments_in_progress(cluster: Cluster) -> None:
    cluster.start_all([0, 1, 2])
    cluster.create_topic("t", {0: [0, 1], 1: [0, 1], 2: [1, 0]})
    cluster.create_topic("u", {0: [0, 1]})
    first = cluster.active()
    answer = Answer()
    first.controller.alter_partition_reassignments({MOVING: [0, 1, 2]}, answer)
    assert answer.get() == {MOVING: ev.ApiError(Errors.NONE)}
    cluster.wait_idle()  # broker 2 never joins the ISR here: the move stays in progress

    cluster.stop(first.id)
    new = cluster.active()
    assert new.id != first.id
    context = new.controller.controller_context
    assert context.partitions_being_reassigned == {MOVING}
    assert context.partition_full_replica_assignment(MOVING).adding_replicas == (2,)
