"""LeaderAndIsr and StopReplica on the broker: controller-epoch and leader-epoch fencing (Kafka 2.8)."""

from __future__ import annotations

from kafka_controller.broker.partition import Partition
from kafka_controller.broker.replica_manager import ReplicaManager
from kafka_controller.domain.requests import Errors
from kafka_controller.domain.values import Broker, TopicPartition
from kafka_controller.testing.clock import ManualClock
from tests.broker.helpers import broker, leader_and_isr, state, stop_replica

T0, T1, T2 = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("t", 2)


class RecordingListener:
    def __init__(self) -> None:
        self.leaders: list[list[TopicPartition]] = []
        self.followers: list[dict[int, list[TopicPartition]]] = []
        self.addresses: list[dict[int, Broker]] = []
        self.stopped: list[list[TopicPartition]] = []

    def on_become_leaders(self, partitions: list[Partition]) -> None:
        self.leaders.append([p.tp for p in partitions])

    def on_become_followers(self, by_leader: dict[int, list[Partition]], leaders: dict[int, Broker]) -> None:
        self.followers.append({b: [p.tp for p in ps] for b, ps in by_leader.items()})
        self.addresses.append(leaders)

    def on_stop_replicas(self, partitions: list[TopicPartition]) -> None:
        self.stopped.append(partitions)


def manager() -> tuple[ReplicaManager, RecordingListener]:
    listener = RecordingListener()
    return ReplicaManager(1, ManualClock().time_ms, produce_rate_per_s=10.0, listener=listener), listener


def test_first_leader_and_isr_is_taken_and_reported_in_one_batch_per_role() -> None:
    rm, listener = manager()
    request = leader_and_isr(
        [state("t", 0, 1, 0, (1, 2)), state("t", 1, 2, 0, (2, 1)), state("t", 2, 3, 0, (3, 1))],
        live_leaders=[broker(2, 9002), broker(3, 9003)],
    )
    response = rm.become_leader_or_follower(request)
    assert response.error is Errors.NONE
    assert response.partition_errors == dict.fromkeys([T0, T1, T2], Errors.NONE)
    assert listener.leaders == [[T0]]
    assert listener.followers == [{2: [T1], 3: [T2]}]
    assert listener.addresses[0][3].endpoints[0].port == 9003
    assert rm.partitions_led() == {T0}
    assert rm.controller_epoch == 1


def test_request_from_an_older_controller_is_refused_whole_and_changes_nothing() -> None:
    rm, _ = manager()
    rm.become_leader_or_follower(leader_and_isr([state("t", 0, 1, 3, (1, 2))], controller_epoch=5))
    stale = leader_and_isr([state("t", 0, 2, 9, (2, 1)), state("t", 1, 1, 0, (1,))], controller_epoch=4)
    response = rm.become_leader_or_follower(stale)
    assert response.error is Errors.STALE_CONTROLLER_EPOCH
    assert set(response.partition_errors.values()) == {Errors.STALE_CONTROLLER_EPOCH}
    p = rm.get(T0)
    assert p is not None and (p.leader, p.leader_epoch) == (1, 3)
    assert rm.get(T1) is None
    assert rm.controller_epoch == 5
    assert not rm.check_controller_epoch(4, 1) and rm.check_controller_epoch(6, 2)
    # what the broker acted on, per controller epoch: the refused epoch-4 requests are not there
    assert rm.acted_on == {5: {1}, 6: {2}}


def test_acted_on_records_every_accepted_controller_request() -> None:
    rm, _ = manager()
    rm.become_leader_or_follower(leader_and_isr([state("t", 0, 1, 3, (1, 2))], controller_epoch=2))
    rm.stop_replicas(stop_replica({T0: (4, False)}, controller_epoch=3))
    rm.stop_replicas(stop_replica({T0: (5, False)}, controller_epoch=1))  # stale: refused
    assert rm.check_controller_epoch(3, 7)  # a second controller obeyed at epoch 3: recorded as such
    assert rm.acted_on == {2: {1}, 3: {1, 7}}


