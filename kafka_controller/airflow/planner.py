"""Dry runs: the project's own controller, run on a copy of the live metadata, in memory.

``ClusterSnapshot.read`` takes the live cluster's metadata in a handful of batched reads. A
``DryRun`` loads it into an ``InMemoryZooKeeper`` (batched multis, no per-topic checks), registers
every live broker with a session of its own, and starts a real ``KafkaController`` there (a
recording broker channel, auto rebalance off). The failover it runs first is the baseline; an
action (controlled shutdown, broker stop, election, reassignment) is then applied through the same
entry points the live controller offers, and the ``PlannedChange`` says what the state machines did:
every transition, who would lead what, what would go offline, and whether an unclean election would
be needed to bring it back. Nothing touches the live cluster.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kafka_controller.admin.describe import ClusterView
from kafka_controller.airflow.plan_model import ClusterSnapshot, PlannedChange
from kafka_controller.controller.config import KafkaConfig
from kafka_controller.controller.kafka_controller import KafkaController
from kafka_controller.domain.audit_records import PartitionTransition, ReplicaTransition
from kafka_controller.domain.config_keys import AUTO_LEADER_REBALANCE_ENABLE
from kafka_controller.domain.errors import KafkaControllerError
from kafka_controller.domain.values import (
    NO_LEADER,
    TopicPartition,
)
from kafka_controller.dryrun.memory_store import InMemoryMetadataStore
from kafka_controller.dryrun.memory_zk import InMemoryZooKeeper
from kafka_controller.dryrun.recording import RecordingAuditSink
from kafka_controller.dryrun.recording_channel import RecordingBrokerChannel
from kafka_controller.zk import paths as P
from kafka_controller.zk.admin_codecs import encode_entity_config, encode_reassignment
from kafka_controller.zk.backend import CREATE, PERSISTENT
from kafka_controller.zk.codecs import encode_controller_epoch, encode_partition_state, encode_topic

__all__ = ["DRY_RUN_CONTROLLER_ID", "DryRun", "DryRunError", "plan_rolling_restart"]

#: The dry-run controller's broker id: never a real broker's, so stopping any broker is possible.
DRY_RUN_CONTROLLER_ID = 2_147_483_000
DRAIN_TIMEOUT_S = 120.0
_CHUNK_OPS = 5000


class DryRunError(KafkaControllerError):
    """The in-memory controller did not get where a plan needs it (it says why)."""


@dataclass(frozen=True)
class _PlanState:
    """Who leads what, with which ISR, over which replicas, among which registered brokers."""

    leaders: Mapping[TopicPartition, tuple[int, tuple[int, ...]]]
    assignments: Mapping[TopicPartition, tuple[int, ...]]
    brokers: set[int]

    @staticmethod
    def of(snapshot: ClusterSnapshot) -> _PlanState:
        return _PlanState(
            {tp: (s.leader_and_isr.leader, s.leader_and_isr.isr) for tp, s in snapshot.states.items()},
            {tp: ra.replicas for a in snapshot.topics.values() for tp, ra in a.assignment.items()},
            {b.id for b in snapshot.brokers},
        )

    def leader(self, tp: TopicPartition) -> int:
        return self.leaders.get(tp, (NO_LEADER, ()))[0]

    def offline(self, tp: TopicPartition) -> bool:
        leader = self.leader(tp)
        return leader == NO_LEADER or leader not in self.brokers


class _Answer:
    """The callback an entry point of the controller answers on its event thread: the answer is a
    set, a dict of results or an exception, whichever the entry point gives."""

    def __init__(self) -> None:
        self.value: object = None
        self.done = threading.Event()

    def __call__(self, value: object) -> None:
        self.value = value
        self.done.set()

    def get(self, what: str) -> object:
        if not self.done.wait(DRAIN_TIMEOUT_S):
            raise DryRunError(f"the dry-run controller did not answer {what} in {DRAIN_TIMEOUT_S:g}s")
        return self.value


#: The controller's loggers. A dry run's refusals and failed elections are plan facts (they are in
#: the transitions and the summary); logged at ERROR by the dry-run controller they would read as
#: failures of the live cluster in the task's log.
_CONTROLLER_LOGGERS = (
    "kafka_controller.controller",
    "kafka_controller.state_change",
    "kafka_controller.core",
)


def _quiet_controller_logs() -> Callable[[], None]:
    """Silence the controller's loggers; returns the function that puts their levels back."""
    loggers = [logging.getLogger(name) for name in _CONTROLLER_LOGGERS]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL)

    def restore() -> None:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)

    return restore


