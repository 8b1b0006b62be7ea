"""After a connection loss (SUSPENDED, then CONNECTED in the same session), the controller finishes
what the outage cut short. Kafka's ZooKeeper calls wait for the connection; ours fail fast, so an
event handled while suspended can stop half-way. Seen in a fault trial (ZooKeeper restart during a
reassignment): the ISR that completed a reassignment was written, the re-check that would have
completed it failed to read, and no later ISR change came to re-check it: stuck for good."""

from __future__ import annotations

import threading

from kafka_controller.controller import events as ev
from kafka_controller.domain.requests import Errors
from kafka_controller.domain.values import LeaderAndIsr, ReplicaAssignment, TopicPartition
from tests.controller.cluster import Answer, Cluster, drain, wait_until

TP = TopicPartition("t", 0)


def _assignment(cluster: Cluster) -> ReplicaAssignment:
    read = cluster.admin.get_replica_assignment_and_topic_ids(["t"])["t"]
    assert not isinstance(read, Exception)
    return read.assignment[TP]


def test_a_reassignment_whose_completion_check_failed_while_suspended_completes_on_reconnection(
    cluster: Cluster,
) -> None:
    cluster.start_all([0, 1, 2])
    cluster.create_topic("t", {0: [0, 1]})
    cluster.alter_isr(0, TP, [0, 1])
    active = cluster.active()
    answer = Answer()
    active.controller.alter_partition_reassignments({TP: [0, 1, 2]}, answer)
    assert answer.get() == {TP: ev.ApiError(Errors.NONE)}
    cluster.wait_idle()
    assert _assignment(cluster).adding_replicas == (2,)

    # Hold the event thread, so the ISR change is handled only once the session is suspended.
    release, held = threading.Event(), threading.Event()

    def block() -> None:
        held.set()
        release.wait(30)

    active.controller.event_manager.put(ev.MockEvent(block))
    assert held.wait(30)
    state = cluster.state(TP)
    assert state is not None
    lai = state.leader_and_isr
    # Broker 2 caught up: the new ISR lands in ZooKeeper (as the AlterIsr write did in the trial),
    # and the controller's watch queues the re-check behind the held event.
    written = cluster.admin.update_leader_and_isr(
        {TP: LeaderAndIsr(lai.leader, lai.leader_epoch, (0, 1, 2), lai.zk_version)},
        state.controller_epoch,
        -1,
    )
    assert isinstance(written.finished[TP], LeaderAndIsr)
    active.store.disconnect()
    release.set()
    drain(active.controller)
    assert _assignment(cluster).adding_replicas == (2,), "the re-check should have failed while suspended"

    active.store.reconnect()
    wait_until(lambda: not _assignment(cluster).is_being_reassigned, "the reassignment to complete")
    cluster.wait_idle()
    assert _assignment(cluster).replicas == (0, 1, 2)
    assert not active.controller.controller_context.partitions_being_reassigned


def test_a_candidate_whose_startup_was_cut_short_elects_on_reconnection(cluster: Cluster) -> None:
    """Seen in a fault trial: a broker cut from ZooKeeper while it started. Its Startup could not
    read ``/controller``; absent before and after, the re-armed watch never fired, and with no
    other broker alive the cluster stayed without a controller. Kafka's Startup would have waited
    for the connection and elected."""
    sim = cluster.start(0, launch=False)
    sim.store.disconnect()
    cluster.launch(0)
    assert not sim.controller.is_active
    assert cluster.admin.get_controller_id() is None, "the election should have failed while suspended"

    sim.store.reconnect()
    assert cluster.active() is sim
    assert cluster.controller_epoch()[0] == 1


def test_a_candidate_that_is_not_the_controller_stays_so_on_reconnection(cluster: Cluster) -> None:
    cluster.start_all([0, 1])
    active = cluster.active()
    other = cluster.brokers[1 - active.id]
    epoch = cluster.controller_epoch()
    other.store.disconnect()
    other.store.reconnect()
    cluster.wait_idle()
    assert cluster.active() is active
    assert not other.controller.is_active
    assert other.controller.active_controller_id == active.id
    assert cluster.controller_epoch() == epoch
