"""What brokers tell the controller besides registering (docs/controller-behaviour.md §8.5, §8.12):
LeaderAndIsr answers
naming offline log dirs, log-dir failure notifications, endpoint changes, and the pre-AlterIsr
ISR-change notifications that brokers on older IBPs still write."""

from __future__ import annotations

from kafka_controller.controller.events import ApiError, UpdateFeatures
from kafka_controller.domain.requests import (
    ControlResponse,
    Errors,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    UpdateMetadataRequest,
)
from kafka_controller.domain.values import (
    Broker,
    EndPoint,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    TopicPartition,
)
from kafka_controller.dryrun.recording_channel import SentRequest, default_response
from tests.controller.cluster import Answer, Cluster, wait_until

TP = TopicPartition("t", 0)


def test_storage_error_in_leader_and_isr_response_moves_leadership(cluster: Cluster) -> None:
    cluster.start_all([0, 1])
    cluster.create_topic("t", {0: [0, 1]})
    cluster.wait_state(TP, 1, 0, 0, "topic creation")
    active = cluster.active()

    def respond(sent: SentRequest) -> ControlResponse:
        assert isinstance(sent.request, LeaderAndIsrRequest)
        error = Errors.KAFKA_STORAGE_ERROR if sent.broker_id == 0 else Errors.NONE
        return LeaderAndIsrResponse(
            Errors.NONE, {TopicPartition(s.topic, s.partition): error for s in sent.request.partition_states}
        )

    for b in (0, 1):
        active.channel.respond_all(
            lambda s: respond(s) if isinstance(s.request, LeaderAndIsrRequest) else _ok(s), broker_id=b
        )
    cluster.wait_idle()
    ctx = active.controller.controller_context
    assert ctx.replicas_on_offline_dirs.get(0) == {TP}
    state = cluster.wait_state(TP, 1, 1, 1, "the replica on the failed dir lost leadership")
    assert state.leader_and_isr.isr == (1,)


def test_replicas_answered_none_leave_the_offline_dir_set_and_empty_sets_are_dropped(
    cluster: Cluster,
) -> None:
    """Kafka's ``previous -- online ++ offline``; a broker with nothing offline keeps no entry."""
    from kafka_controller.controller import events as ev

    cluster.start_all([0, 1])
    cluster.create_topic("t", {0: [0, 1], 1: [0, 1]})
    cluster.wait_state(TP, 1, 0, 0, "topic creation")
    active = cluster.active()
    ctx = active.controller.controller_context
    tp1 = TopicPartition("t", 1)
    cluster.wait_idle()
    assert 0 not in ctx.replicas_on_offline_dirs  # every earlier answer was NONE: no empty entry

    def answer(errors: dict[TopicPartition, Errors]) -> None:
        active.controller.enqueue(
            ev.LeaderAndIsrResponseReceived(LeaderAndIsrResponse(Errors.NONE, errors), 0)
        )
        cluster.wait_idle()

    answer({TP: Errors.NONE, tp1: Errors.NONE})
    assert 0 not in ctx.replicas_on_offline_dirs
    ctx.replicas_on_offline_dirs[0] = {TP, tp1}  # as two earlier storage errors would leave it
    answer({TP: Errors.NONE})  # TP is back; tp1 not mentioned: still offline
    assert ctx.replicas_on_offline_dirs[0] == {tp1}
    answer({tp1: Errors.NONE, TP: Errors.FENCED_LEADER_EPOCH})
    assert 0 not in ctx.replicas_on_offline_dirs


def _ok(sent: SentRequest) -> ControlResponse:
    return default_response(sent.request)


def test_log_dir_event_notification_resends_leader_and_isr(cluster: Cluster) -> None:
    cluster.start_all([0, 1])
    cluster.create_topic("t", {0: [0, 1]})
    active = cluster.active()
    before = len(active.channel.requests_to(1, LeaderAndIsrRequest))
    cluster.admin.propagate_log_dir_event(1)
    cluster.wait_idle()
    resent = active.channel.requests_to(1, LeaderAndIsrRequest)[before:]
    assert [(s.topic, s.partition) for r in resent for s in r.partition_states] == [("t", 0)]
    assert cluster.admin.get_all_log_dir_event_notifications() == []  # processed and deleted


def test_broker_endpoint_change_is_broadcast(cluster: Cluster) -> None:
    cluster.start_all([0, 1])
    active = cluster.active()
    other = 1 - active.id
    moved = Broker(other, (EndPoint("broker-b.example", 19092),))
    cluster.brokers[other].store.update_broker_info(moved)
    cluster.wait_idle()
    assert active.controller.controller_context.live_or_shutting_down_broker(other) == moved
    last = active.channel.requests_to(active.id, UpdateMetadataRequest)[-1]
    assert moved in last.live_brokers


def test_isr_change_notification_refreshes_the_cache(cluster: Cluster) -> None:
    """A pre-AlterIsr leader writes the state znode itself, then a notification."""
    cluster.start_all([0, 1])
    cluster.create_topic("t", {0: [0, 1]})
    active = cluster.active()
    current = cluster.state(TP)
    assert current is not None
    lai = current.leader_and_isr
    shrunk = LeaderAndIsr(lai.leader, lai.leader_epoch, (lai.leader,), lai.zk_version)
    result = cluster.admin.update_leader_and_isr({TP: shrunk}, current.controller_epoch, -1)
    assert TP in result.finished
    cluster.admin.propagate_isr_changes([TP])
    cluster.wait_idle()
    cached = active.controller.controller_context.partition_leadership_info(TP)
    assert cached == LeaderIsrAndControllerEpoch(shrunk.with_zk_version(lai.zk_version + 1), 1)
    assert cluster.admin.get_all_isr_change_notifications() == []
    last = cluster.brokers[1 - active.id].last_metadata(active.channel, TP)
    assert last.isr == (lai.leader,)


def test_update_features_is_refused(cluster: Cluster) -> None:
    cluster.start(0)
    controller = cluster.active().controller
    answer = Answer()
    controller.event_manager.put(UpdateFeatures({"x": 1}, answer))
    error = answer.get()
    assert isinstance(error, ApiError) and error.error is Errors.INVALID_REQUEST


def test_controller_ignores_events_when_not_active(cluster: Cluster) -> None:
    cluster.start_all([0, 1])
    active = cluster.active()
    follower = cluster.brokers[1 - active.id].controller
    answer = Answer()
    follower.alter_isr(active.id, cluster.brokers[active.id].epoch, {TP: LeaderAndIsr(0, 0, (0,), 0)}, answer)
    assert answer.get() is Errors.NOT_CONTROLLER
    shutdown = Answer()
    follower.controlled_shutdown(active.id, -1, shutdown)
    assert type(shutdown.get()).__name__ == "ControllerMovedError"
    assert follower.enable_topic_unclean_leader_election("t") is None  # only the active one acts
    wait_until(lambda: follower.event_manager.is_empty, "nothing left queued")
    assert follower.metric("ActiveControllerCount") == 0
