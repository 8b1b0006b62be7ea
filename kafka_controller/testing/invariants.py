"""What must hold in a cluster whatever was killed, paused, restarted or cut off.

Checked from outside, as an operator could: ZooKeeper (``read_snapshot``: a handful of batched store
reads), each broker's own view of its replicas (``ReplicaView``, from DescribeReplicas) and the
audit store (``read_audit_entries``, or ``audit_entries_from_records`` for an in-memory sink).

``InvariantChecker`` is stateful, because half of the invariants are about history:

* ``observe(snapshot)`` — at any moment, many times per trial: no leader outside its ISR; leader
  epochs and the controller epoch never decrease; no state written by a future controller; no two
  brokers act as leader of one partition in one leader epoch (across all observations); no two
  controllers obeyed at one controller epoch and no state znode written with a stale epoch
  (``fencing_invariants``).
* ``check_settled(snapshot, unclean)`` — once the cluster is quiet: every partition with a live ISR
  replica has a live leader; the committed high watermark (the largest one a leader reported) is
  still there — on the current leader's log and under its high watermark — unless an unclean
  election of that partition is on record.
* ``check_audit(entries, snapshot)`` — every controller epoch's audit sequence numbers are unique
  and gap-free (every transition exactly once), and replaying the audited transitions gives
  ZooKeeper's final leader and leader epoch of every partition, and no partition ZooKeeper lost.

Each returns ``Violation``s; an empty list means the invariants hold.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field

from kafka_controller.domain.audit_records import (
    OUTCOME_OK,
)
from kafka_controller.domain.errors import MetadataStoreError
from kafka_controller.domain.values import (
    NO_LEADER,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
    TopicPartition,
)
from kafka_controller.ports import MetadataStore
from kafka_controller.testing.audit_entries import (
    AuditEntry,
)
from kafka_controller.testing.fencing_invariants import (
    NO_STALE_EPOCH_WRITE,
    SINGLE_CONTROLLER_PER_EPOCH,
    ActedOn,
    EpochWrites,
    FencingChecker,
    read_epoch_writes,
)
from kafka_controller.testing.violation import Violation

LEADER_IN_ISR = "leader_in_isr"
LEADER_EPOCH_MONOTONIC = "leader_epoch_monotonic"
CONTROLLER_EPOCH_MONOTONIC = "controller_epoch_monotonic"
SINGLE_LEADER_PER_EPOCH = "single_leader_per_epoch"
LIVE_LEADER = "live_leader"
COMMITTED_DATA_KEPT = "committed_high_watermark_kept"
AUDIT_EXACTLY_ONCE = "audit_exactly_once"
AUDIT_REPLAY = "audit_replay_matches_zookeeper"
#: Every invariant this module checks, in report order.
INVARIANTS: tuple[str, ...] = (
    LIVE_LEADER,
    LEADER_IN_ISR,
    LEADER_EPOCH_MONOTONIC,
    CONTROLLER_EPOCH_MONOTONIC,
    SINGLE_LEADER_PER_EPOCH,
    SINGLE_CONTROLLER_PER_EPOCH,
    NO_STALE_EPOCH_WRITE,
    COMMITTED_DATA_KEPT,
    AUDIT_EXACTLY_ONCE,
    AUDIT_REPLAY,
)
NON_EXISTENT_PARTITION = "NonExistentPartition"


@dataclass(frozen=True, slots=True)
class ReplicaView:
    """One replica as its own broker sees it (the simulated log included)."""

    broker_id: int
    topic_partition: TopicPartition
    leader_epoch: int
    is_leader: bool
    log_end_offset: int
    high_watermark: int


@dataclass(frozen=True, slots=True)
class Snapshot:
    """ZooKeeper at one moment, plus whatever broker views were read alongside."""

    controller_id: int | None
    controller_epoch: int | None
    live_brokers: frozenset[int]
    assignments: Mapping[TopicPartition, ReplicaAssignment]
    states: Mapping[TopicPartition, LeaderIsrAndControllerEpoch]
    unreadable: Mapping[str, str] = field(default_factory=dict)
    replicas: tuple[ReplicaView, ...] = ()
    #: What each broker that answered says it acted on, per controller epoch.
    acted_on: ActedOn = field(default_factory=dict)
    #: ``/controller_epoch`` and the state znodes with their zxids (ZooKeeper stores only).
    writes: EpochWrites | None = None


def read_snapshot(
    store: MetadataStore, replicas: Iterable[ReplicaView] = (), acted_on: ActedOn | None = None
) -> Snapshot:
    """Controller, brokers, assignments and partition states in six batched store calls, and a
    seventh with zxids where the store reads raw znodes (ZooKeeper: ``read_raw``).

    Raises ``MetadataStoreError`` when ZooKeeper cannot be read at all (callers retry later);
    a znode that does not decode is recorded in ``unreadable`` instead.

    ``/controller_epoch`` is read after the states: read before, a controller elected between the
    two reads made its own fresh writes look like a future controller's (found by the soak)."""
    controller = store.get_controller_id()
    live = frozenset(b.id for b in store.get_all_brokers_and_epochs())
    assignments: dict[TopicPartition, ReplicaAssignment] = {}
    unreadable: dict[str, str] = {}
    for topic, read in store.get_replica_assignment_and_topic_ids(sorted(store.get_all_topics())).items():
        if isinstance(read, MetadataStoreError):
            unreadable[f"/brokers/topics/{topic}"] = str(read)
        else:
            assignments.update(read.assignment)
    states: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
    for tp, state in store.get_partition_states(sorted(assignments)).items():
        if isinstance(state, LeaderIsrAndControllerEpoch):
            states[tp] = state
        elif isinstance(state, MetadataStoreError):
            unreadable[f"state of {tp}"] = str(state)
    epoch = store.get_controller_epoch()
    read_raw = getattr(store, "read_raw", None)
    return Snapshot(
        controller,
        None if epoch is None else epoch[0],
        live,
        assignments,
        states,
        unreadable,
        tuple(replicas),
        acted_on or {},
        None if read_raw is None else read_epoch_writes(read_raw, assignments),
    )


