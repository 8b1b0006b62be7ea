"""The batched reassignment phases keep Kafka's per-partition failures: a partition whose step fails
is answered with its error and stops there, while the other partitions of the same request go on
(Kafka's loop catches each partition's exception), on the in-memory store."""

from __future__ import annotations

from typing import Any

import pytest

from kafka_controller.controller.events import ApiError
from kafka_controller.domain.errors import NoNodeError
from kafka_controller.domain.requests import Errors, LeaderAndIsrRequest
from kafka_controller.domain.values import ReplicaAssignment, TopicPartition
from tests.controller.cluster import Answer, Cluster

TPS = [TopicPartition("t", p) for p in range(3)]
BAD = TPS[1]


def test_a_partition_whose_epoch_bump_fails_fails_alone(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster.start_all([0, 1])
    cluster.create_topic("t", {p: [0] for p in range(3)})
    active = cluster.active()
    store = active.controller.store
    real = store.update_leader_and_isr

    def failing_for_bad(lais: Any, epoch: int, zk_version: int) -> Any:
        result = real({tp: lai for tp, lai in lais.items() if tp != BAD}, epoch, zk_version)
        if BAD in lais:
            result.finished[BAD] = NoNodeError("the state znode went away")
        return result

    monkeypatch.setattr(store, "update_leader_and_isr", failing_for_bad)
    answer = Answer()
    active.controller.alter_partition_reassignments({tp: [1] for tp in TPS}, answer)
    result = answer.get()
    cluster.wait_idle()

    assert result[TPS[0]] == result[TPS[2]] == ApiError(Errors.NONE)
    assert result[BAD].error is Errors.UNKNOWN_SERVER_ERROR and "went away" in str(result[BAD].message)
    # Every partition's new assignment was written (phase U comes first, as in Kafka) ...
    read = cluster.admin.get_replica_assignment_and_topic_ids(["t"])["t"]
    assert not isinstance(read, Exception)
    assert {tp: read.assignment[tp] for tp in TPS} == dict.fromkeys(
        TPS, ReplicaAssignment.of([1, 0], [1], [0])
    )
    # ... but only the others were started on the new replica: the failed one stopped at its bump.
    started = {
        (s.topic, s.partition)
        for request in cluster.brokers[active.id].channel.requests_to(1, LeaderAndIsrRequest)
        for s in request.partition_states
    }
    assert started == {TPS[0], TPS[2]}
    bumped = {tp: s.leader_and_isr.leader_epoch for tp in TPS if (s := cluster.state(tp)) is not None}
    assert bumped == {TPS[0]: 1, BAD: 0, TPS[2]: 1}
