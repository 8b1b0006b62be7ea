"""Failover, resignation and session loss: Kafka's ControllerFailoverTest plus what a
controller taking over a real Kafka 2.8 cluster must do (docs/controller-behaviour.md §8.2, §8.3, §8.4)."""

from __future__ import annotations

import threading

import orjson

from kafka_controller.controller.events import MockEvent
from kafka_controller.domain.audit_records import ControllerEventRecord, PartitionTransition
from kafka_controller.domain.errors import IllegalControllerStateError
from kafka_controller.domain.requests import LeaderAndIsrRequest
from kafka_controller.domain.states import PartitionState
from kafka_controller.domain.values import NO_LEADER, ReplicaAssignment, TopicPartition
from kafka_controller.dryrun.recording import RecordingAuditSink
from tests.controller.cluster import Cluster, wait_until

TP = TopicPartition("topic1", 0)


def test_handle_illegal_state_exception(cluster: Cluster) -> None:
    """KAFKA-2300: a broken batch makes the controller resign and delete /controller; some broker
    then becomes controller with a higher epoch."""
    cluster.start_all([0, 1])
    cluster.create_topic("topic1", {0: [0, 1]})
    active = cluster.active()
    controller = active.controller
    wait_until(
        lambda: controller.controller_context.partition_states.get(TP) is PartitionState.ONLINE_PARTITION,
        "topic1-0 is online in the controller's context",
    )
    initial_epoch = cluster.controller_epoch()[0]
    seen: dict[str, object] = {}

    def action() -> None:
        error = IllegalControllerStateError("injected")
        try:
            controller.handle_illegal_state(error)
        except IllegalControllerStateError as e:
            seen["raised"] = e
        seen["scheduler_started"] = controller.kafka_scheduler.is_started
        seen["active"] = controller.is_active

    controller.event_manager.put(MockEvent(action))
    wait_until(lambda: "active" in seen, "the mock event ran")
    assert isinstance(seen["raised"], IllegalControllerStateError) and str(seen["raised"]) == "injected"
    assert seen["scheduler_started"] is False
    assert seen["active"] is False

    def new_controller_elected() -> bool:
        epoch = cluster.admin.get_controller_epoch()
        cid = cluster.admin.get_controller_id()
        return (
            epoch is not None
            and epoch[0] > initial_epoch
            and cid in cluster.brokers
            and cluster.brokers[cid].controller.is_active
        )

    wait_until(new_controller_elected, "a broker is active with a higher epoch")


def test_failover_to_another_broker(cluster: Cluster) -> None:
    """The controller dies: another takes over (epoch 2), re-elects only what the dead one led."""
    cluster.start_all([0, 1, 2])
    first = cluster.active()
    other = next(b for b in (0, 1, 2) if b != first.id)
    cluster.create_topic("a", {0: [first.id, other], 1: [other, first.id]})
    a0, a1 = TopicPartition("a", 0), TopicPartition("a", 1)
    before = cluster.state(a1)
    cluster.stop(first.id)
    second = cluster.active()
    assert second.id != first.id
    assert cluster.controller_epoch()[0] == 2
    # Kafka's startup writes a-0 twice: the dead leader leaves the ISR (leader -1, epoch 1), then
    # the survivor is elected (epoch 2). The election alone writes it here (README deviation 20):
    # the same leader and ISR, one epoch bump.
    state = cluster.wait_state(a0, 2, other, 1, "a-0 lost its leader and was re-elected")
    assert state.leader_and_isr.zk_version == 1
    assert state.leader_and_isr.isr == (other,)
    after = cluster.state(a1)
    assert after is not None and before is not None
    assert after.leader_and_isr.leader == other
    # a-1 kept its leader; only the dead replica left its ISR (one write, epoch + 1).
    assert after.leader_and_isr.leader_epoch == before.leader_and_isr.leader_epoch + 1
    assert after.leader_and_isr.isr == (other,)


