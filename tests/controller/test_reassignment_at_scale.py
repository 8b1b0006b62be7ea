"""A reassignment of thousands of partitions on a real ZooKeeper, cancelled half-way.

The controller runs every phase of a reassignment for all the partitions of a request at once
(one batched state read and write, one topic znode write per topic, one request batch per phase),
so a big plan starts in one pass and a cancel is answered behind it. Here 2,000 partitions move one
broker along; a quarter complete through AlterIsr (the batched completion), an admin request is
answered meanwhile, and the rest are cancelled. Every partition must end on its original replicas
(cancelled) or its target (completed), with nothing adding or removing left anywhere.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from kafka_controller.controller.events import ApiError
from kafka_controller.domain.errors import MetadataStoreError
from kafka_controller.domain.requests import Errors
from kafka_controller.domain.values import (
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
    TopicPartition,
)
from tests.controller.cluster import Answer, Cluster, wait_until

pytestmark = pytest.mark.zk

BROKERS = (0, 1, 2, 3)
TOPICS = 20
PARTITIONS = 100
#: Generous: the whole test does a few dozen batched round trips; CI machines are slow and shared.
DEADLINE_S = 120.0


@pytest.fixture
def cluster(zk_connect: str) -> Iterator[Cluster]:
    from kafka_controller.zk.kazoo_backend import KazooMetadataStore
    from kafka_controller.zk.security import ZkClientConfig

    def store() -> Any:
        return KazooMetadataStore(
            ZkClientConfig(zk_connect, session_timeout_ms=20000, connection_timeout_ms=20000)
        )

    c = Cluster(store_factory=store)
    yield c
    c.close()


def _origin(t: int, p: int) -> tuple[int, ...]:
    b = (t * PARTITIONS + p) % len(BROKERS)
    return (BROKERS[b], BROKERS[(b + 1) % len(BROKERS)])


def _target(origin: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(BROKERS[(BROKERS.index(r) + 1) % len(BROKERS)] for r in origin)


def _topic_znodes(cluster: Cluster) -> dict[str, Any]:
    reads = cluster.admin.get_replica_assignment_and_topic_ids([f"t{t}" for t in range(TOPICS)])
    assert not any(isinstance(r, MetadataStoreError) for r in reads.values()), reads
    return reads


def _assignments(cluster: Cluster) -> dict[TopicPartition, ReplicaAssignment]:
    out: dict[TopicPartition, ReplicaAssignment] = {}
    for read in _topic_znodes(cluster).values():
        out.update(read.assignment)
    return out


def _states(cluster: Cluster, tps: list[TopicPartition]) -> dict[TopicPartition, LeaderIsrAndControllerEpoch]:
    reads = cluster.admin.get_partition_states(tps)
    assert all(isinstance(s, LeaderIsrAndControllerEpoch) for s in reads.values())
    return reads  # type: ignore[return-value]


def _call(request: Any, *args: Any) -> Any:
    answer = Answer()
    request(*args, answer)
    return answer.get(DEADLINE_S)


def test_thousands_of_moves_start_in_one_pass_and_a_cancel_reverts_the_rest(cluster: Cluster) -> None:
    for b in BROKERS:
        cluster.start(b, launch=False)
    for b in BROKERS:
        cluster.launch(b)
    wait_until(lambda: cluster.admin.get_controller_id() in BROKERS, "a controller", DEADLINE_S)
    for t in range(TOPICS):
        cluster.admin.create_topic(
            f"t{t}", {p: ReplicaAssignment.of(_origin(t, p)) for p in range(PARTITIONS)}
        )
    origin = {TopicPartition(f"t{t}", p): _origin(t, p) for t in range(TOPICS) for p in range(PARTITIONS)}
    tps = sorted(origin)
    wait_until(
        lambda: all(s is not None for s in cluster.admin.get_partition_states(tps).values()),
        "every partition created",
        DEADLINE_S,
    )
    controller = cluster.active().controller
    versions = {topic: read.zk_version for topic, read in _topic_znodes(cluster).items()}

    targets = {tp: _target(rs) for tp, rs in origin.items()}
    started = _call(controller.alter_partition_reassignments, {tp: list(t) for tp, t in targets.items()})
    assert started == dict.fromkeys(tps, ApiError(Errors.NONE))
    moving = _assignments(cluster)
    for tp in tps:
        assert moving[tp].target_replicas == targets[tp], tp
        assert moving[tp].adding_replicas and moving[tp].removing_replicas, tp
    # One topic znode write per topic for its 100 partitions, not one per partition.
    assert {t: r.zk_version for t, r in _topic_znodes(cluster).items()} == {
        t: v + 1 for t, v in versions.items()
    }

    # A quarter catch up: their leaders put the whole replica set in the ISR (one AlterIsr each).
    catching_up = tps[: len(tps) // 4]
    states = _states(cluster, catching_up)
    by_leader: dict[int, dict[TopicPartition, LeaderAndIsr]] = {}
    for tp in catching_up:
        lai = states[tp].leader_and_isr
        by_leader.setdefault(lai.leader, {})[tp] = LeaderAndIsr(
            lai.leader, lai.leader_epoch, moving[tp].replicas, lai.zk_version
        )
    for leader, isrs in by_leader.items():
        answers = _call(controller.alter_isr, leader, cluster.brokers[leader].epoch, isrs)
        assert all(isinstance(a, LeaderAndIsr) for a in answers.values()), answers
    # Another admin request is answered meanwhile, and sees only the moves still going.
    listed = _call(controller.list_partition_reassignments, None)
    assert sorted(listed) == tps[len(catching_up) :]

    cancelled = _call(controller.alter_partition_reassignments, dict.fromkeys(tps))
    assert cancelled == {
        **dict.fromkeys(catching_up, ApiError(Errors.NO_REASSIGNMENT_IN_PROGRESS)),
        **dict.fromkeys(tps[len(catching_up) :], ApiError(Errors.NONE)),
    }
    cluster.wait_idle()

    after = _assignments(cluster)
    for tp in tps:
        # Kafka's origin is RS minus AR, in RS's order (the target first): a cancel restores the
        # original replicas, not necessarily their order.
        expected = targets[tp] if tp in catching_up else moving[tp].origin_replicas
        assert after[tp] == ReplicaAssignment.of(expected), (tp, after[tp])
        assert set(after[tp].replicas) == set(targets[tp] if tp in catching_up else origin[tp])
    assert _call(controller.list_partition_reassignments, None) == {}
    assert not controller.controller_context.partitions_being_reassigned
    for tp, state in _states(cluster, tps).items():
        lai = state.leader_and_isr
        assert lai.leader in after[tp].replicas and set(lai.isr) <= set(after[tp].replicas), (tp, lai)