def _plain(answer: object) -> Any:
    """Controller answers (sets, dicts of ints or ApiErrors, exceptions) as JSON-ready values."""
    if isinstance(answer, BaseException):
        return {"error": type(answer).__name__, "message": str(answer)}
    if isinstance(answer, set | frozenset | list | tuple):
        return sorted(str(x) for x in answer)
    if isinstance(answer, dict):
        return {str(k): (v if isinstance(v, int) else str(v)) for k, v in sorted(answer.items())}
    return None if answer is None else str(answer)


class DryRun:
    """One in-memory copy of the cluster with its own controller; ``close()`` when done."""

    def __init__(
        self,
        snapshot: ClusterSnapshot,
        *,
        broker_defaults: Mapping[str, str] | None = None,
        operation_id: str | None = None,
    ) -> None:
        props = {**dict(broker_defaults or {}), AUTO_LEADER_REBALANCE_ENABLE: "false"}
        config = KafkaConfig.of(DRY_RUN_CONTROLLER_ID, props)  # bad defaults refused before any work
        self.snapshot = snapshot
        self.operation_id = operation_id
        self.tree = InMemoryZooKeeper()
        self.admin = InMemoryMetadataStore(self.tree)
        self.broker_stores: dict[int, InMemoryMetadataStore] = {}
        self.broker_epochs: dict[int, int] = {}
        self.audit = RecordingAuditSink()
        self.channel = RecordingBrokerChannel()
        self._controller_store = InMemoryMetadataStore(self.tree, create_paths=False)
        self.controller = KafkaController(config, self._controller_store, self.channel, audit=self.audit)
        self._quiet = _quiet_controller_logs()
        try:
            self._load(snapshot)
            for broker in snapshot.brokers:
                store = InMemoryMetadataStore(self.tree, create_paths=False)
                self.broker_epochs[broker.id] = store.register_broker(broker)
                self.broker_stores[broker.id] = store
            self.controller.startup()
            self._drain()
            if not self.controller.is_active:
                raise DryRunError("the dry-run controller did not become active")
            self.baseline = self._collect("failover", None, _PlanState.of(snapshot))
        except BaseException:
            self.close()
            raise

    # -- loading ------------------------------------------------------------------------------------
    def _load(self, snap: ClusterSnapshot) -> None:
        ops: list[tuple[int, str, bytes | None, int]] = []
        if snap.controller_epoch is not None:
            ops.append(
                (
                    CREATE,
                    P.CONTROLLER_EPOCH_PATH,
                    encode_controller_epoch(snap.controller_epoch[0]),
                    PERSISTENT,
                )
            )
        for topic, a in sorted(snap.topics.items()):
            ops.append((CREATE, P.topic_path(topic), encode_topic(a.assignment, a.topic_id), PERSISTENT))
            ops.append((CREATE, P.topic_partitions_path(topic), None, PERSISTENT))
            for tp in sorted(a.assignment, key=lambda x: x.partition):
                ops.append((CREATE, P.topic_partition_path(tp), None, PERSISTENT))
                state = snap.states.get(tp)
                if state is not None:
                    ops.append(
                        (CREATE, P.topic_partition_state_path(tp), encode_partition_state(state), PERSISTENT)
                    )
            config = snap.configs.get(topic)
            if config:
                ops.append(
                    (CREATE, P.topic_config_path(topic), encode_entity_config(dict(config)), PERSISTENT)
                )
        for topic in snap.deletions:
            ops.append((CREATE, P.delete_topic_path(topic), None, PERSISTENT))
        if snap.legacy_reassignment:
            ops.append(
                (
                    CREATE,
                    P.REASSIGN_PARTITIONS_PATH,
                    encode_reassignment(snap.legacy_reassignment),
                    PERSISTENT,
                )
            )
        for i in range(0, len(ops), _CHUNK_OPS):
            outcome = self.admin.session.multi([ops[i : i + _CHUNK_OPS]])[0]
            if not outcome.ok:
                raise DryRunError(f"cannot load the snapshot: {ops[i + outcome.failed_index][1]} failed")

    def _drain(self) -> None:
        if not self.controller.wait_until_idle(DRAIN_TIMEOUT_S):
            raise DryRunError(f"the dry-run controller did not go idle in {DRAIN_TIMEOUT_S:g}s")

    # -- reading back --------------------------------------------------------------------------------
    def view(self) -> ClusterView:
        """The in-memory cluster as ``describe`` shows it (a full read: for callers and tests)."""
        return ClusterSnapshot.read(self.admin).view()

    def _state(self) -> _PlanState:
        """Leaders, ISRs, assignments and registered brokers from the idle controller's context: what
        the state machines just wrote, without re-reading and decoding the whole tree."""
        ctx = self.controller.controller_context
        leadership = ctx.partitions_leadership_info
        return _PlanState(
            {tp: (info.leader_and_isr.leader, info.leader_and_isr.isr) for tp, info in leadership.items()},
            {tp: ra.replicas for tp, ra in ctx.iter_assignments()},
            set(ctx.live_or_shutting_down_broker_ids),
        )

    def _collect(self, action: str, answer: object, before: _PlanState, mark: int = 0) -> PlannedChange:
        records = self.audit.records[mark:]
        for r in records:
            r.dry_run = True  # a plan, never history (the dry-run controller's failover included)
            if isinstance(r, PartitionTransition | ReplicaTransition):
                r.operation_id = self.operation_id
                r.event = f"dry-run:{action}" + (f":{r.event}" if r.event else "")
                r.controller_id = -1  # no controller made it: a plan
                r.sequence = -1
        after = self._state()
        moved = {
            str(tp): (before.leader(tp), after.leader(tp))
            for tp in after.assignments
            if tp in before.assignments and before.leader(tp) != after.leader(tp)
        }
        offline = sorted(tp for tp in after.assignments if after.offline(tp))
        unclean_needed = {
            str(tp): live
            for tp in offline
            if (live := [r for r in after.assignments[tp] if r in after.brokers])
        }
        elected = sorted(
            {f"{r.topic}-{r.partition}" for r in records if isinstance(r, PartitionTransition) and r.unclean}
        )
        return PlannedChange(
            action, _plain(answer), list(records), moved, [str(tp) for tp in offline], unclean_needed, elected
        )

    # -- actions ---------------------------------------------------------------------------------------
    def _act(self, action: str, call: Callable[[_Answer], object]) -> PlannedChange:
        before = self._state()
        mark = len(self.audit.records)
        answer = _Answer()
        call(answer)
        value = answer.get(action)
        self._drain()
        return self._collect(action, value, before, mark)

    def controlled_shutdown(self, broker_id: int, *, then_stop: bool = True) -> PlannedChange:
        """Kafka's controlled shutdown, then (by default) the broker's exit, as one planned change."""
        self._known(broker_id)
        before = self._state()
        mark = len(self.audit.records)
        answer = _Answer()
        self.controller.controlled_shutdown(
            broker_id, self.broker_epochs[broker_id], answer, self.operation_id
        )
        value = answer.get("controlled shutdown")
        self._drain()
        if then_stop:
            self._close_broker(broker_id)
        return self._collect(f"controlled-shutdown:{broker_id}", value, before, mark)

    def stop_broker(self, broker_id: int) -> PlannedChange:
        """A hard stop (session gone, no controlled shutdown)."""
        self._known(broker_id)
        before = self._state()
        mark = len(self.audit.records)
        self._close_broker(broker_id)
        return self._collect(f"stop:{broker_id}", None, before, mark)

    def elect_leaders(
        self, election_type: str, partitions: Collection[TopicPartition] | None
    ) -> PlannedChange:
        parts = None if partitions is None else list(partitions)
        return self._act(
            f"elect-{election_type}",
            lambda cb: self.controller.elect_leaders(parts, election_type, cb, self.operation_id),
        )

    def reassign(self, plan: Mapping[TopicPartition, Sequence[int] | None]) -> PlannedChange:
        return self._act(
            "reassign",
            lambda cb: self.controller.alter_partition_reassignments(dict(plan), cb, self.operation_id),
        )

    def _known(self, broker_id: int) -> None:
        if broker_id not in self.broker_stores:
            raise DryRunError(f"broker {broker_id} is not registered in the snapshot")

    def _close_broker(self, broker_id: int) -> None:
        self.broker_stores.pop(broker_id).close()
        self._drain()

    def close(self) -> None:
        try:
            self.controller.shutdown()
            for store in (*self.broker_stores.values(), self._controller_store, self.admin):
                store.close()
            self.broker_stores.clear()
        finally:
            self._quiet()

    def __enter__(self) -> DryRun:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def plan_rolling_restart(
    snapshot: ClusterSnapshot,
    order: Iterable[int],
    *,
    broker_defaults: Mapping[str, str] | None = None,
    operation_id: str | None = None,
) -> list[PlannedChange]:
    """Each broker's controlled shutdown and exit, each from the snapshot: the live run waits until
    the cluster is whole again before the next broker, so every step starts from the same state."""
    steps = []
    for broker_id in order:
        with DryRun(snapshot, broker_defaults=broker_defaults, operation_id=operation_id) as run:
            steps.append(run.controlled_shutdown(broker_id))
    return steps
