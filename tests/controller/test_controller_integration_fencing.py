"""Kafka's ControllerIntegrationTest, part 2: controller moves, /feature, bounced
brokers, preemption, AlterIsr and topic ids. In process: real controllers, a shared in-memory
ZooKeeper tree, brokers simulated by their registrations. Every assertion reads the store, as
Kafka's do; "state" is (controller epoch, leader, leader epoch) of the partition's state znode.

Differences from Kafka's setup, each forced by having no broker processes: a follower joins the
ISR when the test sends the leader's AlterIsr (``cluster.alter_isr``), and "what a broker knows"
is read from the requests the controller sent it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator

import pytest

from kafka_controller.controller.controller_state import ControllerState
from kafka_controller.controller.events import ApiError, MockEvent
from kafka_controller.domain.requests import Errors, LeaderAndIsrRequest, UpdateMetadataRequest
from kafka_controller.domain.values import ReplicaAssignment, TopicPartition
from kafka_controller.ports import FeatureZNode
from tests.controller.cluster import Answer, Cluster, drain, wait_until

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


# ------------------------------------------------------------------------------------ controller moves
def _test_controller_move(
    cluster: Cluster, caplog: pytest.LogCaptureFixture, action: object, event: str
) -> None:
    """Kafka's ``testControllerMove``: block the event thread, act, move the controller by hand,
    unblock; the controller's next fenced write fails and it resigns."""
    sim = cluster.active()
    controller = sim.controller
    latch = threading.Event()
    controller.event_manager.put(MockEvent(lambda: latch.wait(10)))
    assert callable(action)
    action()
    cluster.admin.delete_controller(controller.controller_context.epoch_zk_version)
    cluster.admin.register_controller_and_increment_controller_epoch(len(cluster.brokers))
    with caplog.at_level(logging.INFO, logger="kafka_controller.controller"):
        latch.set()
        wait_until(lambda: not controller.is_active, "the controller resigns")
        drain(controller)
    moved = [
        r
        for r in caplog.records
        if r.levelno == logging.INFO and r.getMessage().startswith("Controller moved")
    ]
    assert any(event in r.getMessage() for r in moved), [r.getMessage() for r in moved]
    assert controller.controller_context.epoch == 0  # resigned: the context was reset


def test_controller_move_on_topic_creation(cluster: Cluster, caplog: pytest.LogCaptureFixture) -> None:
    cluster.start(0)
    _test_controller_move(
        cluster,
        caplog,
        lambda: cluster.admin.create_topic("t", {0: ReplicaAssignment.of([0])}),
        "TopicChange",
    )
    assert cluster.state(TP) is None  # the fenced create wrote nothing


def test_controller_move_on_topic_deletion(cluster: Cluster, caplog: pytest.LogCaptureFixture) -> None:
    cluster.start(0)
    cluster.create_topic("t", {0: [0]})
    _test_controller_move(
        cluster, caplog, lambda: cluster.admin.create_delete_topic_path("t"), "TopicDeletion"
    )