def _kafka_28_tree(cluster: Cluster) -> dict[str, str]:
    """Write, byte for byte, what a Kafka 2.8 cluster leaves in ZooKeeper: controller epoch 7,
    v3 topic znodes with ids (and one v2 znode without), states at leader epochs > 0 written by
    controller epoch 7 (Scala 2.13 key order). Returns {topic: id}."""
    s = cluster.tree.open_session()
    ids = {"orders": "q6dW1yH6RVW9s3lQ0Oo8Cw", "payments": "Zp2fM7kUQLOwzmQfPj1GZg"}
    s.create("/controller_epoch", b"7")
    for _ in range(6):
        s.set_data("/controller_epoch", b"7")
    layout = {
        ("orders", 0): ([0, 1, 2], 0, 5),
        ("orders", 1): ([1, 2, 0], 1, 3),
        ("orders", 2): ([2, 0, 1], 2, 8),
        ("payments", 0): ([1, 0], 1, 2),
        ("legacy", 0): ([0, 1], 0, 1),
        ("legacy", 1): ([3, 0], 3, 4),  # led by broker 3, which is gone
    }
    topics: dict[str, dict[str, list[int]]] = {}
    for (topic, p), (replicas, _, _) in layout.items():
        topics.setdefault(topic, {})[str(p)] = replicas
    for topic, partitions in topics.items():
        if topic in ids:
            doc = {
                "version": 3,
                "partitions": partitions,
                "topic_id": ids[topic],
                "adding_replicas": {},
                "removing_replicas": {},
            }
        else:
            doc = {"version": 2, "partitions": partitions, "adding_replicas": {}, "removing_replicas": {}}
        s.create(f"/brokers/topics/{topic}", orjson.dumps(doc))
        s.create(f"/config/topics/{topic}", b'{"version":1,"config":{}}')
        s.create(f"/brokers/topics/{topic}/partitions", None)
    for (topic, p), (replicas, leader, leader_epoch) in layout.items():
        s.create(f"/brokers/topics/{topic}/partitions/{p}", None)
        state = (
            f'{{"controller_epoch":7,"leader":{leader},"version":1,"leader_epoch":{leader_epoch},'
            f'"isr":[{",".join(map(str, replicas))}]}}'
        )
        s.create(f"/brokers/topics/{topic}/partitions/{p}/state", state.encode())
    s.create("/cluster", None)
    s.create("/cluster/id", b'{"version":"1","id":"p3VZ9d5mS4yO1mJ2xWbQ7A"}')
    s.close()
    return ids


def test_real_kafka_28_tree_loads_without_needless_elections(cluster: Cluster) -> None:
    ids = _kafka_28_tree(cluster)
    healthy = [
        TopicPartition(t, p) for t, p in (("orders", 0), ("orders", 1), ("orders", 2), ("payments", 0))
    ]
    healthy.append(TopicPartition("legacy", 0))
    reads_before = cluster.admin.get_partition_states(healthy)
    cluster.start_all([0, 1, 2])
    active = cluster.active()
    assert cluster.controller_epoch()[0] == 8
    ctx = active.controller.controller_context
    # Healthy partitions: not one write (same zk version, same leader epoch, old controller epoch).
    assert cluster.admin.get_partition_states(healthy) == reads_before
    for tp in healthy:
        assert ctx.partition_states[tp] is PartitionState.ONLINE_PARTITION
    # The partition led by the vanished broker 3: the election elects 0 and takes 3 out of the ISR
    # in one write (epoch 5; Kafka writes twice, leader -1 at epoch 5 then 0 at 6: deviation 20).
    legacy1 = cluster.wait_state(TopicPartition("legacy", 1), 8, 0, 5, "legacy-1 re-elected")
    assert legacy1.leader_and_isr.isr == (0,)
    # Known ids loaded as they are; the v2 topic got one, written back.
    assert {t: ctx.topic_ids[t] for t in ids} == ids
    read = cluster.admin.get_replica_assignment_and_topic_ids(["legacy"])["legacy"]
    assert not isinstance(read, Exception) and read.topic_id == ctx.topic_ids["legacy"]
    assert dict(read.assignment)[TopicPartition("legacy", 0)] == ReplicaAssignment.of([0, 1])
    # Every broker was told its replicas at the epochs found in the tree.
    sent = [
        (p.topic, p.partition, p.leader_epoch)
        for s in active.channel.sent
        if s.broker_id == 2 and isinstance(s.request, LeaderAndIsrRequest)
        for p in s.request.partition_states
    ]
    assert {("orders", 0, 5), ("orders", 1, 3), ("orders", 2, 8)} <= set(sent)
    assert ctx.offline_partition_count == 0
    assert active.controller.metric("OfflinePartitionsCount") == 0
    assert active.controller.metric("GlobalTopicCount") == 3


