"""A failover drill on the real state machines, in one process, with every source the job compares.

* The controller is ``CoreHarness`` (real ``ControllerContext``, partition and replica state
  machines, request batches) on an ``InMemoryMetadataStore``; after the drill a second controller
  takes over as Kafka's does (docs/controller-behaviour.md §8.3): it registers with the next
  epoch, loads its context from ZooKeeper and starts both state machines.
* Each broker registers ``/brokers/ids/<id>`` in its own session on the same tree and runs a real
  ``ReplicaManager``, fed in order with every request its controller sent it; ``replicate`` runs
  fetch rounds (followers fetch from their leaders), so log-end offsets and high watermarks move.
* Both controllers' transitions go through ``ControllerAuditSink`` (stamping controller, epoch and
  sequence) into a real ``AuditWriter`` on a SQLite audit store.

The multi-process version (real broker processes, embedded ZooKeeper, SIGKILL) is
``test_live_drill.py``: the same exporter with ``admin_broker_source`` and
``admin_controller_source`` (the runtime's ``DescribeControllerContext``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafka_controller.audit.writer import AuditWriter
from kafka_controller.broker.replica_manager import ReplicaManager
from kafka_controller.controller.auditing import ControllerAuditSink
from kafka_controller.core.context import ControllerContext
from kafka_controller.core.partition_state_machine import PartitionStateMachine
from kafka_controller.core.replica_state_machine import ReplicaStateMachine
from kafka_controller.core.request_batch import ControllerBrokerRequestBatch
from kafka_controller.domain.requests import LeaderAndIsrRequest, StopReplicaRequest
from kafka_controller.domain.values import Broker, EndPoint, LeaderIsrAndControllerEpoch, TopicPartition
from kafka_controller.dryrun.memory_store import InMemoryMetadataStore
from kafka_controller.dryrun.memory_zk import InMemoryZooKeeper
from kafka_controller.dryrun.recording_channel import RecordingBrokerChannel
from kafka_controller.reconcile.sources import context_controller_source, replica_manager_source
from kafka_controller.testing.clock import ManualClock
from kafka_controller.testing.core_harness import CoreHarness

BROKERS = (1, 2, 3, 4)
TOPICS = {
    "orders": [[1, 2, 3], [2, 3, 4], [3, 4, 1], [4, 1, 2], [1, 3, 4], [2, 4, 1]],
    "events": [[2, 1, 3], [3, 2, 4], [4, 3, 1], [1, 4, 2]],
    "audit": [[3, 1], [1, 3]],
}
PRODUCE_RATE_PER_S = 1_000.0


@dataclass
class SimulatedBrokers:
    tree: InMemoryZooKeeper
    clock: ManualClock
    stores: dict[int, InMemoryMetadataStore] = field(default_factory=dict)
    managers: dict[int, ReplicaManager] = field(default_factory=dict)
    epochs: dict[int, int] = field(default_factory=dict)
    delivered: dict[int, int] = field(default_factory=dict)  # id(channel) -> requests delivered

    def start(self, broker_id: int) -> None:
        """A (re)start: a new session registers the broker; its replica manager starts empty."""
        store = InMemoryMetadataStore(self.tree)
        self.epochs[broker_id] = store.register_broker(
            Broker(broker_id, (EndPoint("localhost", 9000 + broker_id),))
        )
        self.stores[broker_id] = store
        self.managers[broker_id] = ReplicaManager(
            broker_id, self.clock.time_ms, produce_rate_per_s=PRODUCE_RATE_PER_S
        )

    def kill(self, broker_id: int) -> None:
        """A hard failure: the session expires (its registration goes) and the process is gone."""
        self.stores.pop(broker_id).expire_session()
        del self.managers[broker_id]

    def deliver(self, channel: RecordingBrokerChannel) -> None:
        """Hand every request sent since the last call to its broker, in order; dead brokers miss them."""
        sent = channel.sent
        start = self.delivered.get(id(channel), 0)
        for s in sent[start:]:
            rm = self.managers.get(s.broker_id)
            if rm is None:
                continue
            if isinstance(s.request, LeaderAndIsrRequest):
                rm.become_leader_or_follower(s.request)
            elif isinstance(s.request, StopReplicaRequest):
                rm.stop_replicas(s.request)
        self.delivered[id(channel)] = len(sent)

    def replicate(self, rounds: int = 2) -> None:
        """Fetch rounds: every follower fetches from its current leader (same leader epoch)."""
        for _ in range(rounds):
            now = self.clock.time_ms()
            for b, rm in self.managers.items():
                for p in rm.snapshot():
                    leader_rm = self.managers.get(p.leader)
                    lp = leader_rm.get(p.tp) if leader_rm is not None and not p.is_leader else None
                    if lp is None or not lp.is_leader or lp.leader_epoch != p.leader_epoch:
                        continue
                    hw, leo, _ = lp.on_follower_fetch(b, p.log_end_offset(now), now)
                    p.on_fetch_response(leo, hw)

    def source(self) -> Any:
        return replica_manager_source(self.managers, self.epochs)


@dataclass
class Drill:
    clock: ManualClock
    harness: CoreHarness
    brokers: SimulatedBrokers
    writer: AuditWriter
    store: InMemoryMetadataStore | None = None  # the new controller's session
    context: ControllerContext | None = None
    controller_id: int = 3

    def controller_source(self) -> Any:
        assert self.context is not None
        return context_controller_source(self.context, self.controller_id)


def start(audit_url: str, spool: Path) -> Drill:
    """Four brokers, three topics, controller on broker 4; every source consistent."""
    clock = ManualClock(1_700_000_000.0)
    writer = AuditWriter(audit_url, spool_dir=spool, clock=clock, flush_interval=0.05)
    holder: dict[str, CoreHarness] = {}
    sink = ControllerAuditSink(writer, 4, clock, lambda: holder["h"].context.epoch)
    h = holder["h"] = CoreHarness(BROKERS, controller_id=4, audit=sink)
    sim = SimulatedBrokers(h.store.tree, clock)
    for b in BROKERS:
        sim.start(b)
    for topic, assignment in TOPICS.items():
        h.create_topic(topic, assignment)
    sim.deliver(h.channel)
    clock.advance(60)
    sim.replicate()
    return Drill(clock, h, sim, writer)


def all_partitions() -> list[TopicPartition]:
    return [TopicPartition(t, p) for t, a in TOPICS.items() for p in range(len(a))]


def fail_broker(d: Drill, broker_id: int) -> None:
    d.brokers.kill(broker_id)
    d.harness.fail_brokers([broker_id])
    d.brokers.deliver(d.harness.channel)
    d.clock.advance(30)
    d.brokers.replicate()


def recover_broker(d: Drill, broker_id: int) -> None:
    """Restart, catch up, rejoin every ISR (AlterIsr from the leaders), preferred election."""
    h, sim = d.harness, d.brokers
    sim.start(broker_id)
    h.start_brokers([broker_id])
    sim.deliver(h.channel)
    sim.replicate()
    for tp in all_partitions():
        info = h.context.partition_leadership_info(tp)
        assert info is not None
        isr = info.leader_and_isr.isr
        if broker_id in h.context.partition_replica_assignment(tp) and broker_id not in isr:
            h.set_isr(tp, (*isr, broker_id))
    sim.deliver(h.channel)
    h.preferred_election(all_partitions())
    sim.deliver(h.channel)
    d.clock.advance(30)
    sim.replicate()


def fail_over_controller(d: Drill, new_controller: int = 3) -> None:
    """The controller's session expires; ``new_controller`` wins the election and loads from ZooKeeper."""
    d.harness.store.expire_session()
    store = InMemoryMetadataStore(d.brokers.tree)
    ctx = ControllerContext()
    ctx.epoch, ctx.epoch_zk_version = store.register_controller_and_increment_controller_epoch(new_controller)
    ctx.set_live_brokers(store.get_all_brokers_and_epochs())
    ctx.set_all_topics(store.get_all_topics())
    tps: list[TopicPartition] = []
    for topic, read in store.get_replica_assignment_and_topic_ids(ctx.all_topics).items():
        assert not isinstance(read, Exception), read
        for tp, assignment in read.assignment.items():
            ctx.update_partition_full_replica_assignment(tp, assignment)
            tps.append(tp)
        assert topic in ctx.all_topics
    for tp, state in store.get_partition_states(tps).items():
        assert isinstance(state, LeaderIsrAndControllerEpoch), (tp, state)
        ctx.put_partition_leadership_info(tp, state)
    channel = RecordingBrokerChannel()
    sink = ControllerAuditSink(d.writer, new_controller, d.clock, lambda: ctx.epoch)

    def batch() -> ControllerBrokerRequestBatch:
        return ControllerBrokerRequestBatch(new_controller, ctx, channel, lambda _e: None)

    rsm = ReplicaStateMachine(new_controller, ctx, store, batch(), audit=sink)
    psm = PartitionStateMachine(new_controller, ctx, store, batch(), audit=sink)
    rsm.startup()
    psm.startup()
    d.brokers.deliver(channel)
    d.store, d.context, d.controller_id = store, ctx, new_controller


def leaders(d: Drill, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
    ctx = d.context or d.harness.context
    out = {}
    for tp in tps:
        info = ctx.partition_leadership_info(tp)
        assert info is not None
        out[tp] = info.leader_and_isr.leader
    return out