class InvariantChecker:
    """Remembers what earlier observations saw; see the module docstring for the three checks."""

    def __init__(self) -> None:
        self.max_controller_epoch = 0
        self.leader_epochs: dict[TopicPartition, int] = {}
        #: ``(partition, leader epoch) -> broker`` seen acting as leader in that epoch.
        self.leaders: dict[tuple[TopicPartition, int], int] = {}
        #: The largest high watermark a leader reported, per partition: committed data.
        self.committed: dict[TopicPartition, int] = {}
        self.fencing = FencingChecker()
        self.observations = 0

    # ---------------------------------------------------------------------------- at any moment
    def observe(self, snap: Snapshot) -> list[Violation]:
        self.observations += 1
        out: list[Violation] = []
        epoch = snap.controller_epoch
        if epoch is not None:
            if epoch < self.max_controller_epoch:
                out.append(
                    Violation(
                        CONTROLLER_EPOCH_MONOTONIC,
                        "/controller_epoch",
                        f"went back from {self.max_controller_epoch} to {epoch}",
                    )
                )
            self.max_controller_epoch = max(self.max_controller_epoch, epoch)
        for tp in [tp for tp in self.leader_epochs if tp not in snap.assignments]:
            del self.leader_epochs[tp]  # deleted topic: its history ends with it
            self.committed.pop(tp, None)
        for tp, state in snap.states.items():
            lai = state.leader_and_isr
            if lai.leader != NO_LEADER and lai.leader not in lai.isr:
                out.append(
                    Violation(LEADER_IN_ISR, str(tp), f"leader {lai.leader} not in ISR {list(lai.isr)}")
                )
            last = self.leader_epochs.get(tp)
            if last is not None and lai.leader_epoch < last:
                out.append(
                    Violation(
                        LEADER_EPOCH_MONOTONIC,
                        str(tp),
                        f"leader epoch went back {last} -> {lai.leader_epoch}",
                    )
                )
            self.leader_epochs[tp] = max(lai.leader_epoch, last if last is not None else lai.leader_epoch)
            if state.controller_epoch > self.max_controller_epoch:
                out.append(
                    Violation(
                        CONTROLLER_EPOCH_MONOTONIC,
                        str(tp),
                        f"written by controller epoch {state.controller_epoch} > {self.max_controller_epoch}",
                    )
                )
        for view in snap.replicas:
            if not view.is_leader:
                continue
            key = (view.topic_partition, view.leader_epoch)
            other = self.leaders.setdefault(key, view.broker_id)
            if other != view.broker_id:
                out.append(
                    Violation(
                        SINGLE_LEADER_PER_EPOCH,
                        str(view.topic_partition),
                        f"brokers {other} and {view.broker_id} both led leader epoch {view.leader_epoch}",
                    )
                )
            tp = view.topic_partition
            self.committed[tp] = max(self.committed.get(tp, 0), view.high_watermark)
        return out + self.fencing.observe(snap.acted_on, snap.writes)

    # ---------------------------------------------------------------------------- once quiet
    def check_settled(self, snap: Snapshot, unclean: Collection[TopicPartition] = ()) -> list[Violation]:
        out: list[Violation] = []
        live = snap.live_brokers
        for tp, state in snap.states.items():
            lai = state.leader_and_isr
            if any(r in live for r in lai.isr) and lai.leader not in live:
                out.append(
                    Violation(
                        LIVE_LEADER, str(tp), f"ISR {list(lai.isr)} has live replicas, leader {lai.leader}"
                    )
                )
        leading = {
            v.topic_partition: v
            for v in snap.replicas
            if v.is_leader
            and (s := snap.states.get(v.topic_partition)) is not None
            and s.leader_and_isr.leader == v.broker_id
            and s.leader_and_isr.leader_epoch == v.leader_epoch
        }
        for tp, committed in self.committed.items():
            view = leading.get(tp)
            if view is None or tp in unclean:
                continue
            if view.log_end_offset < committed or view.high_watermark < committed:
                out.append(
                    Violation(
                        COMMITTED_DATA_KEPT,
                        str(tp),
                        f"{committed} committed, but leader {view.broker_id} (epoch {view.leader_epoch}) has "
                        f"log end {view.log_end_offset}, high watermark {view.high_watermark}",
                    )
                )
        return out

    # ---------------------------------------------------------------------------- the audit trail
    def check_audit(self, entries: Collection[AuditEntry], snap: Snapshot) -> list[Violation]:
        return _check_sequences(entries) + _check_replay(entries, snap)