def test_controller_move_on_preferred_replica_election(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    cluster.start(0)
    cluster.create_topic("t", {0: [0]})
    _test_controller_move(
        cluster,
        caplog,
        lambda: cluster.admin.create_preferred_replica_election([TP]),
        "ReplicaLeaderElection",
    )


def test_controller_move_on_partition_reassignment(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    cluster.start(0)
    cluster.create_topic("t", {0: [0]})
    _test_controller_move(
        cluster,
        caplog,
        lambda: cluster.admin.create_partition_reassignment({TP: [0]}),
        "ZkPartitionReassignment",
    )
    state = cluster.state(TP)
    assert state is not None and state.leader_and_isr.leader_epoch == 0  # the fenced bump was refused


# ------------------------------------------------------------------------------------ /feature (KIP-584)
def _feature_setup(ibp: str, existing: int | None) -> tuple[FeatureZNode, int, int | None]:
    """Start one broker on ``ibp`` over a /feature with status ``existing`` (None: absent);
    returns (the znode after, its zk version after, its zk version before)."""
    cluster = Cluster(config={"inter.broker.protocol.version": ibp})
    try:
        before = None
        if existing is not None:
            cluster.admin.create_feature_znode(FeatureZNode(existing, {}))
            read = cluster.admin.get_feature_znode()
            assert read is not None
            before = read[1]
        cluster.start(0)
        cluster.active()
        after = cluster.admin.get_feature_znode()
        assert after is not None
        return after[0], after[1], before
    finally:
        cluster.close()


def test_controller_feature_znode_setup_when_feature_versioning_is_enabled_with_non_existing_feature_znode() -> None:  # noqa: E501  # fmt: skip
    znode, version, _ = _feature_setup("2.7-IV0", None)
    assert (znode.status, dict(znode.features), version) == (1, {}, 0)


def test_controller_feature_znode_setup_when_feature_versioning_is_enabled_with_disabled_existing_feature_znode() -> None:  # noqa: E501  # fmt: skip
    znode, version, before = _feature_setup("2.7-IV0", 0)
    assert (znode.status, dict(znode.features), version) == (1, {}, (before or 0) + 1)


def test_controller_feature_znode_setup_when_feature_versioning_is_enabled_with_enabled_existing_feature_znode() -> None:  # noqa: E501  # fmt: skip
    znode, version, before = _feature_setup("2.7-IV0", 1)
    assert (znode.status, version) == (1, before)


def test_controller_feature_znode_setup_when_feature_versioning_is_disabled_with_non_existing_feature_znode() -> None:  # noqa: E501  # fmt: skip
    znode, version, _ = _feature_setup("2.6-IV0", None)
    assert (znode.status, dict(znode.features), version) == (0, {}, 0)


def test_controller_feature_znode_setup_when_feature_versioning_is_disabled_with_enabled_existing_feature_znode() -> None:  # noqa: E501  # fmt: skip
    znode, version, before = _feature_setup("2.6-IV0", 1)
    assert (znode.status, dict(znode.features), version) == (0, {}, (before or 0) + 1)


def test_controller_feature_znode_setup_when_feature_versioning_is_disabled_with_disabled_existing_feature_znode() -> None:  # noqa: E501  # fmt: skip
    znode, version, before = _feature_setup("2.6-IV0", 0)
    assert (znode.status, version) == (0, before)


# ------------------------------------------------------------------------------------ bounces, preemption
def test_controller_detects_bounced_brokers(cluster: Cluster) -> None:
    cluster.start_all([0, 1])
    active = cluster.active()
    other = 1 - active.id
    cluster.create_topic("t", {0: [0, 1]})
    cluster.wait_state(TP, FIRST_EPOCH, 0, 0, "topic creation")
    old_epoch = cluster.brokers[other].epoch
    latch = threading.Event()
    active.controller.event_manager.put(MockEvent(lambda: latch.wait(10)))
    cluster.restart(other)  # a fast bounce: the controller is busy and sees one BrokerChange
    new_epoch = cluster.brokers[other].epoch
    assert new_epoch > old_epoch
    sent_before = len(active.channel.sent)
    latch.set()
    cluster.wait_idle()
    ctx = active.controller.controller_context
    assert ctx.live_broker_epoch(other) == new_epoch
    changes = active.channel.membership_changes
    assert changes[-2:] == [("remove", other), ("add", other)]
    after = active.channel.sent[sent_before:]
    lai = [s.request for s in after if s.broker_id == other and isinstance(s.request, LeaderAndIsrRequest)]
    assert [(p.topic, p.partition) for r in lai for p in r.partition_states] == [
        ("t", 0)
    ]  # hosts its partition
    um = [s.request for s in after if s.broker_id == other and isinstance(s.request, UpdateMetadataRequest)]
    assert any(
        len(r.live_brokers) == 2 and {p.topic for p in r.partition_states} == {"t"} for r in um
    )  # knows 2 live brokers and 1 topic


def test_preemption_on_controller_shutdown(cluster: Cluster) -> None:
    cluster.start(0)
    controller = cluster.active().controller
    latch = threading.Event()
    controller.event_manager.put(MockEvent(lambda: latch.wait(10), ControllerState.TOPIC_CHANGE))
    cluster.admin.create_topic("t", {0: ReplicaAssignment.of([0])})  # TopicChange queued behind
    marker = Answer()  # queued last: answered once everything before it was preempted
    controller.list_partition_reassignments(None, marker)
    stopper = threading.Thread(target=controller.shutdown)
    stopper.start()
    assert marker.get() == ApiError(Errors.NOT_CONTROLLER)
    latch.set()
    stopper.join(10)
    assert not stopper.is_alive()
    assert cluster.state(TP) is None  # the preempted TopicChange never ran
    assert not controller.event_manager.thread.is_alive()


def test_preemption_with_callbacks(cluster: Cluster) -> None:
    from kafka_controller.controller.events import ElectionTrigger, ElectionType, ReplicaLeaderElection

    cluster.start(0)
    controller = cluster.active().controller
    tp0, tp1 = TopicPartition("t", 0), TopicPartition("t", 1)
    latch = threading.Event()
    controller.event_manager.put(MockEvent(lambda: latch.wait(10), ControllerState.TOPIC_CHANGE))
    election, shutdown, reassign, listing = Answer(), Answer(), Answer(), Answer()
    controller.event_manager.put(
        ReplicaLeaderElection({tp0, tp1}, ElectionType.PREFERRED, ElectionTrigger.ZK_TRIGGERED, election)
    )
    controller.controlled_shutdown(0, 0, shutdown)
    controller.alter_partition_reassignments({tp0: None, tp1: None}, reassign)
    controller.list_partition_reassignments({tp0, tp1}, listing)
    stopper = threading.Thread(target=controller.shutdown)
    stopper.start()
    wait_until(
        lambda: all(a.done for a in (election, shutdown, reassign, listing)), "every caller was answered"
    )
    latch.set()
    stopper.join(10)
    assert election.get() == {tp0: ApiError(Errors.NOT_CONTROLLER), tp1: ApiError(Errors.NOT_CONTROLLER)}
    assert type(shutdown.get()).__name__ == "ControllerMovedError"
    assert reassign.get() == ApiError(Errors.NOT_CONTROLLER)
    assert listing.get() == ApiError(Errors.NOT_CONTROLLER)
    assert all(a.calls == 1 for a in (election, shutdown, reassign, listing))


# ------------------------------------------------------------------------------------ AlterIsr
def test_idempotent_alter_isr(cluster: Cluster) -> None:
    _, other = two_brokers(cluster)
    cluster.create_topic("t", {0: [other]})
    before = cluster.state(TP)
    assert before is not None
    result = cluster.alter_isr(other, TP, before.leader_and_isr.isr)
    assert result == {TP: before.leader_and_isr}  # the current state, unchanged, no error
    assert cluster.state(TP) == before  # nothing written: same zk version


# ------------------------------------------------------------------------------------ topic ids (2.8)
def test_topic_ids_are_added(cluster: Cluster) -> None:
    cluster.start(0)
    cluster.create_topic("t", {0: [0]})
    ctx = cluster.active().controller.controller_context
    read = cluster.admin.get_replica_assignment_and_topic_ids(["t"])["t"]
    assert not isinstance(read, Exception) and read.topic_id is not None
    assert ctx.topic_ids["t"] == read.topic_id and ctx.topic_names[read.topic_id] == "t"


def test_topic_ids_are_not_added_with_ibp_2_7() -> None:
    cluster = Cluster(config={"inter.broker.protocol.version": "2.7-IV2"})
    try:
        cluster.start(0)
        cluster.create_topic("t", {0: [0]})
        read = cluster.admin.get_replica_assignment_and_topic_ids(["t"])["t"]
        assert not isinstance(read, Exception) and read.topic_id is None
        assert cluster.active().controller.controller_context.topic_ids == {}
    finally:
        cluster.close()


def test_topic_id_persists_through_controller_reelection(cluster: Cluster) -> None:
    cluster.start_all([0, 1])
    cluster.create_topic("t", {0: [0, 1]})
    first = cluster.active()
    topic_id = first.controller.controller_context.topic_ids["t"]
    cluster.stop(first.id)
    second = cluster.active()
    assert second.id != first.id
    assert second.controller.controller_context.topic_ids["t"] == topic_id


def test_topic_id_created_on_upgrade() -> None:
    """A topic created on IBP 2.7 gets an id, written to its znode, when an IBP 2.8 controller takes over."""
    cluster = Cluster(config={"inter.broker.protocol.version": "2.7-IV2"})
    try:
        cluster.start(0)
        cluster.create_topic("t", {0: [0]})
        cluster.stop(0)
        cluster.start(0, inter_broker_protocol_version="2.8-IV1")
        ctx = cluster.active().controller.controller_context
        read = cluster.admin.get_replica_assignment_and_topic_ids(["t"])["t"]
        assert not isinstance(read, Exception) and read.topic_id is not None
        assert ctx.topic_ids["t"] == read.topic_id
    finally:
        cluster.close()


def test_topic_id_removed_on_topic_deletion(cluster: Cluster) -> None:
    cluster.start(0)
    cluster.create_topic("t", {0: [0]})
    ctx = cluster.active().controller.controller_context
    topic_id = ctx.topic_ids["t"]
    cluster.admin.create_delete_topic_path("t")
    cluster.wait_idle()
    cluster.respond_all()
    wait_until(lambda: "t" not in ctx.topic_ids, "the topic id is forgotten")
    assert topic_id not in ctx.topic_names
