"""An in-process cluster for controller tests: real ``KafkaController``s on ``InMemoryMetadataStore``s
sharing one ``InMemoryZooKeeper`` tree, one store (one ZooKeeper session) per simulated broker.

A simulated broker registers ``/brokers/ids/<id>`` through its own store, as a Kafka broker does,
and runs a controller candidate with a ``RecordingBrokerChannel``; stopping it closes its session,
so its ephemerals vanish and the other controllers see it through their watches. Nothing answers
broker requests unless a test does (``channel.respond_all``). ISR changes a real leader would make
are made explicitly with ``alter_isr`` (KIP-497, as brokers on IBP 2.8 do).

Waiting is always for a condition with a deadline: ``drain`` puts a barrier event on a controller's
queue and waits until it runs with the queue empty; ``wait_until`` polls a predicate.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kafka_controller.controller.config import KafkaConfig
from kafka_controller.controller.kafka_controller import KafkaController
from kafka_controller.domain.requests import Errors, UpdateMetadataRequest
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
from kafka_controller.dryrun.recording_channel import RecordingBrokerChannel
from kafka_controller.ports import AuditSink, MetadataStore
from kafka_controller.testing.clock import ManualClock

DEADLINE_S = 10.0


class FakeClock(ManualClock):
    """The runtime tests' manual clock, started at a realistic wall time (znode timestamps)."""

    def __init__(self, start_s: float = 1_700_000_000.0) -> None:
        super().__init__(start_s)


