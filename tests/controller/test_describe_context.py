"""DescribeControllerContext on real controllers (in-memory store): the document is built on the event
thread from the active controller's context, others answer NOT_CONTROLLER, and a failure while
building it is an error answer, not a dead controller."""

from __future__ import annotations

import threading

from kafka_controller.controller import events as ev
from kafka_controller.controller.controller_state import ControllerState
from kafka_controller.core.context_description import check_description, description_rows
from kafka_controller.domain.requests import Errors
from kafka_controller.domain.values import TopicPartition
from tests.controller.cluster import Answer, Cluster

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


def _describe(controller: object) -> tuple[object, threading.Thread]:
    """The answer, and the thread that gave it."""
    got: list[tuple[object, threading.Thread]] = []
    answer = Answer()

    def callback(value: object) -> None:
        got.append((value, threading.current_thread()))
        answer(value)

    controller.describe_controller_context(callback)  # type: ignore[attr-defined]
    answer.get()
    return got[0]


def test_the_active_controller_describes_its_context_on_its_event_thread(cluster: Cluster) -> None:
    cluster.start_all([0, 1, 2])
    cluster.create_topic("t", {0: [0, 1], 1: [1, 2]})
    active = cluster.active()
    cluster.alter_isr(1, T1, [1])  # a change only the controller's cache and ZooKeeper know
    doc, thread = _describe(active.controller)
    assert isinstance(doc, dict)
    assert thread is active.controller.event_manager.thread
    check_description(doc)
    epoch, epoch_zk_version = cluster.controller_epoch()
    assert (doc["controller_id"], doc["epoch"], doc["epoch_zk_version"]) == (
        active.id,
        epoch,
        epoch_zk_version,
    )
    partitions, replicas, reassignments = description_rows(doc)
    by_tp = {(p["topic"], p["partition"]): p for p in partitions}
    assert sorted(by_tp) == [("t", 0), ("t", 1)]
    for tp in (T0, T1):
        znode = cluster.state(tp)
        assert znode is not None
        row = by_tp[tp]
        lai = znode.leader_and_isr
        assert (
            row["leader"],
            row["leader_epoch"],
            row["isr"],
            row["zk_version"],
            row["controller_epoch"],
        ) == (
            lai.leader,
            lai.leader_epoch,
            list(lai.isr),
            lai.zk_version,
            znode.controller_epoch,
        )
        assert row["state"] == "OnlinePartition" and not row["queued_for_deletion"]
    assert by_tp[T1]["isr"] == [1] and by_tp[T0]["replicas"] == [0, 1]
    assert sorted((r["partition"], r["replica"], r["state"]) for r in replicas) == [
        (0, 0, "OnlineReplica"),
        (0, 1, "OnlineReplica"),
        (1, 1, "OnlineReplica"),
        (1, 2, "OnlineReplica"),
    ]
    assert reassignments == []


def test_other_candidates_and_preempted_requests_answer_not_controller(cluster: Cluster) -> None:
    cluster.start_all([0, 1])
    active = cluster.active()
    other = next(b for b in cluster.running() if b.id != active.id)
    answer, _ = _describe(other.controller)
    assert answer == ev.ApiError(Errors.NOT_CONTROLLER)
    preempted = Answer()
    ev.DescribeControllerContext(preempted).preempt()
    assert preempted.get() == ev.ApiError(Errors.NOT_CONTROLLER)
    assert ev.DescribeControllerContext(preempted).state is ControllerState.IDLE


def test_a_context_that_cannot_be_described_is_an_error_answer_and_the_controller_goes_on(
    cluster: Cluster,
) -> None:
    cluster.start_all([0, 1])
    cluster.create_topic("t", {0: [0, 1]})
    controller = cluster.active().controller
    ctx = controller.controller_context
    good = ctx.partition_states[T0]
    corrupt = Answer()
    controller.event_manager.put(ev.MockEvent(lambda: corrupt(ctx.partition_states.__setitem__(T0, "junk"))))
    corrupt.get()
    answer, _ = _describe(controller)
    assert isinstance(answer, ev.ApiError) and answer.error is Errors.UNKNOWN_SERVER_ERROR
    assert answer.message is not None and "\n" not in answer.message
    repaired = Answer()
    controller.event_manager.put(ev.MockEvent(lambda: repaired(ctx.partition_states.__setitem__(T0, good))))
    repaired.get()
    assert controller.is_active
    doc, _ = _describe(controller)
    assert isinstance(doc, dict) and description_rows(doc)[0][0]["state"] == "OnlinePartition"
