"""``replica_runs``: the one walk of an OnlineReplica move's replicas gives Kafka's grouping
(``groupBy`` replica id, groups in order of first appearance, each in the replicas' order)."""

from __future__ import annotations

import random

import pytest

from kafka_controller.core.replica_runs import replica_runs
from kafka_controller.domain.values import PartitionAndReplica, TopicPartition


def _grouped(replicas: list[PartitionAndReplica]) -> dict[int, list[TopicPartition]]:
    groups: dict[int, list[TopicPartition]] = {}
    for tp, replica_id in replicas:
        groups.setdefault(replica_id, []).append(tp)
    return groups


@pytest.mark.parametrize("seed", range(40))
def test_runs_and_groups_are_kafkas_grouping(seed: int) -> None:
    rng = random.Random(seed)
    tps = [TopicPartition(f"t{t}", p) for t in range(rng.randint(0, 4)) for p in range(rng.randint(1, 6))]
    replicas = [PartitionAndReplica(tp, r) for tp in tps for r in rng.sample(range(-1, 5), rng.randint(1, 3))]
    if seed % 3 == 1:
        rng.shuffle(replicas)
    elif seed % 3 == 2 and replicas:  # an equal partition that is not the same object, a replica twice
        tp, r = replicas[0]
        replicas.insert(rng.randrange(len(replicas) + 1), PartitionAndReplica(TopicPartition(*tp), r))
        replicas.append(replicas[-1])

    runs = replica_runs(replicas)

    assert runs.replicas is replicas
    grouped = {replica_id: [runs.partitions[i] for i in group] for replica_id, group in runs.groups}
    assert grouped == _grouped(replicas) and list(grouped) == list(_grouped(replicas))
    # each run is one stretch of replicas of one partition object, and the runs cover them in order
    walked = [tp for tp, _ in replicas]
    assert [tp for i, tp in enumerate(walked) if i == 0 or tp is not walked[i - 1]] == runs.partitions
    assert all(runs.partitions[i] is not runs.partitions[i + 1] for i in range(len(runs.partitions) - 1))
    # every run listed once, under the first group that holds one of its replicas
    listed = sorted(i for bucket in runs.runs_by_first_group for i in bucket)
    assert listed == list(range(len(runs.partitions)))
    for rank, bucket in enumerate(runs.runs_by_first_group):
        assert bucket == sorted(bucket)
        for i in bucket:
            holders = [k for k, (_, group) in enumerate(runs.groups) if i in group]
            assert min(holders) == rank
