"""OnlineReplica's LeaderAndIsr entries queued per broker in bulk make the requests
Kafka's one-replica-at-a-time ``addLeaderAndIsrRequestForBrokers(Seq(replicaId), ...)`` calls make:
the same brokers in the same order, each with the same partitions in the same order and equal
states, and the same UpdateMetadata, on random layouts; so do the other bulk forms (a whole
OnlineReplica call's replicas, entries of distinct partitions)."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import pytest

from kafka_controller.core.batch_api import told_by_replica_id
from kafka_controller.core.context import ControllerContext
from kafka_controller.core.replica_runs import replica_runs
from kafka_controller.core.replica_state_machine import ReplicaStateMachine
from kafka_controller.core.request_batch import ControllerBrokerRequestBatch
from kafka_controller.domain.audit_records import AuditRecord
from kafka_controller.domain.states import ReplicaState
from kafka_controller.domain.values import (
    Broker,
    EndPoint,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    PartitionAndReplica,
    ReplicaAssignment,
    TopicPartition,
)
from kafka_controller.dryrun.recording import RecordingAuditSink
from kafka_controller.dryrun.recording_channel import RecordingBrokerChannel
from kafka_controller.testing.doubles import ScriptedPartitionStateStore

CONTROLLER_EPOCH = 7
BROKERS = (1, 2, 3, 4, 5)
STATES = (
    ReplicaState.ONLINE_REPLICA,
    ReplicaState.OFFLINE_REPLICA,
    ReplicaState.REPLICA_DELETION_INELIGIBLE,
    ReplicaState.REPLICA_DELETION_STARTED,
    ReplicaState.NEW_REPLICA,
)


def _random_context(rng: random.Random) -> ControllerContext:
    """Brokers 1-4 live (5 dead), topics of 1-8 partitions at RF 1-3, some reassigning, some
    leaderless, one queued for deletion, sometimes replicas on an offline log dir."""
    ctx = ControllerContext()
    ctx.epoch = CONTROLLER_EPOCH
    ctx.set_live_brokers({Broker(b, (EndPoint("localhost", 9900 + b),)): 1 for b in BROKERS[:-1]})
    topics = [f"t{i}" for i in range(rng.randint(2, 5))]
    ctx.set_all_topics(topics)
    for topic in topics:
        for p in rng.sample(range(10), rng.randint(1, 8)):
            replicas = tuple(rng.sample(BROKERS, rng.randint(1, 3)))
            adding = replicas[-1:] if rng.random() < 0.2 else ()
            tp = TopicPartition(topic, p)
            ctx.update_partition_full_replica_assignment(tp, ReplicaAssignment(replicas, adding))
            if rng.random() < 0.85:
                isr = replicas[: rng.randint(1, len(replicas))]
                leadership = LeaderAndIsr(isr[0], rng.randint(0, 9), isr, rng.randint(0, 9))
                ctx.put_partition_leadership_info(tp, LeaderIsrAndControllerEpoch(leadership, 3))
    ctx.topics_to_be_deleted.add(topics[0])
    if rng.random() < 0.5:
        ctx.replicas_on_offline_dirs[3] = set(rng.sample(ctx.all_partitions, 2))
    return ctx


class _CountingBatch(ControllerBrokerRequestBatch):
    bulk_calls = 0

    def add_leader_and_isr_requests_by_broker(self, *args: Any) -> None:
        self.bulk_calls += 1
        super().add_leader_and_isr_requests_by_broker(*args)


def _batch(ctx: ControllerContext) -> tuple[_CountingBatch, RecordingBrokerChannel]:
    channel = RecordingBrokerChannel()
    return _CountingBatch(0, ctx, channel, lambda _: None), channel


def _queued(batch: ControllerBrokerRequestBatch) -> tuple[Any, ...]:
    lai = [(b, list(states.items())) for b, states in batch.leader_and_isr_request_map.items()]
    um = list(batch.update_metadata_request_partition_info_map.items())
    return lai, um, sorted(batch.update_metadata_request_broker_set)


def _sent(channel: RecordingBrokerChannel) -> list[Any]:
    return [(s.broker_id, s.request) for s in channel.sent]


@pytest.mark.parametrize("seed", range(40))
def test_queued_by_broker_as_one_entry_at_a_time(seed: int) -> None:
    rng = random.Random(seed)
    ctx = _random_context(rng)
    led = list(ctx.partitions_leadership_info)
    groups = [(rng.choice((-1, *BROKERS)), rng.sample(led, rng.randint(0, len(led)))) for _ in range(6)]
    groups.append((groups[0][0], led[:2]))  # a broker seen again: its map is added to
    is_new = rng.random() < 0.5
    bulk, bulk_channel = _batch(ctx)
    one, one_channel = _batch(ctx)
    leadership, full = ctx.partitions_leadership_info, ctx.partition_full_replica_assignment
    queued_before = [(tp, rng.random() < 0.5) for tp in led[:3]]  # some of it new: sticky
    for batch in (bulk, one):
        for tp, new in queued_before:
            batch.add_leader_and_isr_request_for_brokers([2], tp, leadership[tp], full(tp), new)

    bulk.add_leader_and_isr_requests_by_broker(groups, leadership, full, is_new)
    for broker_id, tps in groups:
        for tp in tps:
            one.add_leader_and_isr_request_for_brokers([broker_id], tp, leadership[tp], full(tp), is_new)

    assert _queued(bulk) == _queued(one)
    bulk.send_requests_to_brokers(CONTROLLER_EPOCH)
    one.send_requests_to_brokers(CONTROLLER_EPOCH)
    assert _sent(bulk_channel) == _sent(one_channel)


@pytest.mark.parametrize("seed", range(40))
def test_queued_by_replica_as_grouped_by_broker(seed: int) -> None:
    """The partition-by-partition build of a whole OnlineReplica call queues what grouping the
    replicas and queueing the groups does: replicas in the assignments' order (a failover's),
    shuffled, or with a partition's replicas apart, some partitions skipped, a replica twice, a
    negative replica id; and, through the grouped path, with a log dir offline, a topic queued for
    deletion or a broker with partitions queued already."""
    rng = random.Random(seed)
    ctx = _random_context(rng)
    if seed % 4:
        ctx.replicas_on_offline_dirs.clear()
    if seed % 3:
        ctx.topics_to_be_deleted.clear()
    replicas = [PartitionAndReplica(tp, r) for tp, a in ctx.iter_assignments() for r in a.replicas]
    if seed % 5 == 1:
        rng.shuffle(replicas)
    elif seed % 5 == 2:
        replicas = replicas[1::2] + replicas[::2]
    replicas += replicas[:2]  # a replica twice
    if seed % 7 == 3:
        replicas.insert(1, PartitionAndReplica(replicas[0].topic_partition, -1))
    led = list(ctx.partitions_leadership_info)
    skip = frozenset(rng.sample(led, rng.randint(0, len(led)))) if seed % 2 else frozenset()
    is_new = rng.random() < 0.5
    leadership, full = ctx.partitions_leadership_info, ctx.partition_full_replica_assignment
    bulk, bulk_channel = _batch(ctx)
    grouped, grouped_channel = _batch(ctx)
    if seed % 6 == 5:
        for batch in (bulk, grouped):
            batch.add_leader_and_isr_request_for_brokers([2], led[0], leadership[led[0]], full(led[0]), True)

    bulk.add_leader_and_isr_requests_by_replica(replica_runs(replicas), leadership, full, skip, is_new)
    groups = told_by_replica_id(replicas, leadership, skip)
    grouped.add_leader_and_isr_requests_by_broker(groups, leadership, full, is_new)

    assert _queued(bulk) == _queued(grouped)
    assert _queued(bulk)[1] or not any(tps for _, tps in groups)
    bulk.send_requests_to_brokers(CONTROLLER_EPOCH)
    grouped.send_requests_to_brokers(CONTROLLER_EPOCH)
    assert _sent(bulk_channel) == _sent(grouped_channel)


@pytest.mark.parametrize("seed", range(40))
def test_distinct_partitions_queued_in_bulk_as_one_entry_at_a_time(seed: int) -> None:
    """``add_leader_and_isr_requests`` of entries of distinct partitions (the ISR removal's, the
    election's: LeaderAndIsr and UpdateMetadata states built in one pass) queues what one entry at
    a time does, in the same order: entries whose leadership is the context's or another, some
    partitions without a leadership, UpdateMetadata queued before, a topic queued for deletion, a
    log dir offline; and, with a partition repeated late, what the entry loop it falls back to does."""
    rng = random.Random(seed)
    ctx = _random_context(rng)
    if seed % 3:
        ctx.topics_to_be_deleted.clear()
    leadership, full = ctx.partitions_leadership_info, ctx.partition_full_replica_assignment
    tps = [tp for tp, _ in ctx.iter_assignments()]
    rng.shuffle(tps)
    other = LeaderIsrAndControllerEpoch(LeaderAndIsr(2, 9, (2, 3), 4), 5)
    entries = [
        (
            tuple(rng.sample((-1, *BROKERS), rng.randint(0, 3))),
            tp,
            leadership[tp] if tp in leadership and rng.random() < 0.8 else other,
            full(tp),
        )
        for tp in tps
    ]
    if seed % 4 == 3:
        entries.append(entries[len(entries) // 2])
    is_new = rng.random() < 0.5
    bulk, bulk_channel = _batch(ctx)
    one, one_channel = _batch(ctx)
    for batch in (bulk, one):
        for tp in tps[:2]:
            if tp in leadership:
                batch.add_update_metadata_request_for_brokers([1], [tp])

    bulk.add_leader_and_isr_requests(entries, is_new)
    for broker_ids, tp, info, assignment in entries:
        one.add_leader_and_isr_request_for_brokers(broker_ids, tp, info, assignment, is_new)

    assert _queued(bulk) == _queued(one)
    assert _queued(bulk)[0] or not any(b >= 0 for e in entries for b in e[0])
    bulk.send_requests_to_brokers(CONTROLLER_EPOCH)
    one.send_requests_to_brokers(CONTROLLER_EPOCH)
    assert _sent(bulk_channel) == _sent(one_channel)


def test_told_by_replica_id_groups_as_kafkas_group_by() -> None:
    a, b, c = TopicPartition("a", 0), TopicPartition("b", 0), TopicPartition("c", 0)
    info = LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 0, (1,), 0), 1)
    replicas = [PartitionAndReplica(tp, r) for tp, r in ((a, 2), (b, 1), (c, 2), (a, 1), (c, 3))]

    groups = told_by_replica_id(replicas, {a: info, b: info}, frozenset({b}))

    assert groups == [(2, [a]), (1, [a]), (3, [])]


def _kafka_online_requests(ctx: ControllerContext, replicas: list[PartitionAndReplica]) -> list[Any]:
    """Kafka's ``doHandleStateChanges(OnlineReplica)`` requests: replicas grouped by id, each valid
    non-New replica of a led partition queued on its own; nothing moved in ``ctx``."""
    batch, channel = _batch(ctx)
    batch.new_batch()
    groups: dict[int, list[PartitionAndReplica]] = {}
    for r in replicas:
        groups.setdefault(r.replica, []).append(r)
    allowed = ReplicaState.ONLINE_REPLICA.valid_previous_states
    for replica_id, group in groups.items():
        for r in group:
            state = ctx.replica_states.get(r)
            info = ctx.partition_leadership_info(r.topic_partition)
            if state in allowed and state is not ReplicaState.NEW_REPLICA and info is not None:
                full = ctx.partition_full_replica_assignment(r.topic_partition)
                batch.add_leader_and_isr_request_for_brokers(
                    [replica_id], r.topic_partition, info, full, False
                )
    batch.send_requests_to_brokers(CONTROLLER_EPOCH)
    return _sent(channel)


class _RowSink:
    """Not a ``BulkAuditSink``: the state machine then records each replica on its own."""

    def __init__(self) -> None:
        self.records: list[AuditRecord] = []

    def record(self, records: Sequence[AuditRecord]) -> None:
        self.records.extend(records)


def _online_replica_run(ctx: ControllerContext, replicas: list[PartitionAndReplica], audit: Any) -> Any:
    batch, channel = _batch(ctx)
    machine = ReplicaStateMachine(0, ctx, ScriptedPartitionStateStore(), batch, audit=audit)
    machine.handle_state_changes(replicas, ReplicaState.ONLINE_REPLICA)
    return _sent(channel), batch.bulk_calls, dict(ctx.replica_states)


@pytest.mark.parametrize("seed", range(30))
def test_online_replica_requests_states_and_records_as_kafkas(seed: int) -> None:
    rng = random.Random(seed)
    ctx = _random_context(rng)
    replicas = [PartitionAndReplica(tp, r) for tp, a in ctx.iter_assignments() for r in a.replicas]
    for r in replicas:
        # mostly states OnlineReplica accepts (the bulk path), sometimes one it does not or none
        if rng.random() < 0.9:
            ctx.replica_states[r] = STATES[0] if seed % 3 == 0 else rng.choice(STATES[:3])
        elif seed % 2:
            ctx.replica_states[r] = rng.choice(STATES)
    rng.shuffle(replicas)
    replicas += replicas[:2]  # a replica twice
    expected = _kafka_online_requests(ctx, replicas)
    before = dict(ctx.replica_states)
    sinks = (RecordingAuditSink(), _RowSink())
    runs = []
    for audit in (None, *sinks):
        ctx.replica_states.clear()
        ctx.replica_states.update(before)
        runs.append(_online_replica_run(ctx, replicas, audit))

    for sent, bulk_calls, states in runs:
        assert sent == expected
        assert bulk_calls == 1  # every entry queued in one call
        assert states == runs[0][2]
    assert sinks[0].records == sinks[1].records  # bulk records as the per-replica ones