def _check_sequences(entries: Collection[AuditEntry]) -> list[Violation]:
    """Per controller epoch (the broker that won it, that epoch): sequence numbers unique, none
    missing between the first and the last, none absent."""
    groups: dict[tuple[int, int], list[int | None]] = {}
    for e in entries:
        if e.kind != "event":
            groups.setdefault((e.controller_id, e.controller_epoch), []).append(e.sequence)
    for e in entries:
        key = (e.controller_id, e.controller_epoch)
        if e.kind == "event" and key in groups:
            groups[key].append(e.sequence)
    out: list[Violation] = []
    for (cid, epoch), seqs in sorted(groups.items()):
        subject = f"controller {cid} epoch {epoch}"
        missing = sum(1 for s in seqs if s is None)
        numbers = sorted(s for s in seqs if s is not None)
        if missing:
            out.append(Violation(AUDIT_EXACTLY_ONCE, subject, f"{missing} rows without a sequence number"))
        if not numbers:
            continue
        duplicates = len(numbers) - len(set(numbers))
        if duplicates:
            out.append(Violation(AUDIT_EXACTLY_ONCE, subject, f"{duplicates} duplicated sequence numbers"))
        gaps = (numbers[-1] - numbers[0] + 1) - len(set(numbers))
        if gaps:
            present = set(numbers)
            first = next(s for s in range(numbers[0], numbers[-1]) if s not in present)
            out.append(
                Violation(
                    AUDIT_EXACTLY_ONCE,
                    subject,
                    f"{gaps} sequence numbers missing in {numbers[0]}..{numbers[-1]} (first: {first})",
                )
            )
    return out


def _check_replay(entries: Collection[AuditEntry], snap: Snapshot) -> list[Violation]:
    """Replaying the audited writes gives each partition's leader and leader epoch in ZooKeeper
    (a transition that only restates the current leadership does not count: it wrote nothing);
    partitions gone from ZooKeeper were audited as deleted."""
    last: dict[TopicPartition, tuple[int, int, int, int | None]] = {}
    last_partition_state: dict[TopicPartition, tuple[int, int, str | None]] = {}
    for e in entries:
        tp = e.topic_partition
        if tp is None or e.outcome != OUTCOME_OK:
            continue
        order = (e.controller_epoch, e.sequence if e.sequence is not None else -1)
        if e.wrote_leader_epoch and e.leader_epoch_after is not None:
            key = (e.leader_epoch_after, *order, e.leader_after)
            if tp not in last or key[:3] > last[tp][:3]:
                last[tp] = key
        if e.kind == "partition":
            seen = last_partition_state.get(tp)
            if seen is None or order > seen[:2]:
                last_partition_state[tp] = (*order, e.to_state)
    out: list[Violation] = []
    for tp, state in sorted(snap.states.items()):
        lai = state.leader_and_isr
        replayed = last.get(tp)
        if replayed is None:
            out.append(
                Violation(
                    AUDIT_REPLAY,
                    str(tp),
                    "no audited transition wrote its leader and epoch "
                    f"(controller epoch {state.controller_epoch})",
                    {"controller_epoch": state.controller_epoch, "zookeeper_leader_epoch": lai.leader_epoch},
                )
            )
        elif (replayed[3], replayed[0]) != (lai.leader, lai.leader_epoch):
            out.append(
                Violation(
                    AUDIT_REPLAY,
                    str(tp),
                    f"audit replays leader {replayed[3]} epoch {replayed[0]}, ZooKeeper has leader "
                    f"{lai.leader} epoch {lai.leader_epoch} (controller epoch {state.controller_epoch})",
                    {
                        "controller_epoch": state.controller_epoch,
                        "zookeeper_leader_epoch": lai.leader_epoch,
                        "audited_leader_epoch": replayed[0],
                    },
                )
            )
    for tp, (_, _, to_state) in sorted(last_partition_state.items()):
        if tp not in snap.assignments and to_state != NON_EXISTENT_PARTITION:
            out.append(
                Violation(AUDIT_REPLAY, str(tp), f"gone from ZooKeeper, but audited last as {to_state}")
            )
    return out


__all__ = [
    "AUDIT_EXACTLY_ONCE",
    "AUDIT_REPLAY",
    "COMMITTED_DATA_KEPT",
    "CONTROLLER_EPOCH_MONOTONIC",
    "INVARIANTS",
    "LEADER_EPOCH_MONOTONIC",
    "LEADER_IN_ISR",
    "LIVE_LEADER",
    "SINGLE_LEADER_PER_EPOCH",
    "InvariantChecker",
    "ReplicaView",
    "Snapshot",
    "read_snapshot",
]