def test_session_expiry_resigns_and_reelects() -> None:
    audit = RecordingAuditSink()
    cluster = Cluster(audit=lambda _id: audit)
    try:
        sim = cluster.start(0)
        cluster.create_topic("t", {0: [0]})
        assert cluster.active().id == 0 and cluster.controller_epoch()[0] == 1
        old_broker_epoch = sim.store.get_all_brokers_and_epochs()
        sim.store.expire_session()  # /controller and /brokers/ids/0 vanish with the session
        cluster.wait_idle()
        wait_until(lambda: sim.controller.is_active and cluster.controller_epoch()[0] == 2, "re-elected")
        new_broker_epoch = cluster.admin.get_all_brokers_and_epochs()
        assert [b.id for b in new_broker_epoch] == [0]
        assert max(new_broker_epoch.values()) > max(old_broker_epoch.values())  # re-registered
        kinds = [r.kind for r in audit.records if isinstance(r, ControllerEventRecord)]
        assert kinds[:2] == ["elected", "failover"]
        assert kinds[2:] == ["resigned", "elected", "failover"]
        epochs = [r.controller_epoch for r in audit.records if isinstance(r, ControllerEventRecord)]
        assert epochs == [1, 1, 1, 2, 2]  # the resignation records the epoch it gave up, not 0
        state = cluster.wait_state(TopicPartition("t", 0), 1, 0, 0, "the partition survived untouched")
        assert state.leader_and_isr.isr == (0,)
    finally:
        cluster.close()


def test_session_expiry_of_controller_moves_the_role(cluster: Cluster) -> None:
    cluster.start_all([0, 1])
    first = cluster.active()
    other = 1 - first.id
    cluster.create_topic("t", {0: [first.id, other]})
    first.store.expire_session()
    cluster.wait_idle()
    second = cluster.active()
    assert not first.controller.is_active or second.id == first.id
    assert cluster.controller_epoch()[0] == 2
    # Both brokers are registered and known to the new controller.
    wait_until(
        lambda: second.controller.controller_context.live_or_shutting_down_broker_ids == {0, 1},
        "the new controller knows both brokers",
    )
    state = cluster.state(TopicPartition("t", 0))
    assert state is not None and state.leader_and_isr.leader != NO_LEADER


def test_resignation_resets_context_and_metrics(cluster: Cluster) -> None:
    cluster.start_all([0, 1])
    cluster.create_topic("t", {0: [0, 1]})
    first = cluster.active()
    assert first.controller.metric("ActiveControllerCount") == 1
    assert first.controller.metric("GlobalPartitionCount") == 1
    cluster.admin.delete_controller(-1)  # the role moves: every broker re-elects
    cluster.wait_idle()
    new = cluster.active()
    for sim in cluster.running():
        expected = 1 if sim.id == new.id else 0
        assert sim.controller.metric("ActiveControllerCount") == expected
    loser = next((s for s in cluster.running() if s.id != new.id), None)
    if loser is not None:
        assert loser.controller.controller_context.all_topics == set()
        assert loser.controller.metric("GlobalPartitionCount") == 0
        assert not loser.controller.kafka_scheduler.is_started


def test_every_transition_of_a_failover_is_audited_once_per_call() -> None:
    audit = RecordingAuditSink()
    calls: list[int] = []

    class CountingSink:
        def record(self, records: list[object]) -> None:
            calls.append(len(records))
            audit.record(records)  # type: ignore[arg-type]

    cluster = Cluster(audit=lambda _id: CountingSink())  # type: ignore[arg-type, return-value]
    try:
        cluster.start(0)
        cluster.create_topic("t", {p: [0] for p in range(50)})
        partition_records = [r for r in audit.records if isinstance(r, PartitionTransition)]
        # New -> NewPartition and NewPartition -> Online for each of the 50 partitions...
        assert len([r for r in partition_records if r.to_state == "OnlinePartition"]) == 50
        # ...delivered in batches (one call per state-machine call), not one call per partition.
        assert max(calls) >= 50 and len(calls) < 20
        seqs = [r.sequence for r in audit.records]
        assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    finally:
        cluster.close()


def test_broker_change_during_blocked_thread_is_seen_once(cluster: Cluster) -> None:
    """Watches only enqueue: a broker dying while the event thread is busy is one BrokerChange."""
    cluster.start_all([0, 1])
    active = cluster.active()
    other = 1 - active.id
    latch = threading.Event()
    active.controller.event_manager.put(MockEvent(lambda: latch.wait(10)))
    cluster.stop(other)
    assert active.controller.event_manager.queue_size >= 1
    latch.set()
    cluster.wait_idle()
    assert active.controller.controller_context.live_or_shutting_down_broker_ids == {active.id}
    assert ("remove", other) in active.channel.membership_changes
