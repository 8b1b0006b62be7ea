"""The replica state machine's startup in a failover: the online replicas ``initialize_replica_state``
has just put in OnlineReplica are moved to OnlineReplica without looking their states up or writing
them again, with the same requests, states (in the same order) and audit records as the plain
``handle_state_changes`` call, on random layouts."""

from __future__ import annotations

import random
import weakref
from typing import Any

import pytest

from kafka_controller.core.context import ControllerContext
from kafka_controller.core.replica_records import ReplicaTransitionRecorder
from kafka_controller.core.replica_runs import replica_runs
from kafka_controller.core.replica_state_machine import ReplicaStateMachine, _by_replica_id
from kafka_controller.core.request_batch import ControllerBrokerRequestBatch
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

_ONLINE = ReplicaState.ONLINE_REPLICA
BROKERS = (1, 2, 3, 4)


class _CountingStates(dict[PartitionAndReplica, ReplicaState]):
    gets = 0
    updates = 0

    def get(self, *args: Any) -> Any:
        self.gets += 1
        return super().get(*args)

    def update(self, *args: Any, **kwargs: Any) -> None:
        self.updates += 1
        super().update(*args, **kwargs)


def _context(rng: random.Random, live: tuple[int, ...]) -> ControllerContext:
    """Topics of 1-12 partitions at RF 1-3, most led, a few replicas on an offline log dir."""
    ctx = ControllerContext()
    ctx.epoch = 5
    ctx.set_live_brokers({Broker(b, (EndPoint("localhost", 9900 + b),)): 1 for b in live})
    topics = [f"t{i}" for i in range(rng.randint(1, 4))]
    ctx.set_all_topics(topics)
    for topic in topics:
        for p in range(rng.randint(1, 12)):
            replicas = tuple(rng.sample(BROKERS, rng.randint(1, 3)))
            tp = TopicPartition(topic, p)
            ctx.update_partition_full_replica_assignment(tp, ReplicaAssignment(replicas))
            if rng.random() < 0.9:
                lai = LeaderAndIsr(replicas[0], rng.randint(0, 9), replicas, rng.randint(0, 9))
                ctx.put_partition_leadership_info(tp, LeaderIsrAndControllerEpoch(lai, 3))
    if rng.random() < 0.3:
        ctx.replicas_on_offline_dirs[live[0]] = set(rng.sample(ctx.all_partitions, 1))
    return ctx


def _machine(ctx: ControllerContext, audit: Any) -> tuple[ReplicaStateMachine, RecordingBrokerChannel]:
    channel = RecordingBrokerChannel()
    batch = ControllerBrokerRequestBatch(0, ctx, channel, lambda _: None)
    return ReplicaStateMachine(0, ctx, ScriptedPartitionStateStore(), batch, audit=audit), channel


@pytest.mark.parametrize("seed", range(30))
@pytest.mark.parametrize("auditing", [True, False])
def test_startup_moves_the_online_replicas_as_the_plain_call(seed: int, auditing: bool) -> None:
    live = BROKERS if seed % 2 else BROKERS[:-1]
    runs = []
    for startup in (True, False):
        ctx = _context(random.Random(seed), live)
        audit = RecordingAuditSink()
        machine, channel = _machine(ctx, audit if auditing else None)
        if startup:
            machine.startup()
        else:
            online, offline = machine.initialize_replica_state()
            machine.handle_state_changes(list(online), _ONLINE)  # a copy: the plain path
            machine.handle_state_changes(offline, ReplicaState.OFFLINE_REPLICA)
        sent = [(s.broker_id, s.request) for s in channel.sent]
        runs.append((sent, list(ctx.replica_states.items()), audit.records))
    assert runs[0] == runs[1]


@pytest.mark.parametrize("seed", range(10))
def test_startup_neither_looks_up_nor_rewrites_the_online_states(seed: int) -> None:
    ctx = _context(random.Random(seed), BROKERS)
    ctx.replicas_on_offline_dirs.clear()
    ctx.replica_states = states = _CountingStates()
    machine, _ = _machine(ctx, RecordingAuditSink())

    machine.startup()

    assert set(states.values()) == {_ONLINE}
    assert states.gets == 0
    assert states.updates == 1  # initialize_replica_state's