def test_leader_epoch_fencing_per_partition() -> None:
    rm, _ = manager()
    rm.become_leader_or_follower(leader_and_isr([state("t", 0, 1, 5, (1, 2)), state("t", 1, 1, 5, (1, 2))]))
    response = rm.become_leader_or_follower(
        leader_and_isr(
            [
                state("t", 0, 2, 4, (2, 1)),  # older leader epoch
                state("t", 1, 2, 5, (2, 1)),  # same leader epoch
                state("t", 2, 2, 0, (2, 3)),  # this broker is not a replica
            ]
        )
    )
    assert response.error is Errors.NONE
    assert response.partition_errors == {
        T0: Errors.STALE_CONTROLLER_EPOCH,
        T1: Errors.FENCED_LEADER_EPOCH,
        T2: Errors.UNKNOWN_TOPIC_OR_PARTITION,
    }
    assert rm.partitions_led() == {T0, T1}
    assert rm.get(T2) is None


def test_a_newer_leader_epoch_moves_leadership_and_the_fetcher() -> None:
    rm, listener = manager()
    rm.become_leader_or_follower(leader_and_isr([state("t", 0, 1, 0, (1, 2))]))
    rm.become_leader_or_follower(leader_and_isr([state("t", 0, 2, 1, (2, 1), zk_version=1)]))
    p = rm.get(T0)
    assert p is not None and not p.is_leader and (p.leader, p.leader_epoch, p.zk_version) == (2, 1, 1)
    assert listener.leaders == [[T0]] and listener.followers == [{2: [T0]}]


def test_stop_replica_fencing_and_deletion() -> None:
    rm, listener = manager()
    rm.become_leader_or_follower(
        leader_and_isr(
            [state("t", 0, 2, 3, (2, 1)), state("t", 1, 2, 3, (2, 1)), state("t", 2, 2, 3, (2, 1))]
        )
    )
    response = rm.stop_replicas(
        stop_replica({T0: (3, False), T1: (-2, True), T2: (4, False), TopicPartition("x", 0): (1, False)})
    )
    assert response.error is Errors.NONE
    assert response.partition_errors == {
        T0: Errors.FENCED_LEADER_EPOCH,  # same epoch: Kafka refuses it
        T1: Errors.NONE,  # -2: topic being deleted, always taken
        T2: Errors.NONE,
        TopicPartition("x", 0): Errors.NONE,  # unknown here: nothing to stop
    }
    assert listener.stopped == [[T1, T2]]
    assert rm.get(T1) is None and rm.get(T2) is not None  # only delete=true removes the replica


def test_stop_replica_from_an_older_controller_is_refused() -> None:
    rm, listener = manager()
    rm.become_leader_or_follower(leader_and_isr([state("t", 0, 2, 0, (2, 1))], controller_epoch=3))
    response = rm.stop_replicas(stop_replica({T0: (-2, True)}, controller_epoch=2))
    assert response.error is Errors.STALE_CONTROLLER_EPOCH
    assert rm.get(T0) is not None and listener.stopped == []


def test_ten_thousand_partitions_in_one_request() -> None:
    rm, listener = manager()
    # i % 3 == 0: replicas (1, 2), led here; == 1: (2, 3), not hosted here; == 2: (3, 1), followed
    states = [
        state(f"t{i // 100}", i % 100, 1 + i % 3, 0, (1 + i % 3, 1 + (i + 1) % 3)) for i in range(10_000)
    ]
    response = rm.become_leader_or_follower(leader_and_isr(states))
    errors = list(response.partition_errors.values())
    assert len(errors) == 10_000
    assert errors.count(Errors.NONE) == 3334 + 3333
    assert errors.count(Errors.UNKNOWN_TOPIC_OR_PARTITION) == 3333
    assert len(listener.leaders) == 1 and len(listener.leaders[0]) == 3334
    assert list(listener.followers[0]) == [3] and len(listener.followers[0][3]) == 3333
    assert len(rm.partitions_led()) == 3334
