"""The operations a fault interrupts: rolling shutdown, reassignment, topic deletion, preferred
election. Each prepares its topics, starts (without waiting), and then must *complete* — under
whichever controller is in charge after the fault (Kafka's ``onControllerFailover`` resumes
reassignments, deletions and ZooKeeper-requested elections: docs/controller-behaviour.md §8.3).

The trial's topic ``w`` has 6 partitions of replication factor 2 over brokers 1-3; its first
replicas are spread evenly, so every broker is a preferred leader of two partitions.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from kafka_controller.domain.errors import KafkaControllerError
from kafka_controller.domain.values import LeaderIsrAndControllerEpoch, TopicPartition
from tests.faults.context import TrialContext, TrialFailed

TOPIC = "w"
PARTITIONS = 6
DOOMED = "doomed"


def topic_layout(brokers: tuple[int, ...]) -> dict[int, list[int]]:
    n = len(brokers)
    return {p: [brokers[p % n], brokers[(p + 1) % n]] for p in range(PARTITIONS)}


def partitions(topic: str = TOPIC, count: int = PARTITIONS) -> list[TopicPartition]:
    return [TopicPartition(topic, p) for p in range(count)]


def healthy(t: TrialContext, topic: str = TOPIC) -> None:
    t.wait(lambda: t.cluster.wait_topic_healthy(topic, timeout=t.left()), f"topic {topic} healthy")


def isr_full(t: TrialContext, broker: int) -> bool:
    """``broker`` is back in the ISR of every partition of ``w`` it hosts (two batched reads)."""
    store = t.cluster.store
    topic = store.get_replica_assignment_and_topic_ids([TOPIC]).get(TOPIC)
    if topic is None or isinstance(topic, Exception):
        return False
    for tp, state in store.get_partition_states(list(topic.assignment)).items():
        if not isinstance(state, LeaderIsrAndControllerEpoch):
            return False
        if broker in topic.assignment[tp].replicas and broker not in state.leader_and_isr.isr:
            return False
    return True


@dataclass
class Workload:
    name: str = "abstract"
    thread: threading.Thread | None = None
    errors: list[str] = field(default_factory=list)

    def prepare(self, t: TrialContext) -> None:
        """Before the observer starts: whatever the operation needs to exist."""

    def start(self, t: TrialContext) -> None:
        raise NotImplementedError

    def wait_done(self, t: TrialContext) -> None:
        """Return once the operation completed; ``TrialFailed`` if it cannot by the deadline."""
        raise NotImplementedError

    def _in_background(self, t: TrialContext, body: Callable[[], None]) -> None:
        def run() -> None:
            try:
                body()
            except (KafkaControllerError, AssertionError) as e:
                self.errors.append(f"{type(e).__name__}: {e}")

        self.thread = threading.Thread(target=run, name=f"{self.name}-{t.seed}", daemon=True)
        self.thread.start()


class RollingShutdown(Workload):
    """Each broker in turn, the active controller last: controlled shutdown, start again, wait
    until it is back in every ISR. A step the fault breaks is retried (an operator would)."""

    def __init__(self) -> None:
        super().__init__("rolling_shutdown")
        self.epochs: dict[int, int] = {}

    def start(self, t: TrialContext) -> None:
        self.epochs = t.cluster.registered()
        controller = t.controller()
        order = sorted(t.cluster.broker_ids, key=lambda b: (b == controller, b))

        def roll_all() -> None:
            for b in order:
                self._roll(t, b)

        self._in_background(t, roll_all)

    def _roll(self, t: TrialContext, broker: int) -> None:
        for attempt in range(4):
            try:
                with t.lifecycle:
                    if broker in t.cluster.running_broker_ids():
                        t.cluster.stop_broker(broker, timeout=t.left())
                    t.cluster.start_broker(broker, timeout=t.left())
                t.wait(lambda: isr_full(t, broker), f"broker {broker} back in every ISR")
                return
            except (KafkaControllerError, TrialFailed) as e:  # the fault got in the way: try again
                t.note(f"rolling restart of broker {broker}, attempt {attempt + 1}: {e}")
        raise TrialFailed(f"broker {broker} could not be restarted")

    def wait_done(self, t: TrialContext) -> None:
        assert self.thread is not None
        self.thread.join(t.left())
        if self.thread.is_alive() or self.errors:
            raise TrialFailed(f"rolling shutdown did not complete: {self.errors or 'still running'}")
        now = t.cluster.registered()
        stale = [b for b, epoch in self.epochs.items() if now.get(b, epoch) == epoch]
        if stale:
            raise TrialFailed(f"brokers {stale} were never restarted")


class Reassignment(Workload):
    """Every partition of ``w`` is reassigned (KIP-455 API), at random either moved — ``[a, b]``
    becomes ``[b, c]``, a new leader — or grown — ``[a, b, c]``, the leader stays."""

    def __init__(self) -> None:
        super().__init__("reassignment")
        self.targets: dict[TopicPartition, tuple[int, ...]] = {}

    @staticmethod
    def plan(rng: random.Random, ids: tuple[int, ...]) -> dict[TopicPartition, tuple[int, ...]]:
        """The targets, drawn from ``rng`` (the trial's, right after its spec was drawn)."""
        layout = topic_layout(ids)
        out: dict[TopicPartition, tuple[int, ...]] = {}
        for p, (a, b) in layout.items():
            c = next(x for x in ids if x not in layout[p])
            out[TopicPartition(TOPIC, p)] = (b, c) if rng.random() < 0.5 else (a, b, c)
        return out

    def start(self, t: TrialContext) -> None:
        self.targets = self.plan(t.rng, t.cluster.broker_ids)
        response = t.cluster.admin().alter_partition_reassignments(self.targets)
        refused = {tp: r.error for tp, r in response.results.items() if r.error != "NONE"}
        if refused:
            raise TrialFailed(f"reassignment refused: {refused}")

    def wait_done(self, t: TrialContext) -> None:
        def done() -> bool:
            read = t.cluster.store.get_replica_assignment_and_topic_ids([TOPIC])[TOPIC]
            if isinstance(read, Exception):
                return False
            return all(
                read.assignment[tp].replicas == target and not read.assignment[tp].is_being_reassigned
                for tp, target in self.targets.items()
            )

        t.wait(done, "every partition of w reassigned to its target")


class TopicDeletion(Workload):
    """A four-partition topic, deleted through ``/admin/delete_topics`` (resumed on failover)."""

    def __init__(self) -> None:
        super().__init__("topic_deletion")

    def prepare(self, t: TrialContext) -> None:
        ids = t.cluster.broker_ids
        t.cluster.create_topic(DOOMED, {p: [ids[p % 3], ids[(p + 2) % 3]] for p in range(4)})
        healthy(t, DOOMED)

    def start(self, t: TrialContext) -> None:
        t.cluster.store.create_delete_topic_path(DOOMED)

    def wait_done(self, t: TrialContext) -> None:
        store = t.cluster.store
        t.wait(
            lambda: not store.topic_exists(DOOMED) and DOOMED not in store.get_topic_deletions(),
            f"topic {DOOMED} deleted",
        )


class PreferredElection(Workload):
    """Leadership first moves off one broker (a controlled restart; auto rebalance is off), then a
    preferred election is requested through ``/admin/preferred_replica_election``, which a new
    controller picks up on failover. Partitions it could not move because the fault had taken
    their preferred broker away are elected again once the cluster is whole (as an operator does)."""

    def __init__(self) -> None:
        super().__init__("preferred_election")

    def prepare(self, t: TrialContext) -> None:
        moved = t.rng.choice([b for b in t.cluster.broker_ids if b != t.controller()])
        t.cluster.restart_broker(moved, timeout=t.left())
        t.wait(lambda: isr_full(t, moved), f"broker {moved} back in every ISR")
        t.note(f"leadership moved off broker {moved}")

    def start(self, t: TrialContext) -> None:
        t.cluster.store.create_preferred_replica_election(partitions())

    def _not_preferred(self, t: TrialContext) -> list[TopicPartition]:
        view = t.cluster.waits.describe([TOPIC])
        return [p.topic_partition for p in view.partitions if p.leader != p.replicas[0]]

    def wait_done(self, t: TrialContext) -> None:
        store = t.cluster.store
        t.wait(lambda: not store.get_preferred_replica_election(), "the election request consumed")
        healthy(t)
        left = self._not_preferred(t)
        if left:
            t.note(f"preferred election repeated for {[str(tp) for tp in left]}")
            t.cluster.admin().elect_leaders("preferred", left)
        t.wait(lambda: not self._not_preferred(t), "every partition of w led by its preferred replica")


WORKLOADS: dict[str, Callable[[], Workload]] = {
    "rolling_shutdown": RollingShutdown,
    "reassignment": Reassignment,
    "topic_deletion": TopicDeletion,
    "preferred_election": PreferredElection,
}
