"""``add_stop_replica_requests`` (a broker with nothing queued yet takes each partition's
state without a look-up) queues what Kafka's ``addStopReplicaRequestForBrokers`` queues one
partition at a time, on random call sequences: the same brokers, partitions in the same order, equal
states, ``delete_partition`` sticky."""

from __future__ import annotations

import random

import pytest

from kafka_controller.core.context import ControllerContext
from kafka_controller.core.request_batch import ControllerBrokerRequestBatch
from kafka_controller.domain.requests import StopReplicaPartitionState
from kafka_controller.domain.values import LeaderAndIsr, LeaderIsrAndControllerEpoch, TopicPartition
from kafka_controller.dryrun.recording_channel import RecordingBrokerChannel

_Queued = dict[int, dict[TopicPartition, StopReplicaPartitionState]]


def _kafka_add(
    ctx: ControllerContext, queued: _Queued, broker_ids: list[int], tp: TopicPartition, delete: bool
) -> None:
    """Kafka 2.8's ``addStopReplicaRequestForBrokers`` for one partition."""
    if tp.topic in ctx.topics_to_be_deleted:
        epoch = -2
    else:
        info = ctx.partitions_leadership_info.get(tp)
        epoch = -1 if info is None else info.leader_and_isr.leader_epoch
    for b in broker_ids:
        if b < 0:
            continue
        per_broker = queued.setdefault(b, {})
        previous = per_broker.get(tp)
        sticky = previous is not None and previous.delete_partition
        per_broker[tp] = StopReplicaPartitionState(tp.partition, epoch, delete or sticky)


@pytest.mark.parametrize("seed", range(60))
def test_queues_as_kafka_one_partition_at_a_time(seed: int) -> None:
    rng = random.Random(seed)
    ctx = ControllerContext()
    tps = [TopicPartition(f"t{t}", p) for t in range(3) for p in range(rng.randint(1, 10))]
    for tp in tps:
        if rng.random() < 0.8:
            lai = LeaderAndIsr(1, rng.randint(0, 20), (1, 2), 0)
            ctx.put_partition_leadership_info(tp, LeaderIsrAndControllerEpoch(lai, 1))
    if rng.random() < 0.3:
        ctx.topics_to_be_deleted.add("t1")
    batch = ControllerBrokerRequestBatch(0, ctx, RecordingBrokerChannel(), lambda _: None)
    expected: _Queued = {}
    for _ in range(rng.randint(1, 5)):
        broker_ids = [rng.choice((-1, 1, 2, 3, 4)) for _ in range(rng.randint(0, 3))]
        partitions = [rng.choice(tps) for _ in range(rng.randint(0, 15))]
        delete = rng.random() < 0.4
        batch.add_stop_replica_requests(broker_ids, partitions, delete)
        for tp in partitions:
            _kafka_add(ctx, expected, broker_ids, tp, delete)

    queued = {b: list(states.items()) for b, states in batch.stop_replica_request_map.items() if states}
    assert queued == {b: list(states.items()) for b, states in expected.items()}


def test_equal_states_are_one_shared_tuple() -> None:
    """A failover's dead broker gets 60,000 StopReplica states at RF 3 that take a few hundred
    distinct values: equal ones are one object (the failover's memory peak holds them)."""
    ctx = ControllerContext()
    tps = [TopicPartition(f"t{t}", p) for t in range(40) for p in range(5)]
    for tp in tps:
        ctx.put_partition_leadership_info(tp, LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 3, (1, 2), 0), 1))
    batch = ControllerBrokerRequestBatch(0, ctx, RecordingBrokerChannel(), lambda _: None)

    batch.add_stop_replica_requests([4], tps, False)

    states = batch.stop_replica_request_map[4]
    assert [states[tp] for tp in tps] == [StopReplicaPartitionState(tp.partition, 3, False) for tp in tps]
    assert len({id(s) for s in states.values()}) == 5