def wait_until(predicate: Callable[[], bool], message: str, timeout: float = DEADLINE_S) -> None:
    """Poll ``predicate`` until it holds; fail with ``message`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    while True:
        if predicate():
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s: {message}")
        pause.wait(0.005)


def drain(controller: KafkaController, timeout: float = DEADLINE_S) -> None:
    """Wait until ``controller`` has processed everything queued, including what that queues."""
    if not controller.wait_until_idle(timeout):
        raise AssertionError(f"controller {controller.controller_id} did not drain its queue in {timeout}s")


class Answer:
    """A callback that remembers its one value; ``get`` waits for it."""

    def __init__(self) -> None:
        self._value: Any = None
        self._done = threading.Event()
        self.calls = 0

    def __call__(self, value: Any) -> None:
        self.calls += 1
        self._value = value
        self._done.set()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def get(self, timeout: float = DEADLINE_S) -> Any:
        if not self._done.wait(timeout):
            raise AssertionError(f"no answer within {timeout}s")
        return self._value


@dataclass
class SimBroker:
    id: int
    store: Any  # an InMemoryMetadataStore, or a KazooMetadataStore on a real server
    channel: RecordingBrokerChannel
    controller: KafkaController
    info: Broker
    epoch: int
    running: bool = True

    def last_metadata(self, controller_channel: RecordingBrokerChannel, tp: TopicPartition) -> Any:
        """The newest UpdateMetadata partition state for ``tp`` sent to this broker."""
        for request in reversed(controller_channel.requests_to(self.id, UpdateMetadataRequest)):
            for state in request.partition_states:
                if (state.topic, state.partition) == tp:
                    return state
        return None


@dataclass
class Cluster:
    """Brokers ``start``-ed on one tree; ``admin`` is a separate session (the admin tools)."""

    clock: FakeClock = field(default_factory=FakeClock)
    config: Mapping[str, Any] = field(default_factory=dict)
    audit: Callable[[int], AuditSink | None] = lambda _id: None
    #: Makes a store with its own session; default: one on this cluster's in-memory ``tree``.
    store_factory: Callable[[], Any] | None = None

    def __post_init__(self) -> None:
        self.tree = InMemoryZooKeeper(self.clock.time_ms)
        self.admin: MetadataStore = self.new_store()
        self.brokers: dict[int, SimBroker] = {}

    def new_store(self) -> Any:
        if self.store_factory is not None:
            return self.store_factory()
        return InMemoryMetadataStore(self.tree, clock=self.clock)

    # -- brokers -----------------------------------------------------------------------------------
    def start(self, broker_id: int, *, launch: bool = True, **overrides: Any) -> SimBroker:
        """Register broker ``broker_id`` (its own session) and, if ``launch``, start its controller."""
        store = self.new_store()
        info = Broker(broker_id, (EndPoint("localhost", 9092 + broker_id),))
        epoch = store.register_broker(info)
        channel = RecordingBrokerChannel()
        props = {**self.config, **{k.replace("_", "."): v for k, v in overrides.items()}}
        controller = KafkaController(
            KafkaConfig.of(broker_id, props),
            store,
            channel,
            clock=self.clock,
            broker_info=info,
            audit=self.audit(broker_id),
        )
        sim = SimBroker(broker_id, store, channel, controller, info, epoch)
        self.brokers[broker_id] = sim
        if launch:
            self.launch(broker_id)
        return sim

    def launch(self, broker_id: int) -> None:
        controller = self.brokers[broker_id].controller
        controller.startup()
        drain(controller)

    def start_all(self, broker_ids: Iterable[int], **overrides: Any) -> None:
        """Register every broker first, then start the controllers: the first one started wins
        the election and sees all of them (a cluster whose brokers are all up)."""
        ids = list(broker_ids)
        for b in ids:
            self.start(b, launch=False, **overrides)
        for b in ids:
            self.launch(b)
        self.wait_idle()

    def stop(self, broker_id: int) -> None:
        """Stop the broker: its controller shuts down and its session closes (ephemerals go)."""
        sim = self.brokers[broker_id]
        if sim.running:
            sim.running = False
            sim.controller.shutdown()
            sim.store.close()

    def restart(self, broker_id: int) -> SimBroker:
        self.stop(broker_id)
        return self.start(broker_id)

    def close(self) -> None:
        for b in list(self.brokers):
            self.stop(b)
        self.admin.close()

    # -- controllers ---------------------------------------------------------------------------------
    def running(self) -> list[SimBroker]:
        return [b for b in self.brokers.values() if b.running]

    def wait_idle(self) -> None:
        """Drain every running controller until none has anything queued."""
        for _ in range(20):
            for b in self.running():
                drain(b.controller)
            if all(b.controller.event_manager.is_empty for b in self.running()):
                return
        raise AssertionError("controllers keep queueing events")

    def active(self) -> SimBroker:
        wait_until(lambda: self.admin.get_controller_id() in self.brokers, "a controller is elected")
        self.wait_idle()
        cid = self.admin.get_controller_id()
        assert cid is not None
        sim = self.brokers[cid]
        wait_until(lambda: sim.controller.is_active, f"broker {cid} acts as the controller")
        return sim

    def controller_epoch(self) -> tuple[int, int]:
        read = self.admin.get_controller_epoch()
        assert read is not None
        return read

    # -- data ------------------------------------------------------------------------------------------
    def create_topic(self, topic: str, assignment: Mapping[int, Iterable[int]], **config: str) -> None:
        self.admin.create_topic(
            topic, {p: ReplicaAssignment.of(r) for p, r in assignment.items()}, config or None
        )
        self.wait_idle()

    def state(self, tp: TopicPartition) -> LeaderIsrAndControllerEpoch | None:
        read = self.admin.get_partition_states([tp])[tp]
        assert not isinstance(read, Exception), read
        return read

    def wait_state(
        self, tp: TopicPartition, controller_epoch: int, leader: int, leader_epoch: int, message: str
    ) -> LeaderIsrAndControllerEpoch:
        """Kafka's ``waitForPartitionState``: (controller epoch, leader, leader epoch) of the znode."""

        def matches() -> bool:
            s = self.state(tp)
            return s is not None and (
                s.controller_epoch,
                s.leader_and_isr.leader,
                s.leader_and_isr.leader_epoch,
            ) == (
                controller_epoch,
                leader,
                leader_epoch,
            )

        self.wait_idle()
        wait_until(matches, f"{message}: {tp} is {self.state(tp)}")
        state = self.state(tp)
        assert state is not None
        return state

    def alter_isr(self, leader: int, tp: TopicPartition, isr: Iterable[int]) -> Any:
        """What leader ``leader`` does when its ISR changes: AlterIsr with what it last saw.

        The controllers are drained (``active``) before the state is read: an event still queued
        (a broker change) may move the leader, and an AlterIsr built on the state before it would
        be fenced."""
        active = self.active().controller
        current = self.state(tp)
        assert current is not None
        lai = current.leader_and_isr
        answer = Answer()
        sim = self.brokers[leader]
        active.alter_isr(
            leader,
            sim.epoch,
            {tp: LeaderAndIsr(leader, lai.leader_epoch, tuple(isr), lai.zk_version)},
            answer,
        )
        result = answer.get()
        self.wait_idle()
        return result

    def respond_all(self, error: Errors = Errors.NONE) -> None:
        """Every broker answers every request it was sent (as a healthy broker would)."""
        for b in self.running():
            b.channel.respond_all(error=error)
        self.wait_idle()
