"""The cluster view: per-partition flags, per-broker counts and the summary, from ZooKeeper reads."""

from __future__ import annotations

from kafka_controller.admin.describe import build_cluster_view, read_cluster_view
from kafka_controller.domain.errors import ZNodeDecodeError
from kafka_controller.domain.values import (
    Broker,
    EndPoint,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
    TopicPartition,
)
from kafka_controller.dryrun.memory_store import InMemoryMetadataStore
from kafka_controller.ports import TopicIdReplicaAssignment


def _broker(i: int) -> Broker:
    return Broker(i, (EndPoint("127.0.0.1", 9000 + i),))


def _state(leader: int, epoch: int, isr: tuple[int, ...]) -> LeaderIsrAndControllerEpoch:
    return LeaderIsrAndControllerEpoch(LeaderAndIsr(leader, epoch, isr, 3), 2)


def test_flags_follow_kafkas_definitions() -> None:
    tp = [TopicPartition("t", p) for p in range(6)]
    topics = {
        "t": TopicIdReplicaAssignment(
            "t",
            "AAAAAAAAAAAAAAAAAAAAAA",
            {
                tp[0]: ReplicaAssignment.of([1, 2]),  # healthy
                tp[1]: ReplicaAssignment.of([1, 2]),  # leader on a dead broker: offline
                tp[2]: ReplicaAssignment.of([2, 1]),  # on broker 1, not preferred; ISR short
                tp[3]: ReplicaAssignment.of([3, 1, 2], adding=[3], removing=[]),  # RF = origin (1, 2)
                tp[4]: ReplicaAssignment.of([1, 2]),  # leader -1
                tp[5]: ReplicaAssignment.of([1, 2]),  # no state znode
            },
        )
    }
    states = {
        tp[0]: _state(1, 0, (1, 2)),
        tp[1]: _state(9, 4, (9,)),
        tp[2]: _state(1, 1, (1,)),
        tp[3]: _state(1, 2, (1, 2)),
        tp[4]: _state(-1, 5, (2,)),
        tp[5]: None,
    }
    view = build_cluster_view(
        controller_id=1,
        controller_epoch=(2, 2),
        brokers={_broker(1): 10, _broker(2): 20},
        topics=topics,
        states=states,
        configs={"t": {"min.insync.replicas": "2"}},
    )
    flags = {p.partition: p.flags for p in view.partitions}
    assert flags == {
        0: [],
        1: ["offline", "under-replicated", "under-min-isr", "not-preferred-leader"],
        2: ["under-replicated", "under-min-isr", "not-preferred-leader"],
        3: ["not-preferred-leader", "reassigning"],
        4: ["offline", "under-replicated", "under-min-isr"],
        5: ["offline", "under-replicated", "under-min-isr"],
    }
    assert view.partitions[5].error == "no state znode"
    assert [(b.id, b.leaders, b.replicas, b.preferred, b.epoch) for b in view.brokers] == [
        (1, 3, 6, 4, 10),
        (2, 0, 6, 1, 20),
    ]
    s = view.summary
    assert (s["partitions"], s["offline"], s["under_replicated"], s["under_min_isr"]) == (6, 3, 4, 4)
    assert (s["not_preferred_leader"], s["reassigning"], s["leader_skew"]) == (3, 1, 3)
    assert s["preferred_leader_share"] == round(1 / 6, 4)
    assert view.topics[0].replication_factor == 2
    doc = view.to_json()
    assert doc["controller"] == {"broker_id": 1, "epoch": 2, "epoch_zk_version": 2}
    assert doc["partitions"][1]["flags"] == flags[1]


def test_a_corrupt_topic_is_reported_not_fatal() -> None:
    view = build_cluster_view(
        controller_id=None,
        controller_epoch=None,
        brokers={},
        topics={"bad": ZNodeDecodeError("/brokers/topics/bad", "invalid JSON")},
        states={},
        configs={},
    )
    assert view.topics[0].error == "cannot decode /brokers/topics/bad: invalid JSON"
    assert view.partitions == ()
    assert view.summary["preferred_leader_share"] == 1.0


