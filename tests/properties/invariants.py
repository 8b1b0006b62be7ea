"""The core's invariants, checked against the store (the truth), the context and the audit trail.

``InvariantChecker.check()`` is called after every step of a scenario. It compares what it sees
now with what it saw after the previous step, and returns one line per violation (empty = fine).
It reads the store with the same batched calls the controller uses, so a check costs a handful of
store calls however many partitions there are.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import TypeVar

from kafka_controller.domain.audit_records import (
    OUTCOME_FAILED,
    OUTCOME_INVALID,
    OUTCOME_OK,
    AuditRecord,
    PartitionTransition,
    ReplicaTransition,
)
from kafka_controller.domain.config_keys import UNCLEAN_LEADER_ELECTION_ENABLE
from kafka_controller.domain.states import PartitionState, ReplicaState
from kafka_controller.domain.values import (
    NO_LEADER,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    PartitionAndReplica,
    ReplicaAssignment,
    TopicPartition,
)
from kafka_controller.dryrun.recording import RecordingAuditSink
from kafka_controller.ports import TopicIdReplicaAssignment
from kafka_controller.testing.core_harness import CoreHarness

_PARTITION_STATES = {s.kafka_name: s for s in PartitionState}
_REPLICA_STATES = {s.kafka_name: s for s in ReplicaState}

#: docs/controller-behaviour.md §1.1 and §1.2 transcribed here (target: its valid previous states),
#: so that the audit trail is checked against Kafka's tables and not against the table the state
#: machines themselves use; a test
#: holds ``valid_previous_states`` equal to it.
_P, _R = PartitionState, ReplicaState
SPEC_VALID_PREVIOUS: dict[State, frozenset[State]] = {
    _P.NEW_PARTITION: frozenset({_P.NON_EXISTENT_PARTITION}),
    _P.ONLINE_PARTITION: frozenset({_P.NEW_PARTITION, _P.ONLINE_PARTITION, _P.OFFLINE_PARTITION}),
    _P.OFFLINE_PARTITION: frozenset({_P.NEW_PARTITION, _P.ONLINE_PARTITION, _P.OFFLINE_PARTITION}),
    _P.NON_EXISTENT_PARTITION: frozenset({_P.OFFLINE_PARTITION}),
    _R.NEW_REPLICA: frozenset({_R.NON_EXISTENT_REPLICA}),
    _R.ONLINE_REPLICA: frozenset(
        {_R.NEW_REPLICA, _R.ONLINE_REPLICA, _R.OFFLINE_REPLICA, _R.REPLICA_DELETION_INELIGIBLE}
    ),
    _R.OFFLINE_REPLICA: frozenset(
        {_R.NEW_REPLICA, _R.ONLINE_REPLICA, _R.OFFLINE_REPLICA, _R.REPLICA_DELETION_INELIGIBLE}
    ),
    _R.REPLICA_DELETION_STARTED: frozenset({_R.OFFLINE_REPLICA}),
    _R.REPLICA_DELETION_SUCCESSFUL: frozenset({_R.REPLICA_DELETION_STARTED}),
    _R.REPLICA_DELETION_INELIGIBLE: frozenset({_R.OFFLINE_REPLICA, _R.REPLICA_DELETION_STARTED}),
    _R.NON_EXISTENT_REPLICA: frozenset({_R.REPLICA_DELETION_SUCCESSFUL}),
}
_OUTCOMES = {OUTCOME_OK, OUTCOME_INVALID, OUTCOME_FAILED}
State = PartitionState | ReplicaState
K = TypeVar("K")


def not_preferred(assignment: ReplicaAssignment, leader_and_isr: LeaderAndIsr) -> bool:
    """docs/controller-behaviour.md §5.5, written again here so the counter is checked against an
    independent reading."""
    if not assignment.replicas:
        return False
    preferred = assignment.replicas[0]
    if preferred in assignment.adding_replicas:  # so the assignment is being reassigned
        return preferred in leader_and_isr.isr  # imbalanced once it joined the ISR
    return leader_and_isr.leader != preferred


class InvariantChecker:
    """Tracks one harness across steps; ``check`` returns the violations of the last step."""

    def __init__(self, harness: CoreHarness, broker_defaults: Mapping[str, str] | None = None) -> None:
        if not isinstance(harness.audit, RecordingAuditSink):
            raise TypeError("the checker reads the audit trail: the harness needs a RecordingAuditSink")
        self.harness = harness
        self.audit: RecordingAuditSink = harness.audit
        self.broker_defaults = dict(broker_defaults or {})
        self.last_epoch: dict[TopicPartition, int] = {}
        self.last_zk_version: dict[TopicPartition, int] = {}
        self.last_seen: dict[TopicPartition, LeaderAndIsr] = {}
        self._audit_cursor = len(self.audit.records)  # history before the checker is taken as given
        #: What the last step's audit trail held: outcome -> count, plus "unclean" elections.
        self.step_summary: dict[str, int] = {}
        #: Replicas still in their partition's ISR only because they went offline as its last
        #: member (KAFKA-5083). A reassignment can then drop them from the replicas, or re-add one
        #: and find itself complete at once (skipping NewReplica), leaving a leader with no replica
        #: state; both are Kafka 2.8's behaviour (see test_core_harness), so they are tolerated
        #: for these replicas only.
        self.remnants: set[PartitionAndReplica] = set()
        self._unclean_count = harness.context.stats.unclean_leader_elections
        self._partition_states: dict[TopicPartition, PartitionState] = {}
        self._replica_states: dict[PartitionAndReplica, ReplicaState] = {}
        self._snapshot_states()

    # ------------------------------------------------------------------------------ entry point
    def check(self, forced_unclean: Collection[TopicPartition] = ()) -> list[str]:
        """All invariants after one step. ``forced_unclean``: partitions an unclean election was
        requested for in this step (they may get an unclean leader whatever their topic config)."""
        h, ctx = self.harness, self.harness.context
        out: list[str] = []
        records = self.audit.records[self._audit_cursor :]
        topics = sorted(ctx.partition_assignments)
        stored = h.store.get_replica_assignment_and_topic_ids(topics)
        tps = ctx.all_partitions
        reads = h.store.get_partition_states(tps)
        configs, failures = h.store.get_log_configs(topics, self.broker_defaults)
        for r in records:  # KAFKA-5083: went offline as the only ISR member, and stayed in it
            if (
                isinstance(r, ReplicaTransition)
                and r.outcome == OUTCOME_OK
                and r.to_state == ReplicaState.OFFLINE_REPLICA.kafka_name
                and r.isr_after == (r.replica,)
            ):
                self.remnants.add(PartitionAndReplica(TopicPartition(r.topic, r.partition), r.replica))
        out += [f"config of topic {t} unreadable: {e}" for t, e in failures.items()]
        unclean_topics = {t for t, c in configs.items() if c.get(UNCLEAN_LEADER_ELECTION_ENABLE) == "true"}

        out += self._check_assignments(stored)
        states: dict[TopicPartition, LeaderAndIsr] = {}
        for tp in tps:
            read = reads.get(tp)
            if isinstance(read, LeaderIsrAndControllerEpoch):
                states[tp] = read.leader_and_isr
                out += self._check_partition(tp, read, stored)
            elif read is not None:
                out.append(f"{tp}: state znode unreadable: {read!r}")
        out += self._check_audit(records, unclean_topics, set(forced_unclean))
        out += self._check_leader_changes(states, records)
        out += self._check_context(reads)
        out += self._check_counters()

        self._audit_cursor += len(records)
        self.remnants = {pr for pr in self.remnants if self._still_remnant(pr, states)}
        self._unclean_count = ctx.stats.unclean_leader_elections
        for tp, lai in states.items():
            self.last_epoch[tp] = max(lai.leader_epoch, self.last_epoch.get(tp, lai.leader_epoch))
            self.last_zk_version[tp] = max(lai.zk_version, self.last_zk_version.get(tp, lai.zk_version))
            self.last_seen[tp] = lai
        self._snapshot_states()
        return out

    def _still_remnant(self, pr: PartitionAndReplica, states: Mapping[TopicPartition, LeaderAndIsr]) -> bool:
        """Still in the ISR, or re-added as a replica that never got a replica state."""
        ctx = self.harness.context
        lai = states.get(pr.topic_partition)
        if lai is not None and pr.replica in lai.isr:
            return True
        stateless = (
            ctx.replica_states.get(pr, ReplicaState.NON_EXISTENT_REPLICA) is ReplicaState.NON_EXISTENT_REPLICA
        )
        return stateless and pr.replica in ctx.partition_replica_assignment(pr.topic_partition)

    def _snapshot_states(self) -> None:
        ctx = self.harness.context
        self._partition_states = dict(ctx.partition_states)
        self._replica_states = dict(ctx.replica_states)

    # ------------------------------------------------------------------------------ store
    def _check_assignments(self, stored: Mapping[str, TopicIdReplicaAssignment | Exception]) -> list[str]:
        ctx = self.harness.context
        out = []
        for topic in ctx.partition_assignments:
            znode = stored.get(topic)
            if not isinstance(znode, TopicIdReplicaAssignment):
                out.append(f"topic {topic}: znode unreadable or missing: {znode!r}")
            elif dict(znode.assignment) != ctx.partition_full_replica_assignment_for_topic(topic):
                out.append(f"topic {topic}: context assignment differs from the store's")
        return out

    def _check_partition(
        self,
        tp: TopicPartition,
        read: LeaderIsrAndControllerEpoch,
        stored: Mapping[str, TopicIdReplicaAssignment | Exception],
    ) -> list[str]:
        lai = read.leader_and_isr
        out = []
        if lai.leader != NO_LEADER and lai.leader not in lai.isr:
            out.append(f"{tp}: leader {lai.leader} is not in the ISR {list(lai.isr)}")
        if not lai.isr:  # KAFKA-5083: the last member always stays
            out.append(f"{tp}: the ISR is empty")
        znode = stored.get(tp.topic)
        if isinstance(znode, TopicIdReplicaAssignment):
            replicas = znode.assignment.get(tp, ReplicaAssignment(())).replicas
            # The one exception is Kafka's: a replica taken offline as the last ISR member stays in
            # the ISR (KAFKA-5083), also after a reassignment drops it from the replicas.
            outside = [
                r for r in lai.isr if r not in replicas and PartitionAndReplica(tp, r) not in self.remnants
            ]
            if outside:
                out.append(f"{tp}: ISR {list(lai.isr)} is not within the replicas {list(replicas)}")
        last_epoch = self.last_epoch.get(tp)
        if last_epoch is not None and lai.leader_epoch < last_epoch:
            out.append(f"{tp}: leader epoch went down from {last_epoch} to {lai.leader_epoch}")
        last_version = self.last_zk_version.get(tp)
        if last_version is not None and lai.zk_version < last_version:
            out.append(f"{tp}: zk version went down from {last_version} to {lai.zk_version}")
        if read.controller_epoch > self.harness.context.epoch:
            out.append(f"{tp}: written by controller epoch {read.controller_epoch}, newer than ours")
        return out

    def _check_leader_changes(
        self, states: Mapping[TopicPartition, LeaderAndIsr], records: Sequence[AuditRecord]
    ) -> list[str]:
        """A leader that was not in the last ISR seen needs an audited election that explains it:
        either elected from an ISR that held it (the ISR grew in this step) or flagged unclean."""
        out = []
        elections: dict[TopicPartition, list[PartitionTransition]] = {}
        for r in records:
            if isinstance(r, PartitionTransition) and r.outcome == OUTCOME_OK and r.election_strategy:
                elections.setdefault(TopicPartition(r.topic, r.partition), []).append(r)
        for tp, lai in states.items():
            before = self.last_seen.get(tp)
            if before is None or lai.leader in (NO_LEADER, before.leader) or lai.leader in before.isr:
                continue
            explained = any(
                r.leader_after == lai.leader and (r.unclean or lai.leader in (r.isr_before or ()))
                for r in elections.get(tp, ())
            )
            if not explained:
                out.append(
                    f"{tp}: leader moved {before.leader} -> {lai.leader}, outside the ISR "
                    f"{list(before.isr)}, with no audited election to explain it"
                )
        return out

    # ------------------------------------------------------------------------------ audit trail
    def _check_audit(
        self, records: Sequence[AuditRecord], unclean_topics: set[str], forced: set[TopicPartition]
    ) -> list[str]:
        """Each record is a consistent link from the state before it; replaying the "ok" ones over
        the previous snapshot must give exactly the context's states now."""
        ctx = self.harness.context
        out: list[str] = []
        partitions = dict(self._partition_states)
        replicas = dict(self._replica_states)
        unclean_marked = 0
        summary: dict[str, int] = {}
        self.step_summary = summary
        for r in records:
            if not isinstance(r, PartitionTransition | ReplicaTransition):
                out.append(f"unexpected audit record {r!r}")
                continue
            summary[r.outcome] = summary.get(r.outcome, 0) + 1
            if isinstance(r, PartitionTransition):
                tp = TopicPartition(r.topic, r.partition)
                current: State = partitions.get(tp, PartitionState.NON_EXISTENT_PARTITION)
                to, problems = _link(f"partition {tp}", current, r, _PARTITION_STATES)
                out += problems
                if isinstance(to, PartitionState):
                    partitions[tp] = to
                    unclean_marked += r.unclean
                    out += self._check_election_record(tp, r, unclean_topics, forced)
            else:
                pr = PartitionAndReplica(TopicPartition(r.topic, r.partition), r.replica)
                current = replicas.get(pr, ReplicaState.NON_EXISTENT_REPLICA)
                to, problems = _link(f"replica {pr}", current, r, _REPLICA_STATES)
                out += problems
                if to is ReplicaState.NON_EXISTENT_REPLICA:
                    replicas.pop(pr, None)
                elif isinstance(to, ReplicaState):
                    replicas[pr] = to
        out += _compare_states(
            "partition", partitions, ctx.partition_states, PartitionState.NON_EXISTENT_PARTITION
        )
        out += _compare_states("replica", replicas, ctx.replica_states, ReplicaState.NON_EXISTENT_REPLICA)
        summary["unclean"] = unclean_marked
        marked = ctx.stats.unclean_leader_elections - self._unclean_count
        if marked != unclean_marked:
            out.append(
                f"unclean election meter moved by {marked}, audited unclean elections: {unclean_marked}"
            )
        return out

    @staticmethod
    def _check_election_record(
        tp: TopicPartition, r: PartitionTransition, unclean_topics: set[str], forced: set[TopicPartition]
    ) -> list[str]:
        if not r.election_strategy or r.leader_after in (None, NO_LEADER):
            return []
        out = []
        outside = r.leader_after not in (r.isr_before or ())
        if outside and not r.unclean:
            out.append(
                f"{tp}: leader {r.leader_after} elected outside ISR {r.isr_before} but not flagged unclean"
            )
        if r.unclean:
            if not outside:
                out.append(f"{tp}: election flagged unclean although {r.leader_after} was in the ISR")
            if tp.topic not in unclean_topics and tp not in forced:
                out.append(f"{tp}: unclean leader {r.leader_after} although unclean election is disabled")
            if r.isr_after != (r.leader_after,):
                out.append(f"{tp}: unclean election left ISR {r.isr_after}, expected [{r.leader_after}]")
        return out

    # ------------------------------------------------------------------------------ context
    def _check_context(self, reads: Mapping[TopicPartition, object]) -> list[str]:
        ctx = self.harness.context
        out = []
        for tp, info in ctx.partitions_leadership_info.items():
            lai = info.leader_and_isr
            if lai.leader != NO_LEADER and lai.leader not in lai.isr:
                out.append(f"{tp}: cached leader {lai.leader} is not in the cached ISR {list(lai.isr)}")
        for tp, state in ctx.partition_states.items():
            if state is not PartitionState.ONLINE_PARTITION:
                continue
            cached, read = ctx.partition_leadership_info(tp), reads.get(tp)
            if cached != read:
                out.append(f"{tp}: Online, but the context has {cached} and the store {read}")
        return out

    def _check_counters(self) -> list[str]:
        ctx = self.harness.context
        out = []
        offline = sum(
            1
            for tp, s in ctx.partition_states.items()
            if s is PartitionState.OFFLINE_PARTITION and tp.topic not in ctx.topics_with_deletion_started
        )
        if ctx.offline_partition_count != offline:
            out.append(f"offline_partition_count is {ctx.offline_partition_count}, recomputed {offline}")
        imbalance = 0
        for tp, info in ctx.partitions_leadership_info.items():
            if tp.topic in ctx.topics_to_be_deleted:
                continue
            assignment = ctx.partition_full_replica_assignment(tp)
            imbalance += not_preferred(assignment, info.leader_and_isr)
        if ctx.preferred_replica_imbalance_count != imbalance:
            out.append(
                f"preferred_replica_imbalance_count is {ctx.preferred_replica_imbalance_count}, "
                f"recomputed {imbalance}"
            )
        return out


