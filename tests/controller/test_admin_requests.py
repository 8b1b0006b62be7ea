"""The controller's admin entry points (ElectLeaders, AlterPartitionReassignments,
ListPartitionReassignments, AlterIsr, topic deletion) end to end on the in-memory store, with the
per-partition answers of Kafka 2.8 (docs/controller-behaviour.md §8.8, §8.9, §8.11, §8.12)."""

from __future__ import annotations

import pytest

from kafka_controller.controller.events import ApiError, ElectionType
from kafka_controller.domain.errors import InvalidArgumentError
from kafka_controller.domain.requests import Errors, StopReplicaRequest
from kafka_controller.domain.values import NO_LEADER, LeaderAndIsr, ReplicaAssignment, TopicPartition
from kafka_controller.dryrun.recording import RecordingAuditSink
from tests.controller.cluster import Answer, Cluster, wait_until

TP = TopicPartition("t", 0)


def _elect(
    cluster: Cluster, partitions: set[TopicPartition] | None, kind: str
) -> dict[TopicPartition, object]:
    answer = Answer()
    cluster.active().controller.elect_leaders(partitions, kind, answer)
    result: dict[TopicPartition, object] = answer.get()
    cluster.wait_idle()
    return result


# ------------------------------------------------------------------------------------ ElectLeaders
def test_elect_leaders_preferred_answers_per_partition(cluster: Cluster) -> None:
    cluster.start_all([0, 1])
    cluster.create_topic("t", {0: [0, 1], 1: [1, 0]})
    t0, t1 = TopicPartition("t", 0), TopicPartition("t", 1)
    cluster.stop(1)  # t-1 fails over to 0
    cluster.wait_state(t1, 1, 0, 1, "t-1 failed over")
    cluster.start(1)
    cluster.alter_isr(0, t1, [0, 1])
    missing = TopicPartition("nope", 0)
    result = _elect(cluster, {t0, t1, missing}, "preferred")
    assert result == {
        t1: 1,
        t0: ApiError(Errors.ELECTION_NOT_NEEDED),
        missing: ApiError(Errors.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist."),
    }
    cluster.wait_state(t1, 1, 1, 2, "preferred leader elected")


def test_elect_leaders_preferred_not_available(cluster: Cluster) -> None:
    cluster.start_all([0, 1])
    cluster.create_topic("t", {0: [1, 0]})
    cluster.stop(1)
    cluster.wait_state(TP, 1, 0, 1, "failed over")
    cluster.start(1)  # back, but not in the ISR: the preferred replica cannot lead
    result = _elect(cluster, {TP}, ElectionType.PREFERRED)
    error = result[TP]
    assert isinstance(error, ApiError) and error.error is Errors.PREFERRED_LEADER_NOT_AVAILABLE
    cluster.wait_state(TP, 1, 0, 1, "nothing changed")


def test_elect_leaders_unclean_from_the_admin_api_is_really_unclean(cluster: Cluster) -> None:
    cluster.start_all([0, 1])
    cluster.create_topic("t", {0: [1, 0]})
    cluster.alter_isr(1, TP, [1])  # only the leader is in sync
    cluster.stop(1)
    cluster.wait_state(TP, 1, NO_LEADER, 1, "no clean leader")
    result = _elect(cluster, None, "unclean")  # None = every partition
    assert result == {TP: 0}
    state = cluster.wait_state(TP, 1, 0, 2, "unclean leader elected")
    assert state.leader_and_isr.isr == (0,)


def test_elect_leaders_rejects_bad_input(cluster: Cluster) -> None:
    cluster.start(0)
    controller = cluster.active().controller
    with pytest.raises(InvalidArgumentError, match="election type"):
        controller.elect_leaders({TP}, "fastest", Answer())
    with pytest.raises(InvalidArgumentError, match="TopicPartition"):
        controller.elect_leaders([("t", 0)], "preferred", Answer())  # type: ignore[list-item]
    assert controller.event_manager.is_empty


# ------------------------------------------------------------------------------------ reassignments
def _reassign(cluster: Cluster, request: dict[TopicPartition, list[int] | None]) -> object:
    answer = Answer()
    cluster.active().controller.alter_partition_reassignments(request, answer, operation_id="op-7")
    result = answer.get()
    cluster.wait_idle()
    return result


def _list(cluster: Cluster, partitions: set[TopicPartition] | None = None) -> object:
    answer = Answer()
    cluster.active().controller.list_partition_reassignments(partitions, answer)
    return answer.get()


def test_alter_partition_reassignments_validates_targets(cluster: Cluster) -> None:
    cluster.start_all([0, 1])
    cluster.create_topic("t", {0: [0], 1: [0], 2: [0], 3: [0]})
    tps = [TopicPartition("t", p) for p in range(4)]
    missing = TopicPartition("t", 9)
    result = _reassign(cluster, {tps[0]: [], tps[1]: [1, 1], tps[2]: [-1], tps[3]: [5], missing: [1]})
    assert isinstance(result, dict)
    assert {tp: e.error for tp, e in result.items()} == {
        tps[0]: Errors.INVALID_REPLICA_ASSIGNMENT,
        tps[1]: Errors.INVALID_REPLICA_ASSIGNMENT,
        tps[2]: Errors.INVALID_REPLICA_ASSIGNMENT,
        tps[3]: Errors.INVALID_REPLICA_ASSIGNMENT,  # broker 5 is not alive
        missing: Errors.UNKNOWN_TOPIC_OR_PARTITION,
    }
    assert "not alive" in str(result[tps[3]].message)
    assert _list(cluster) == {}


def test_alter_list_and_cancel_a_reassignment(cluster: Cluster) -> None:
    cluster.start_all([0, 1, 2])
    cluster.create_topic("t", {0: [0]})
    assert _reassign(cluster, {TP: [1, 2]}) == {TP: ApiError(Errors.NONE)}
    in_flight = ReplicaAssignment.of([1, 2, 0], [1, 2], [0])
    assert _list(cluster) == {TP: in_flight}
    assert _list(cluster, {TP, TopicPartition("t", 5)}) == {TP: in_flight}
    assert _reassign(cluster, {TP: None}) == {TP: ApiError(Errors.NONE)}  # None cancels
    assert _list(cluster) == {}
    read = cluster.admin.get_replica_assignment_and_topic_ids(["t"])["t"]
    assert not isinstance(read, Exception) and dict(read.assignment) == {TP: ReplicaAssignment.of([0])}
    assert _reassign(cluster, {TP: None}) == {TP: ApiError(Errors.NO_REASSIGNMENT_IN_PROGRESS)}


def test_api_reassignment_overrides_zookeeper_request(cluster: Cluster) -> None:
    cluster.start_all([0, 1, 2])
    cluster.create_topic("t", {0: [0], 1: [0]})
    t1 = TopicPartition("t", 1)
    cluster.stop(2)
    cluster.admin.create_partition_reassignment({TP: [2], t1: [2]})  # halted: broker 2 is down
    cluster.wait_idle()
    assert _reassign(cluster, {TP: [1]}) == {TP: ApiError(Errors.NONE)}
    assert cluster.admin.get_partition_reassignment() == {t1: (2,)}  # TP left the znode


def test_reassignment_completes_through_alter_isr_and_tags_the_operation() -> None:
    audit = RecordingAuditSink()
    cluster = Cluster(audit=lambda _id: audit)
    try:
        cluster.start_all([0, 1])
        cluster.create_topic("t", {0: [0]})
        assert _reassign(cluster, {TP: [1]}) == {TP: ApiError(Errors.NONE)}
        ops = [r for r in audit.records if getattr(r, "operation_id", None) == "op-7"]
        assert ops and all(getattr(r, "event", None) == "ApiPartitionReassignment" for r in ops)
        cluster.alter_isr(0, TP, [0, 1])
        cluster.wait_state(TP, 1, 1, 3, "reassignment completed")
        assert _list(cluster) == {}
    finally:
        cluster.close()


# ------------------------------------------------------------------------------------ AlterIsr
def test_alter_isr_checks(cluster: Cluster) -> None:
    cluster.start_all([0, 1])
    cluster.create_topic("t", {0: [0, 1]})
    active = cluster.active().controller
    current = cluster.state(TP)
    assert current is not None
    lai = current.leader_and_isr

    def alter(broker_epoch: int, isrs: dict[TopicPartition, LeaderAndIsr]) -> object:
        answer = Answer()
        active.alter_isr(0, broker_epoch, isrs, answer)
        return answer.get()

    epoch = cluster.brokers[0].epoch
    assert alter(epoch - 1, {TP: lai}) is Errors.STALE_BROKER_EPOCH
    unknown = TopicPartition("x", 0)
    older = LeaderAndIsr(0, lai.leader_epoch - 1, (0,), lai.zk_version)
    result = alter(epoch, {unknown: lai, TP: older})
    assert result == {unknown: Errors.UNKNOWN_TOPIC_OR_PARTITION, TP: Errors.FENCED_LEADER_EPOCH}
    stale_version = LeaderAndIsr(0, lai.leader_epoch, (0,), lai.zk_version + 5)
    assert alter(epoch, {TP: stale_version}) == {TP: Errors.INVALID_UPDATE_VERSION}
    shrunk = alter(epoch, {TP: LeaderAndIsr(0, lai.leader_epoch, (0,), lai.zk_version)})
    assert shrunk == {TP: LeaderAndIsr(0, lai.leader_epoch, (0,), lai.zk_version + 1)}
    state = cluster.state(TP)
    assert state is not None and state.leader_and_isr.isr == (0,)
    assert state.leader_and_isr.leader_epoch == lai.leader_epoch  # AlterIsr keeps the leader epoch
    ctx_state = active.controller_context.partition_leadership_info(TP)
    assert ctx_state is not None and ctx_state.leader_and_isr.isr == (0,)


# ------------------------------------------------------------------------------------ topic deletion
def test_topic_deletion_end_to_end(cluster: Cluster) -> None:
    cluster.start_all([0, 1])
    cluster.create_topic("t", {0: [0, 1], 1: [1, 0]}, **{"retention.ms": "1000"})
    active = cluster.active()
    cluster.admin.create_delete_topic_path("t")
    cluster.wait_idle()
    deletes = [
        (s.broker_id, tp.partition)
        for s in active.channel.sent
        if isinstance(s.request, StopReplicaRequest)
        for tp, p in s.request.partition_states.items()
        if p.delete_partition
    ]
    assert sorted(deletes) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert cluster.admin.topic_exists("t")  # nothing is deleted before the brokers answer
    assert active.controller.metric("TopicsToDeleteCount") == 1
    cluster.respond_all()
    wait_until(lambda: not cluster.admin.topic_exists("t"), "the topic znode is deleted")
    assert not cluster.admin.is_topic_marked_for_deletion("t")
    assert cluster.admin.get_topic_config("t") == {}
    ctx = active.controller.controller_context
    assert "t" not in ctx.all_topics and not ctx.partitions_for_topic("t")
    assert active.controller.metric("TopicsToDeleteCount") == 0
    assert active.controller.metric("GlobalTopicCount") == 0


def test_topic_deletion_waits_for_an_offline_replica(cluster: Cluster) -> None:
    cluster.start_all([0, 1])
    cluster.create_topic("t", {0: [0, 1]})
    active = cluster.active()
    other = 1 - active.id
    cluster.stop(other)
    cluster.admin.create_delete_topic_path("t")
    cluster.wait_idle()
    cluster.respond_all()
    assert cluster.admin.topic_exists("t")  # the dead replica cannot confirm: ineligible
    assert active.controller.metric("TopicsIneligibleToDeleteCount") == 1
    cluster.start(other)  # it comes back: deletion resumes
    cluster.respond_all()
    cluster.respond_all()
    wait_until(lambda: not cluster.admin.topic_exists("t"), "the topic znode is deleted")


def test_topic_deletion_disabled_drops_the_request() -> None:
    cluster = Cluster(config={"delete.topic.enable": "false"})
    try:
        cluster.start(0)
        cluster.create_topic("t", {0: [0]})
        cluster.admin.create_delete_topic_path("t")
        cluster.wait_idle()
        assert not cluster.admin.is_topic_marked_for_deletion("t")
        assert cluster.admin.topic_exists("t")
    finally:
        cluster.close()


def test_entry_points_refuse_bad_input_and_queue_nothing(cluster: Cluster) -> None:
    cluster.start(0)
    controller = cluster.active().controller
    with pytest.raises(InvalidArgumentError, match=r"reassignment of t-0: replicas must be broker ids"):
        controller.alter_partition_reassignments({TP: ["1"]}, Answer())  # type: ignore[list-item]
    with pytest.raises(InvalidArgumentError, match="expected a LeaderAndIsr"):
        controller.alter_isr(0, 1, {TP: (0, 1)}, Answer())  # type: ignore[dict-item]
    with pytest.raises(InvalidArgumentError, match="broker id and epoch must be integers"):
        controller.controlled_shutdown("0", 1, Answer())  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="got the string"):
        controller.list_partition_reassignments("t-0", Answer())  # type: ignore[arg-type]
    assert controller.event_manager.is_empty


def test_corrupt_preferred_replica_election_znode_is_dropped(cluster: Cluster) -> None:
    cluster.start(0)
    cluster.create_topic("t", {0: [0]})
    raw = cluster.tree.open_session()
    raw.create("/admin/preferred_replica_election", b"{not json")
    raw.close()
    cluster.wait_idle()
    assert cluster.admin.get_preferred_replica_election() == set()  # deleted after processing
    assert cluster.active().controller.is_active