def test_read_cluster_view_from_a_store() -> None:
    store = InMemoryMetadataStore()
    store.register_broker(_broker(1))
    store.register_broker(_broker(2))
    epoch, zkv = store.register_controller_and_increment_controller_epoch(1)
    store.create_topic(
        "t", {0: ReplicaAssignment.of([1, 2]), 1: ReplicaAssignment.of([2, 1])}, {"min.insync.replicas": "2"}
    )
    store.create_topic("u", {0: ReplicaAssignment.of([2])})
    store.create_partition_states(
        {TopicPartition("t", 0): _state(2, 1, (2,)), TopicPartition("t", 1): _state(2, 0, (2, 1))}, zkv
    )
    store.create_delete_topic_path("u")
    view = read_cluster_view(store)
    assert (view.controller_id, view.controller_epoch) == (1, epoch)
    assert [t.name for t in view.topics] == ["t", "u"]
    assert view.topics[1].marked_for_deletion
    t0 = view.partition("t", 0)
    assert t0 is not None and t0.flags == ["under-replicated", "under-min-isr", "not-preferred-leader"]
    assert view.leaders_on(2) == [TopicPartition("t", 0), TopicPartition("t", 1)]
    only_t = read_cluster_view(store, ["t"])
    assert [p.topic for p in only_t.partitions] == ["t", "t"]


def test_preferred_replica_imbalance_is_the_controllers_gauge() -> None:
    """``describe``'s PreferredReplicaImbalanceCount is the controller's, partition for partition:
    offline partitions count, a topic queued for deletion does not, nor a preferred replica still
    being added; ``not_preferred_leader`` (a leader other than the preferred replica) is the other number."""
    from kafka_controller.core.context import ControllerContext

    tp = [TopicPartition("t", p) for p in range(6)]
    gone = TopicPartition("gone", 0)
    assignments = {
        tp[0]: ReplicaAssignment.of([1, 2]),  # on its preferred leader
        tp[1]: ReplicaAssignment.of([1, 2]),  # offline (leader -1): Kafka counts it
        tp[2]: ReplicaAssignment.of([2, 1]),  # led by 1, not preferred
        tp[3]: ReplicaAssignment.of([3, 1, 2], adding=[3], removing=[]),  # preferred 3 not in ISR yet
        tp[4]: ReplicaAssignment.of([1, 2]),  # leader on a dead broker: offline, counted
        tp[5]: ReplicaAssignment.of([2, 1]),  # no state: not counted
        gone: ReplicaAssignment.of([2, 1]),  # not preferred, but queued for deletion
    }
    states = {
        tp[0]: _state(1, 0, (1, 2)),
        tp[1]: _state(-1, 3, (2,)),
        tp[2]: _state(1, 1, (1, 2)),
        tp[3]: _state(1, 2, (1, 2)),
        tp[4]: _state(9, 1, (9,)),
        gone: _state(1, 0, (1, 2)),
    }
    ctx = ControllerContext()
    for p, ra in assignments.items():
        ctx.update_partition_full_replica_assignment(p, ra)
    ctx.put_partition_leadership_infos(states.items())
    ctx.queue_topic_deletion(["gone"])

    def topic(name: str) -> TopicIdReplicaAssignment:
        return TopicIdReplicaAssignment(
            name, None, {p: ra for p, ra in assignments.items() if p.topic == name}
        )

    view = build_cluster_view(
        controller_id=1,
        controller_epoch=(2, 2),
        brokers={_broker(1): 10, _broker(2): 20},
        topics={"t": topic("t"), "gone": topic("gone")},
        states={**states, tp[5]: None},
        configs={},
        deletions=["gone"],
    )
    assert ctx.preferred_replica_imbalance_count == 3
    assert view.summary["preferred_replica_imbalance"] == ctx.preferred_replica_imbalance_count
    assert sorted((p.topic, p.partition) for p in view.partitions if p.preferred_replica_imbalance) == [
        ("t", 1), ("t", 2), ("t", 4)
    ]  # fmt: skip
    assert view.summary["not_preferred_leader"] == 4  # t-2, t-3, t-4 (dead leader 9) and gone-0
