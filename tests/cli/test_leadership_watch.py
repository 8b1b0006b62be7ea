"""What a broker led at the instant it deregistered, judged by zxids (``cluster.watch``).

The in-memory ZooKeeper keeps real zxids, versions and ``pzxid``, so each case scripts writes
before and after the deregistration between two looks, as a fast shutdown does in real life.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from kafka_controller.cluster.watch import LeadershipWatch, ShutdownTimeoutError, partitions_of
from kafka_controller.domain.errors import KafkaControllerError
from kafka_controller.domain.values import (
    Broker,
    EndPoint,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
    TopicPartition,
)
from kafka_controller.dryrun.memory_store import InMemoryMetadataStore
from kafka_controller.dryrun.memory_zk import InMemoryZooKeeper
from kafka_controller.zk import paths as P
from kafka_controller.zk.codecs import encode_partition_state

T = [TopicPartition("t", p) for p in range(4)]
R0 = TopicPartition("r", 0)


class World:
    def __init__(self) -> None:
        self.tree = InMemoryZooKeeper()
        self.admin = InMemoryMetadataStore(self.tree)
        self.broker = InMemoryMetadataStore(self.tree)
        self.broker.register_broker(Broker(1, (EndPoint("127.0.0.1", 9001),)))
        self.admin.create_topic("t", {p: ReplicaAssignment.of([1, 2]) for p in range(4)})
        self.admin.create_topic("r", {0: ReplicaAssignment.of([1])})
        self.admin.create_topic("other", {0: ReplicaAssignment.of([2, 3])})
        _epoch, zkv = self.admin.register_controller_and_increment_controller_epoch(2)
        leaders = {T[0]: 1, T[1]: 2, T[2]: 1, T[3]: 2, R0: 1}
        self.admin.create_partition_states({tp: self._state(leader) for tp, leader in leaders.items()}, zkv)

    @staticmethod
    def _state(leader: int) -> LeaderIsrAndControllerEpoch:
        return LeaderIsrAndControllerEpoch(LeaderAndIsr(leader, 0, (1, 2), 0), 1)

    def _data(self, leader: int) -> bytes:
        return encode_partition_state(self._state(leader))

    def write(self, tp: TopicPartition, leader: int) -> None:
        self.admin.session.set_data(P.topic_partition_state_path(tp), self._data(leader), -1)

    def deregister(self) -> None:
        self.broker.close()


def _scripted(*steps: Callable[[], None]) -> Callable[[float], None]:
    queue = list(steps)

    def sleep(_s: float) -> None:
        if queue:
            queue.pop(0)()

    return sleep


def test_partitions_of_lists_every_replica_of_the_broker() -> None:
    w = World()
    assert partitions_of(w.admin, 1) == [R0, *T]
    assert partitions_of(w.admin, 3) == [TopicPartition("other", 0)]


def test_led_at_exit_is_judged_by_zxid_not_by_the_last_look() -> None:
    w = World()
    watch = LeadershipWatch(w.admin, 1, partitions_of(w.admin, 1))
    assert watch.led == [R0, T[0], T[2]]

    def shutdown_then_failure_handling() -> None:
        w.write(T[3], 1)  # unseen write before the exit: t-3 was led at exit ...
        w.deregister()
        w.write(T[3], 2)  # ... and moved again after it: two writes since the look
        w.write(T[2], 2)  # moved only after the exit: it was still led at exit
        w.write(R0, -1)  # single replica: offline after the exit

    led = watch.wait_deregistered(
        deadline=1e9,
        sleep=_scripted(lambda: w.write(T[0], 2), shutdown_then_failure_handling),
        monotonic=lambda: 0.0,
    )
    assert led == [R0, T[2], T[3]]


def test_a_clean_handover_leads_nothing_at_exit() -> None:
    w = World()
    watch = LeadershipWatch(w.admin, 1, [T[0], T[2]])

    def handover_and_exit() -> None:
        w.write(T[0], 2)
        w.write(T[2], 2)  # both before the exit, never seen by a look
        w.deregister()

    assert (
        watch.wait_deregistered(deadline=1e9, sleep=_scripted(handover_and_exit), monotonic=lambda: 0.0) == []
    )


def test_deadline_and_unregistered_broker() -> None:
    w = World()
    watch = LeadershipWatch(w.admin, 1, [T[0]])
    clock = iter([0.0, 5.0, 10.0])
    with pytest.raises(ShutdownTimeoutError) as e:
        watch.wait_deregistered(deadline=4.0, sleep=lambda _s: None, monotonic=lambda: next(clock))
    assert str(e.value) == "broker 1 is still registered at the deadline; it leads 1 partition(s)"
    with pytest.raises(KafkaControllerError, match="broker 7 is not registered"):
        LeadershipWatch(w.admin, 7, [T[0]])