def _link(
    where: str, current: State, r: PartitionTransition | ReplicaTransition, names: Mapping[str, State]
) -> tuple[State | None, list[str]]:
    """One record against the replayed state: its problems, and the state it moves to if "ok"."""
    frm, to = names.get(r.from_state), names.get(r.to_state)
    if frm is None or to is None or r.outcome not in _OUTCOMES:
        return None, [f"{where}: malformed audit record {r.from_state} -> {r.to_state} ({r.outcome})"]
    out = []
    if frm is not current:
        out.append(f"{where}: audit record says {frm} -> {to} but the replayed state was {current}")
    valid = frm in SPEC_VALID_PREVIOUS[to]
    if r.outcome == OUTCOME_OK and not valid:
        out.append(f"{where}: invalid transition {frm} -> {to} recorded as ok")
    if r.outcome == OUTCOME_INVALID and valid:
        out.append(f"{where}: valid transition {frm} -> {to} recorded as invalid")
    return (to if r.outcome == OUTCOME_OK else None), out


def _compare_states(
    kind: str, replayed: Mapping[K, State], actual: Mapping[K, State], absent: State
) -> list[str]:
    """Equal up to explicit "non-existent" entries, which both machines may or may not keep."""
    out = []
    for key in replayed.keys() | actual.keys():
        want, got = replayed.get(key, absent), actual.get(key, absent)
        if want is not got:
            out.append(f"{kind} {key}: state is {got}, but the audited transitions lead to {want}")
    return out