def test_replicas_not_online_yet_are_still_looked_up_and_moved() -> None:
    ctx = _context(random.Random(7), BROKERS)
    machine, _ = _machine(ctx, None)
    online, _ = machine.initialize_replica_state()
    moved = online[::2]
    for r in moved:
        ctx.replica_states[r] = ReplicaState.OFFLINE_REPLICA
    order = list(ctx.replica_states)

    machine.handle_state_changes(moved, _ONLINE)

    assert list(ctx.replica_states) == order
    assert set(ctx.replica_states.values()) == {_ONLINE}


class _WeakList(list[PartitionAndReplica]):
    """A list a weak reference can follow (a plain list cannot)."""


def test_startup_drops_the_online_replicas_before_the_offline_changes() -> None:
    """The online list (240,000 keys at RF 3) is not held through the offline changes, which
    build the ISR removal's requests: the failover's memory peak."""
    alive_at_offline: list[bool] = []

    class Machine(ReplicaStateMachine):
        online_ref: weakref.ref[_WeakList] | None = None

        def initialize_replica_state(self) -> tuple[list[PartitionAndReplica], list[PartitionAndReplica]]:
            online, offline = super().initialize_replica_state()
            kept = _WeakList(online)
            self.online_ref = weakref.ref(kept)
            return kept, offline

        def handle_state_changes(self, replicas: Any, target: ReplicaState) -> None:
            if target is ReplicaState.OFFLINE_REPLICA and self.online_ref is not None:
                alive_at_offline.append(self.online_ref() is not None)
            super().handle_state_changes(replicas, target)

    ctx = _context(random.Random(3), BROKERS)
    ctx.replicas_on_offline_dirs.clear()
    channel = RecordingBrokerChannel()
    batch = ControllerBrokerRequestBatch(0, ctx, channel, lambda _: None)
    machine = Machine(0, ctx, ScriptedPartitionStateStore(), batch, audit=RecordingAuditSink())

    machine.startup()

    assert alive_at_offline == [False]
    assert set(ctx.replica_states.values()) == {_ONLINE}


@pytest.mark.parametrize("seed", range(40))
def test_unchanged_records_by_partition_are_the_replica_id_groups_records(seed: int) -> None:
    """``record_unchanged_replicas`` against Kafka's ``groupBy`` and ``record_unchanged`` per group:
    the same rows in the same order, with the replicas in the assignments' order or shuffled (a
    partition met in several runs), partitions without a leader, an equal partition that is not
    the context's object, and a trailing bulk record of the same target already there."""
    rng = random.Random(seed)
    ctx = _context(rng, BROKERS)
    replicas = [PartitionAndReplica(tp, r) for tp, a in ctx.iter_assignments() for r in a.replicas]
    if seed % 3 == 1:
        rng.shuffle(replicas)
    elif seed % 3 == 2:  # a copy of an equal partition, and a run broken in two
        tp, r = replicas[0]
        replicas.insert(rng.randrange(len(replicas) + 1), PartitionAndReplica(TopicPartition(*tp), r))
        replicas.append(replicas[0])
    state = rng.choice([_ONLINE, ReplicaState.OFFLINE_REPLICA])
    results = []
    for by_partition in (True, False):
        sink = RecordingAuditSink()
        recorder = ReplicaTransitionRecorder(0, ctx, sink)
        recorder.begin()
        if seed % 2:  # rows of an earlier step of the same call, to be continued
            recorder.record_unchanged(4, [TopicPartition("earlier", 0)], [state], state)
        if by_partition:
            recorder.record_unchanged_replicas(replica_runs(replicas), state)
        else:
            for replica_id, group in _by_replica_id(replicas).items():
                tps = [r.topic_partition for r in group]
                recorder.record_unchanged(replica_id, tps, [state] * len(tps), state)
        recorder.finish(state)
        results.append(sink.records)
    by_partition_rows, grouped_rows = results  # the sink's records, one row each, in order
    assert by_partition_rows == grouped_rows
    assert len(by_partition_rows) == len(replicas) + seed % 2
    assert {(r.topic, r.partition, r.replica) for r in by_partition_rows} >= {(*tp, r) for tp, r in replicas}
    led = [r for r in by_partition_rows if r.leader_before is not None]
    assert led and all(r.leader_after == r.leader_before and r.isr_after == r.isr_before for r in led)
