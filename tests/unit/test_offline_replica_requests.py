"""The OfflineReplica step's requests built partition by partition (``add_isr_removal_requests``)
make what its entries queued one at a time make (Kafka's ``addLeaderAndIsrRequestForBrokers`` per
partition after ``removeReplicasFromIsr``): the same writes, requests (and their order), replica
states, leadership cache and audit records, on random layouts."""

from __future__ import annotations

import random
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any

import pytest

from kafka_controller.core.batch_api import LeaderAndIsrEntry, isr_removal_entries
from kafka_controller.core.context import ControllerContext
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
from kafka_controller.dryrun.memory_store import InMemoryMetadataStore
from kafka_controller.dryrun.recording import RecordingAuditSink
from kafka_controller.dryrun.recording_channel import RecordingBrokerChannel

BROKERS = (1, 2, 3, 4, 5)
LIVE = (1, 2, 3)
#: States OfflineReplica accepts, and one it does not.
STATES = (
    ReplicaState.ONLINE_REPLICA,
    ReplicaState.OFFLINE_REPLICA,
    ReplicaState.NEW_REPLICA,
    ReplicaState.REPLICA_DELETION_INELIGIBLE,
    ReplicaState.REPLICA_DELETION_STARTED,
)


def _cluster(seed: int) -> tuple[ControllerContext, InMemoryMetadataStore, list[PartitionAndReplica]]:
    """Brokers 1-3 live (4, 5 dead); topics of 1-8 partitions, each at RF 1-3, some reassigning, some
    leaderless, some with no state znode, a topic queued for deletion now and then, sometimes
    replicas on an offline log dir; and the replicas to take offline: those of the dead brokers,
    some of the live ones', shuffled or not, with a replica twice now and then. The same seed
    builds the same cluster."""
    rng = random.Random(seed)
    store = InMemoryMetadataStore()
    ctx = ControllerContext()
    ctx.epoch, ctx.epoch_zk_version = store.register_controller_and_increment_controller_epoch(0)
    ctx.set_live_brokers({Broker(b, (EndPoint("localhost", 9900 + b),)): 1 for b in LIVE})
    topics = [f"t{i}" for i in range(rng.randint(2, 5))]
    ctx.set_all_topics(topics)
    written: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
    for topic in topics:
        per_topic: dict[int, ReplicaAssignment] = {}
        rf = rng.randint(1, 3)
        for p in range(rng.randint(1, 8)):
            replicas = tuple(rng.sample(BROKERS, rf))
            adding = replicas[-1:] if rng.random() < 0.2 else ()
            tp = TopicPartition(topic, p)
            per_topic[p] = ReplicaAssignment(replicas, adding)
            ctx.update_partition_full_replica_assignment(tp, per_topic[p])
            if rng.random() < 0.85:
                isr = replicas[: rng.randint(1, len(replicas))]
                info = LeaderIsrAndControllerEpoch(LeaderAndIsr(isr[0], rng.randint(0, 9), isr, 0), 0)
                ctx.put_partition_leadership_info(tp, info)
                if rng.random() < 0.9:  # else its state znode is missing
                    written[tp] = info
        store.create_topic(topic, per_topic)
    assert all(e is None for e in store.create_partition_states(written, ctx.epoch_zk_version).values())
    if seed % 3 == 0:
        ctx.topics_to_be_deleted.add(topics[0])
    if seed % 4 == 1:
        ctx.replicas_on_offline_dirs[2] = set(rng.sample(ctx.all_partitions, 2))
    all_replicas = [PartitionAndReplica(tp, r) for tp, a in ctx.iter_assignments() for r in a.replicas]
    for r in all_replicas:
        ctx.replica_states[r] = STATES[0] if seed % 2 else rng.choice(STATES)
    offline = [r for r in all_replicas if r.replica not in LIVE or rng.random() < 0.1]
    if seed % 5 == 2:
        rng.shuffle(offline)
    if seed % 7 == 3:
        offline += offline[:2]  # a replica twice
    return ctx, store, offline


class _EntryBatch(ControllerBrokerRequestBatch):
    """The straightforward form: the ISR removal's requests as their entries, queued one at a time."""

    def add_isr_removal_requests(
        self,
        replica_id: int,
        removed: Sequence[tuple[TopicPartition, LeaderIsrAndControllerEpoch]],
        full_assignment: Callable[[TopicPartition], ReplicaAssignment],
        topics_to_be_deleted: Collection[str],
    ) -> None:
        self.add_leader_and_isr_requests(
            isr_removal_entries(replica_id, removed, full_assignment, topics_to_be_deleted), False
        )

    def add_leader_and_isr_requests(self, entries: Iterable[LeaderAndIsrEntry], is_new: bool) -> None:
        for broker_ids, tp, info, assignment in entries:
            self.add_leader_and_isr_request_for_brokers(broker_ids, tp, info, assignment, is_new)


class _RowSink:
    """Not a ``BulkAuditSink``: the state machine then records each replica on its own."""

    def __init__(self) -> None:
        self.records: list[AuditRecord] = []

    def record(self, records: Sequence[AuditRecord]) -> None:
        self.records.extend(records)


def _offline_run(seed: int, batch_class: type[ControllerBrokerRequestBatch], audit: Any, cached: bool) -> Any:
    ctx, store, offline = _cluster(seed)
    channel = RecordingBrokerChannel()
    batch = batch_class(0, ctx, channel, lambda _: None)
    machine = ReplicaStateMachine(0, ctx, store, batch, audit=audit, write_on_cached_zk_version=cached)
    machine.handle_state_changes(offline, ReplicaState.OFFLINE_REPLICA)
    written = store.get_partition_states(list(ctx.all_partitions))
    return (
        [(s.broker_id, s.request) for s in channel.sent],
        dict(ctx.replica_states),
        dict(ctx.partitions_leadership_info),
        written,
    )


@pytest.mark.parametrize("cached", [False, True])
@pytest.mark.parametrize("seed", range(30))
def test_offline_replica_requests_states_and_records_as_one_entry_at_a_time(seed: int, cached: bool) -> None:
    sinks = (RecordingAuditSink(), _RowSink(), RecordingAuditSink(), _RowSink())
    expected = _offline_run(seed, _EntryBatch, None, cached)
    runs = [_offline_run(seed, ControllerBrokerRequestBatch, None, cached)]
    runs += [_offline_run(seed, ControllerBrokerRequestBatch, sink, cached) for sink in sinks[:2]]
    reference_runs = [_offline_run(seed, _EntryBatch, sink, cached) for sink in sinks[2:]]

    for run in runs + reference_runs:
        assert run == expected
    assert sinks[0].records == sinks[2].records
    assert sinks[1].records == sinks[3].records
    assert sinks[0].records == sinks[1].records  # bulk records as the per-replica ones


def test_the_layouts_take_leaders_out_of_isrs_and_fail_some() -> None:
    """The layouts above exercise what the comparison is about: most queue the ISR removal's
    LeaderAndIsr requests, and some fail a replica (no state znode)."""
    with_requests = with_failures = 0
    for seed in range(30):
        ctx, _, _ = _cluster(seed)
        before = dict(ctx.replica_states)
        sent, states, _, _ = _offline_run(seed, ControllerBrokerRequestBatch, None, True)
        with_requests += any(type(request).__name__ == "LeaderAndIsrRequest" for _, request in sent)
        kept = [r for r, s in states.items() if s is before[r] and s is not ReplicaState.OFFLINE_REPLICA]
        with_failures += bool(kept)
    assert with_requests >= 20
    assert with_failures >= 3
