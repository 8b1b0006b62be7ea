"""Leader election: the pure algorithms and the per-partition wrappers
(docs/controller-behaviour.md §2.2, §2.3).

The algorithms take plain ints and return a choice; they touch no context, config or metrics
(docs/rules.md, decisions are pure). The wrappers (Kafka's ``Election`` object) add what depends on
the context: which replicas count as live, the new ISR, the recipients of the LeaderAndIsr, and the
unclean-election meter. Each wrapper takes a whole batch so that the liveness snapshot is built once
per batch, not once per partition.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from kafka_controller.core.context import ControllerContext
from kafka_controller.domain.values import LeaderAndIsr, TopicPartition

__all__ = [
    "ElectionDecision",
    "ElectionResult",
    "LiveReplicaFilter",
    "controlled_shutdown_partition_leader_election",
    "leader_for_controlled_shutdown",
    "leader_for_offline",
    "leader_for_preferred_replica",
    "leader_for_reassign",
    "offline_election_decisions",
    "offline_partition_leader_election",
    "preferred_replica_partition_leader_election",
    "reassign_partition_leader_election",
]


# --------------------------------------------------------------------------- pure algorithms
def offline_partition_leader_election(
    assignment: Sequence[int],
    isr: Collection[int],
    live_replicas: Collection[int],
    unclean_leader_election_enabled: bool,
) -> tuple[int | None, bool]:
    """First live ISR member in assignment order; else, if allowed, the first live replica.

    Returns ``(leader, unclean)``: ``unclean`` is true only when an unclean leader was actually
    found, which is when Kafka marks ``UncleanLeaderElectionsPerSec``; the caller marks the meter.
    """
    for replica in assignment:
        if replica in live_replicas and replica in isr:
            return replica, False
    if unclean_leader_election_enabled:
        for replica in assignment:
            if replica in live_replicas:
                return replica, True
    return None, False


def reassign_partition_leader_election(
    reassignment: Sequence[int], isr: Collection[int], live_replicas: Collection[int]
) -> int | None:
    """First replica of the target assignment that is live and in the ISR."""
    for replica in reassignment:
        if replica in live_replicas and replica in isr:
            return replica
    return None


def preferred_replica_partition_leader_election(
    assignment: Sequence[int], isr: Collection[int], live_replicas: Collection[int]
) -> int | None:
    """The preferred replica (``assignment[0]``) if it is live and in the ISR; never a fallback."""
    if not assignment:
        return None
    preferred = assignment[0]
    if preferred in live_replicas and preferred in isr:
        return preferred
    return None


def controlled_shutdown_partition_leader_election(
    assignment: Sequence[int],
    isr: Collection[int],
    live_replicas: Collection[int],
    shutting_down_brokers: Collection[int],
) -> int | None:
    """First replica that is live, in the ISR and not on a broker that is shutting down."""
    for replica in assignment:
        if replica in live_replicas and replica in isr and replica not in shutting_down_brokers:
            return replica
    return None


# --------------------------------------------------------------------------- liveness snapshot
class LiveReplicaFilter:
    """``ctx.is_replica_online`` for a whole batch, with the broker sets read once.

    The event thread is the only writer of the context, so liveness cannot change during one
    state-machine call; snapshotting it avoids a method call and a set rebuild per replica.
    """

    __slots__ = ("_ids", "_offline_dirs")

    def __init__(self, ctx: ControllerContext, include_shutting_down_brokers: bool = False) -> None:
        self._ids: set[int] = (
            ctx.live_or_shutting_down_broker_ids if include_shutting_down_brokers else ctx.live_broker_ids
        )
        self._offline_dirs = {b: tps for b, tps in ctx.replicas_on_offline_dirs.items() if tps}

    @property
    def has_offline_dirs(self) -> bool:
        return bool(self._offline_dirs)

    @property
    def broker_ids(self) -> set[int]:
        """The brokers counted as live; alone decisive when ``has_offline_dirs`` is false."""
        return self._ids

    def is_online(self, replica: int, tp: TopicPartition) -> bool:
        if replica not in self._ids:
            return False
        offline = self._offline_dirs.get(replica)
        return offline is None or tp not in offline

    def filter(self, replicas: Sequence[int], tp: TopicPartition) -> tuple[int, ...]:
        """The online members of ``replicas``, order kept."""
        ids = self._ids
        if not self._offline_dirs:
            return tuple([r for r in replicas if r in ids])
        is_online = self.is_online
        return tuple([r for r in replicas if is_online(r, tp)])

    def any_online(self, replicas: Sequence[int], tp: TopicPartition) -> bool:
        if not self._offline_dirs:
            return not self._ids.isdisjoint(replicas)
        is_online = self.is_online
        return any(is_online(r, tp) for r in replicas)


# --------------------------------------------------------------------------- wrappers
@dataclass(frozen=True, slots=True)
class ElectionResult:
    """One partition's election: the new LeaderAndIsr (``None`` = no leader) and its recipients.

    ``live_replicas`` is Kafka's name for the brokers that get the LeaderAndIsr if the write
    succeeds; which brokers those are depends on the strategy (docs/controller-behaviour.md §2.3).
    """

    topic_partition: TopicPartition
    leader_and_isr: LeaderAndIsr | None
    live_replicas: tuple[int, ...]
    unclean: bool = False


#: What the partition state machine consumes: ``(tp, new LeaderAndIsr or None, recipients, unclean)``.
#: A plain tuple, because the hot path builds 100,000 of them per second.
ElectionDecision = tuple[TopicPartition, LeaderAndIsr | None, tuple[int, ...], bool]


def offline_election_decisions(
    ctx: ControllerContext,
    partitions_with_unclean_state: Sequence[tuple[TopicPartition, LeaderAndIsr | None, bool]],
) -> list[ElectionDecision]:
    """``leader_for_offline`` as plain tuples, for the state machine's hot path.

    Without offline log dirs, liveness depends only on the broker id, so the choice depends only
    on (assignment, ISR, unclean flag); it is computed once per distinct combination, of which a
    cluster has few, and reused across the batch.
    """
    live = LiveReplicaFilter(ctx)
    assignments = ctx.partition_assignments
    mark_unclean = ctx.stats.mark_unclean_leader_election
    memo: dict[tuple[tuple[int, ...], tuple[int, ...], bool], _OfflineChoice] | None = (
        None if live.has_offline_dirs else {}
    )
    decisions: list[ElectionDecision] = []
    append = decisions.append
    for tp, leader_and_isr, unclean_enabled in partitions_with_unclean_state:
        # ctx.partition_replica_assignment(tp), inlined: this loop runs once per partition.
        per_topic = assignments.get(tp.topic)
        full = per_topic.get(tp.partition) if per_topic is not None else None
        assignment = full.replicas if full is not None else ()
        if leader_and_isr is None:
            append((tp, None, live.filter(assignment, tp), False))
            continue
        isr = leader_and_isr.isr
        choice: _OfflineChoice | None
        if memo is None:
            choice = _offline_choice(live, tp, assignment, isr, unclean_enabled)
        else:
            key = (assignment, isr, unclean_enabled)
            choice = memo.get(key)
            if choice is None:
                choice = memo[key] = _offline_choice(live, tp, assignment, isr, unclean_enabled)
        leader, new_isr, live_replicas, unclean = choice
        if leader is None:
            append((tp, None, live_replicas, False))
            continue
        if unclean:
            mark_unclean()
        append((tp, leader_and_isr.new_leader_and_isr(leader, new_isr), live_replicas, unclean))
    return decisions


_OfflineChoice = tuple[int | None, tuple[int, ...], tuple[int, ...], bool]


def _offline_choice(
    live: LiveReplicaFilter,
    tp: TopicPartition,
    assignment: tuple[int, ...],
    isr: tuple[int, ...],
    unclean_enabled: bool,
) -> _OfflineChoice:
    """(leader, new ISR, recipients, unclean): the ISR keeps its online members, or is ``[leader]``."""
    live_replicas = live.filter(assignment, tp)
    leader, unclean = offline_partition_leader_election(assignment, isr, live_replicas, unclean_enabled)
    if leader is None:
        return None, (), live_replicas, False
    new_isr = live.filter(isr, tp) if leader in isr else (leader,)
    return leader, new_isr, live_replicas, unclean


def leader_for_offline(
    ctx: ControllerContext,
    partitions_with_unclean_state: Sequence[tuple[TopicPartition, LeaderAndIsr | None, bool]],
) -> list[ElectionResult]:
    """Offline election over the full RS; the new ISR is the online old ISR, or ``[leader]`` if unclean.

    ``None`` as the current LeaderAndIsr (its topic config could not be read) gives no leader.
    Marks ``ctx.stats`` once per unclean leader found. Recipients: the online replicas only.
    """
    return [ElectionResult(*d) for d in offline_election_decisions(ctx, partitions_with_unclean_state)]


def leader_for_reassign(
    ctx: ControllerContext, leader_and_isrs: Sequence[tuple[TopicPartition, LeaderAndIsr]]
) -> list[ElectionResult]:
    """Elect from the target replicas (TRS); ISR unchanged; recipients are all of TRS, dead ones too."""
    live = LiveReplicaFilter(ctx)
    full_assignment_of = ctx.partition_full_replica_assignment
    results: list[ElectionResult] = []
    for tp, leader_and_isr in leader_and_isrs:
        target = full_assignment_of(tp).target_replicas
        leader = reassign_partition_leader_election(target, leader_and_isr.isr, live.filter(target, tp))
        new = None if leader is None else leader_and_isr.new_leader(leader)
        results.append(ElectionResult(tp, new, target))
    return results


def leader_for_preferred_replica(
    ctx: ControllerContext, leader_and_isrs: Sequence[tuple[TopicPartition, LeaderAndIsr]]
) -> list[ElectionResult]:
    """Elect ``RS[0]`` if it is online and in the ISR; ISR unchanged; recipients are all of RS."""
    live = LiveReplicaFilter(ctx)
    assignment_of = ctx.partition_replica_assignment
    results: list[ElectionResult] = []
    for tp, leader_and_isr in leader_and_isrs:
        assignment = assignment_of(tp)
        leader = preferred_replica_partition_leader_election(
            assignment, leader_and_isr.isr, live.filter(assignment, tp)
        )
        new = None if leader is None else leader_and_isr.new_leader(leader)
        results.append(ElectionResult(tp, new, assignment))
    return results


def leader_for_controlled_shutdown(
    ctx: ControllerContext, leader_and_isrs: Sequence[tuple[TopicPartition, LeaderAndIsr]]
) -> list[ElectionResult]:
    """Move leadership off shutting-down brokers; the new ISR drops *every* shutting-down broker.

    Recipients are the live-or-shutting-down replicas, so the broker going down also learns its
    new role (KAFKA-7482). The shutting-down set is read once for the batch.
    """
    live_or_shutting_down = LiveReplicaFilter(ctx, include_shutting_down_brokers=True)
    shutting_down = frozenset(ctx.shutting_down_broker_ids)
    assignment_of = ctx.partition_replica_assignment
    results: list[ElectionResult] = []
    for tp, leader_and_isr in leader_and_isrs:
        assignment = assignment_of(tp)
        recipients = live_or_shutting_down.filter(assignment, tp)
        isr = leader_and_isr.isr
        leader = controlled_shutdown_partition_leader_election(assignment, isr, recipients, shutting_down)
        if leader is None:
            results.append(ElectionResult(tp, None, recipients))
            continue
        new_isr = [r for r in isr if r not in shutting_down]
        results.append(ElectionResult(tp, leader_and_isr.new_leader_and_isr(leader, new_isr), recipients))
    return results
