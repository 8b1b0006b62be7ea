"""The per-partition request states of ``ControllerBrokerRequestBatch``, built for large batches.

A failover builds 100,000 LeaderAndIsr and 100,000 UpdateMetadata states in one call; these
functions build them positionally (``domain.requests``' hot-path constructors), unpacking the
leadership tuples rather than reading their fields one by one.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from itertools import chain, compress, repeat
from operator import is_not
from typing import cast

from kafka_controller.core.batch_api import LeaderAndIsrEntry
from kafka_controller.core.context import ControllerContext
from kafka_controller.core.replica_runs import ReplicaRuns
from kafka_controller.domain.requests import (
    LeaderAndIsrPartitionState,
    UpdateMetadataPartitionState,
    build_update_metadata_partition_state,
)
from kafka_controller.domain.values import (
    EMPTY_ASSIGNMENT,
    LEADER_DURING_DELETE,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
    TopicPartition,
)
from kafka_controller.hotpath import new_tuple, values_at

__all__ = [
    "OfflineReplicas",
    "fill_broker_maps",
    "isr_removal_states",
    "leader_and_isr_and_metadata_states",
    "leader_and_isr_state",
    "online_replica_states",
    "queue_distinct_partitions",
    "update_metadata_states_like",
]


class OfflineReplicas:
    """A partition's offline replicas (dead broker, or its log dir offline) for UpdateMetadata,
    from ``ctx`` as it is now: with no offline log dir, computed once per distinct replica list
    (a few at 100,000 partitions), since the partition then does not matter.

    ``of_replicas`` is that case's lookup, a dict's own ``__getitem__`` (None when a log dir is
    offline): the loops over 100,000 partitions call it without a Python frame per partition."""

    def __init__(self, ctx: ControllerContext) -> None:
        self._live = ctx.live_broker_ids
        self._offline_dirs = ctx.replicas_on_offline_dirs
        self._by_replicas = _OfflineByReplicas(self._live)
        self.of_replicas: Callable[[tuple[int, ...]], tuple[int, ...]] | None = (
            None if self._offline_dirs else self._by_replicas.__getitem__
        )

    def __call__(self, tp: TopicPartition, replicas: tuple[int, ...]) -> tuple[int, ...]:
        live, offline_dirs = self._live, self._offline_dirs
        if offline_dirs:
            return tuple([r for r in replicas if r not in live or tp in offline_dirs.get(r, ())])
        return self._by_replicas[replicas]


class _OfflineByReplicas(dict[tuple[int, ...], tuple[int, ...]]):
    """Replica list -> its replicas on dead brokers, each computed on first lookup."""

    def __init__(self, live: Collection[int]) -> None:
        super().__init__()
        self._live = live

    def __missing__(self, replicas: tuple[int, ...]) -> tuple[int, ...]:
        offline = self[replicas] = tuple([r for r in replicas if r not in self._live])
        return offline


def leader_and_isr_state(
    tp: TopicPartition,
    leader_isr_and_controller_epoch: LeaderIsrAndControllerEpoch,
    assignment: ReplicaAssignment,
    is_new: bool,
) -> LeaderAndIsrPartitionState:
    topic, partition = tp
    (leader, leader_epoch, isr, zk_version), controller_epoch = leader_isr_and_controller_epoch
    # build_leader_and_isr_partition_state's tuple, without its call (180,000 per failover)
    return new_tuple(
        LeaderAndIsrPartitionState,
        (
            topic, partition, controller_epoch, leader, leader_epoch, isr, zk_version,
            assignment.replicas, assignment.adding_replicas, assignment.removing_replicas, is_new,
        ),
    )  # fmt: skip


def leader_and_isr_states(
    partitions: Iterable[TopicPartition],
    leadership: Mapping[TopicPartition, LeaderIsrAndControllerEpoch],
    assignments: Mapping[str, Mapping[int, ReplicaAssignment]],
    is_new: bool,
) -> dict[TopicPartition, LeaderAndIsrPartitionState]:
    """``{tp: leader_and_isr_state(tp, leadership[tp], assignment, is_new)}`` with each partition's
    assignment from ``assignments`` (the context's, ``ControllerContext.partition_assignments``)
    as ``partition_full_replica_assignment`` finds it: the OnlineReplica phase's 100,000 states
    in one loop, without two Python calls per partition. Partitions come topic by topic, so a
    topic's assignments are looked up once."""
    return _states(partitions, leadership, assignments, is_new, None)[0]


def leader_and_isr_and_metadata_states(
    ctx: ControllerContext,
    partitions: Iterable[TopicPartition],
    is_new: bool,
    queued: dict[TopicPartition, UpdateMetadataPartitionState],
) -> dict[TopicPartition, LeaderAndIsrPartitionState]:
    """``leader_and_isr_states`` from ``ctx``'s leadership and assignments, then
    ``update_metadata_states_like`` of them into ``queued``, in one pass over the partitions when
    no topic is queued for deletion and no log dir is offline (the OnlineReplica phase's 100,000):
    the same states, in the same order, without a second loop re-reading each state's fields."""
    leadership = ctx.partitions_leadership_info
    assignments = ctx.partition_assignments
    of_replicas = OfflineReplicas(ctx).of_replicas
    if of_replicas is None or ctx.topics_to_be_deleted:
        states = leader_and_isr_states(partitions, leadership, assignments, is_new)
        update_metadata_states_like(ctx, states, queued)
        return states
    states, metadata = _states(partitions, leadership, assignments, is_new, of_replicas)
    queued.update(metadata)  # once all are built: a failure mid-loop queues nothing
    return states


def _states(
    partitions: Iterable[TopicPartition],
    leadership: Mapping[TopicPartition, LeaderIsrAndControllerEpoch],
    assignments: Mapping[str, Mapping[int, ReplicaAssignment]],
    is_new: bool,
    of_replicas: Callable[[tuple[int, ...]], tuple[int, ...]] | None,
) -> tuple[
    dict[TopicPartition, LeaderAndIsrPartitionState], dict[TopicPartition, UpdateMetadataPartitionState]
]:
    """The loop of both functions above: the LeaderAndIsr states and, given ``of_replicas`` (the
    offline replicas of a replica list), the UpdateMetadata states of the same partitions."""
    states: dict[TopicPartition, LeaderAndIsrPartitionState] = {}
    metadata: dict[TopicPartition, UpdateMetadataPartitionState] = {}
    last_topic: str | None = None
    per_topic: Mapping[int, ReplicaAssignment] = {}
    for tp in partitions:
        topic, partition = tp
        if topic != last_topic:
            last_topic = topic
            per_topic = assignments.get(topic) or {}
        a = per_topic.get(partition, EMPTY_ASSIGNMENT)
        (leader, leader_epoch, isr, zk_version), controller_epoch = leadership[tp]
        replicas = a.replicas
        states[tp] = new_tuple(
            LeaderAndIsrPartitionState,
            (
                topic, partition, controller_epoch, leader, leader_epoch, isr, zk_version,
                replicas, a.adding_replicas, a.removing_replicas, is_new,
            ),
        )  # fmt: skip
        if of_replicas is not None:
            metadata[tp] = new_tuple(
                UpdateMetadataPartitionState,
                (
                    topic, partition, controller_epoch, leader, leader_epoch, isr, zk_version,
                    replicas, of_replicas(replicas),
                ),
            )  # fmt: skip
    return states, metadata


def online_replica_states(
    ctx: ControllerContext,
    runs: ReplicaRuns,
    skip: Collection[TopicPartition],
    of_replicas: Callable[[tuple[int, ...]], tuple[int, ...]],
    is_new: bool,
) -> tuple[
    list[tuple[int, dict[TopicPartition, LeaderAndIsrPartitionState]]],
    list[tuple[TopicPartition, UpdateMetadataPartitionState]],
]:
    """The queues ``add_leader_and_isr_requests_by_broker`` fills (LeaderAndIsr from ``ctx``'s
    leadership and assignments, no topic queued for deletion, no log dir offline) for the replicas
    of ``runs`` grouped by replica id, each group's partitions those led in ``ctx`` and not in
    ``skip``, built run by run (``core.replica_runs``) instead of replica by replica: each
    partition is looked up, tested and built once, however many of its replicas there are (a
    failover's OnlineReplica move: 240,000 replicas of 100,000 partitions at RF 3), and each
    group's map is made from its runs' states by position, in C.

    Returns each replica id's LeaderAndIsr map, in order of the id's first appearance, with its
    partitions in the order of its replicas (ids without a partition and negative ids left out),
    and the UpdateMetadata states in the grouped calls' order: the first group's partitions, then
    the second group's not in the first, and so on (``ReplicaRuns.runs_by_first_group``).

    A partition met again in a later run is built again, equal, and the maps keep its first
    place, as ``dict.fromkeys`` of the groups and the per-group maps do."""
    leadership = ctx.partitions_leadership_info
    assignments = ctx.partition_assignments
    skip = skip or ()  # nothing skipped: no hash per partition
    states: list[LeaderAndIsrPartitionState | None] = []
    metadata: list[tuple[TopicPartition, UpdateMetadataPartitionState] | None] = []
    last_topic: str | None = None
    per_topic: Mapping[int, ReplicaAssignment] = {}
    for tp in runs.partitions:
        info = leadership.get(tp)
        if info is None or tp in skip:
            states.append(None)
            metadata.append(None)
            continue
        topic, partition = tp
        if topic != last_topic:
            last_topic = topic
            per_topic = assignments.get(topic) or {}
        a = per_topic.get(partition, EMPTY_ASSIGNMENT)
        (leader, leader_epoch, isr, zk_version), controller_epoch = info
        replicas_of = a.replicas
        states.append(
            new_tuple(
                LeaderAndIsrPartitionState,
                (
                    topic, partition, controller_epoch, leader, leader_epoch, isr, zk_version,
                    replicas_of, a.adding_replicas, a.removing_replicas, is_new,
                ),
            )
        )  # fmt: skip
        metadata.append(
            (
                tp,
                new_tuple(
                    UpdateMetadataPartitionState,
                    (
                        topic, partition, controller_epoch, leader, leader_epoch, isr, zk_version,
                        replicas_of, of_replicas(replicas_of),
                    ),
                ),
            )
        )  # fmt: skip
    partitions = runs.partitions
    by_broker: list[tuple[int, dict[TopicPartition, LeaderAndIsrPartitionState]]] = []
    for replica_id, group in runs.groups:
        if replica_id < 0:
            continue
        told = list(values_at(states, group))
        entries = zip(values_at(partitions, group), told, strict=True)
        m = cast(
            "dict[TopicPartition, LeaderAndIsrPartitionState]",  # the Nones left out
            dict(compress(entries, map(is_not, told, repeat(None)))),
        )
        if m:
            by_broker.append((replica_id, m))
    queued = filter(None, values_at(metadata, chain.from_iterable(runs.runs_by_first_group)))
    return by_broker, list(queued)


def update_metadata_states_like(
    ctx: ControllerContext,
    states: Mapping[TopicPartition, LeaderAndIsrPartitionState],
    queued: dict[TopicPartition, UpdateMetadataPartitionState],
) -> None:
    """Queue in ``queued`` the UpdateMetadata states of partitions whose LeaderAndIsr ``states``
    were just built from ``ctx``'s leadership and assignment, as the batch builds them from
    ``ctx``: the first eight fields (topic to replicas) are the same, so only the offline
    replicas and the deletion marker are left to find."""
    deleting = ctx.topics_to_be_deleted
    offline_replicas = OfflineReplicas(ctx)
    of_replicas = offline_replicas.of_replicas
    for tp, state in states.items():
        replicas = state.replicas
        offline = offline_replicas(tp, replicas) if of_replicas is None else of_replicas(replicas)
        if state.topic in deleting:  # LeaderAndIsr.duringDelete(isr): leader -2, epoch 0, version 0
            topic, partition, controller_epoch, _, _, isr, _, _ = state[:8]
            queued[tp] = build_update_metadata_partition_state(
                topic, partition, controller_epoch, LEADER_DURING_DELETE, 0, isr, 0, replicas, offline
            )
        else:  # the state's first eight fields and the offline replicas
            queued[tp] = new_tuple(UpdateMetadataPartitionState, state[:8] + (offline,))  # noqa: RUF005 (2x faster)


def queue_distinct_partitions(
    ctx: ControllerContext,
    requests: dict[int, dict[TopicPartition, LeaderAndIsrPartitionState]],
    queued: dict[TopicPartition, UpdateMetadataPartitionState],
    entries: Sequence[LeaderAndIsrEntry],
    is_new: bool,
) -> list[TopicPartition] | None:
    """``ControllerBrokerRequestBatch.add_leader_and_isr_requests`` when no partition has two
    entries (the election's 20,000 of a failover; the ISR removal's are built without entries, by
    ``isr_removal_states``): each LeaderAndIsr state built once, with no memo, then each broker's
    map in ``requests`` filled in one pass, in entry order, as the entry loop fills it; in the
    same pass, each partition's UpdateMetadata state queued in ``queued``, from ``ctx``'s
    leadership and assignment as the batch builds it (``_queue_update_metadata_states``).
    Returns the partitions with no leadership in ``ctx`` (no UpdateMetadata state); or None when a
    partition repeats, with no LeaderAndIsr state queued and the UpdateMetadata states of the
    entries before it queued, which the entry loop then queues again, equal and in the same places.

    The entries' leadership is usually the one just cached in ``ctx``: its fields, unpacked for
    the LeaderAndIsr state, are then the UpdateMetadata state's too."""
    leadership = ctx.partitions_leadership_info
    assignments = ctx.partition_assignments
    deleting = ctx.topics_to_be_deleted
    offline_replicas = OfflineReplicas(ctx)
    of_replicas = offline_replicas.of_replicas
    states: dict[TopicPartition, LeaderAndIsrPartitionState] = {}
    by_broker: dict[int, list[TopicPartition]] = {}
    unled: list[TopicPartition] = []
    # Partitions come topic by topic: the topic's assignments and deletion flag looked up once.
    last_topic: str | None = None
    per_topic: Mapping[int, ReplicaAssignment] = {}
    topic_deleted = False
    for broker_ids, tp, info, assignment in entries:
        if tp in states:
            return None
        topic, partition = tp
        (leader, leader_epoch, isr, zk_version), controller_epoch = info
        states[tp] = new_tuple(
            LeaderAndIsrPartitionState,
            (
                topic, partition, controller_epoch, leader, leader_epoch, isr, zk_version,
                assignment.replicas, assignment.adding_replicas, assignment.removing_replicas, is_new,
            ),
        )  # fmt: skip
        for broker_id in broker_ids:
            tps = by_broker.get(broker_id)
            if tps is None:
                by_broker[broker_id] = [tp]
            else:
                tps.append(tp)
        current = leadership.get(tp)
        if current is None:
            unled.append(tp)
            continue
        if topic != last_topic:
            last_topic = topic
            per_topic = assignments.get(topic) or {}
            topic_deleted = topic in deleting
        replicas = per_topic.get(partition, EMPTY_ASSIGNMENT).replicas
        offline = offline_replicas(tp, replicas) if of_replicas is None else of_replicas(replicas)
        if current is not info:
            (leader, leader_epoch, isr, zk_version), controller_epoch = current
        if topic_deleted:  # LeaderAndIsr.duringDelete(isr): leader -2, epoch 0, version 0, ISR kept
            leader, leader_epoch, zk_version = LEADER_DURING_DELETE, 0, 0
        queued[tp] = new_tuple(
            UpdateMetadataPartitionState,
            (topic, partition, controller_epoch, leader, leader_epoch, isr, zk_version, replicas, offline),
        )
    fill_broker_maps(requests, by_broker.items(), states, is_new)
    return unled


def isr_removal_states(
    ctx: ControllerContext,
    requests: dict[int, dict[TopicPartition, LeaderAndIsrPartitionState]],
    queued: dict[TopicPartition, UpdateMetadataPartitionState],
    replica_id: int,
    removed: Iterable[tuple[TopicPartition, LeaderIsrAndControllerEpoch]],
) -> tuple[int, list[TopicPartition]] | None:
    """``queue_distinct_partitions`` of ``isr_removal_entries(replica_id, removed, ...)`` with the
    assignments and topics queued for deletion of ``ctx``, built partition by partition: each
    partition's assignment looked up once (topic by topic), its recipients (each distinct replica
    list's once) and both states built in the same pass, without an entry per partition (the
    OfflineReplica step's 40,000 at 100,000 partitions RF 3, one broker dead). Returns how many
    partitions got a LeaderAndIsr state and those with no leadership in ``ctx`` (no UpdateMetadata
    state); or None, as ``queue_distinct_partitions`` does, when a partition repeats."""
    leadership = ctx.partitions_leadership_info
    assignments = ctx.partition_assignments
    deleting = ctx.topics_to_be_deleted
    offline_replicas = OfflineReplicas(ctx)
    of_replicas = offline_replicas.of_replicas
    states: dict[TopicPartition, LeaderAndIsrPartitionState] = {}
    # Each recipient's map: filled in the loop for one with nothing queued yet (put in ``requests``
    # at the end, in order of first appearance, as ``fill_broker_maps`` puts them), else its
    # partitions listed for ``fill_broker_maps`` (``is_new`` is sticky).
    fresh: dict[int, dict[TopicPartition, LeaderAndIsrPartitionState]] = {}
    later: dict[int, list[TopicPartition]] = {}
    # replica list -> the maps and lists of its replicas but ``replica_id`` (few distinct lists)
    targets_of: dict[
        tuple[int, ...],
        tuple[list[dict[TopicPartition, LeaderAndIsrPartitionState]], list[list[TopicPartition]]],
    ] = {}
    unled: list[TopicPartition] = []
    last_topic: str | None = None
    per_topic: Mapping[int, ReplicaAssignment] = {}
    topic_deleted = False
    for tp, info in removed:
        topic, partition = tp
        if topic != last_topic:
            last_topic = topic
            per_topic = assignments.get(topic) or {}
            topic_deleted = topic in deleting
        if topic_deleted:  # no LeaderAndIsr for a topic queued for deletion (Kafka's ISR removal)
            continue
        if tp in states:
            return None
        a = per_topic.get(partition, EMPTY_ASSIGNMENT)
        replicas = a.replicas
        (leader, leader_epoch, isr, zk_version), controller_epoch = info
        state = states[tp] = new_tuple(
            LeaderAndIsrPartitionState,
            (
                topic, partition, controller_epoch, leader, leader_epoch, isr, zk_version,
                replicas, a.adding_replicas, a.removing_replicas, False,
            ),
        )  # fmt: skip
        targets = targets_of.get(replicas)
        if targets is None:
            targets = targets_of[replicas] = _recipient_targets(replicas, replica_id, requests, fresh, later)
        for per_broker in targets[0]:
            per_broker[tp] = state
        for tps in targets[1]:
            tps.append(tp)
        current = leadership.get(tp)
        if current is None:
            unled.append(tp)
            continue
        offline = offline_replicas(tp, replicas) if of_replicas is None else of_replicas(replicas)
        if current is not info:
            (leader, leader_epoch, isr, zk_version), controller_epoch = current
        queued[tp] = new_tuple(
            UpdateMetadataPartitionState,
            (topic, partition, controller_epoch, leader, leader_epoch, isr, zk_version, replicas, offline),
        )
    requests.update(fresh)
    fill_broker_maps(requests, later.items(), states, False)
    return len(states), unled


def _recipient_targets(
    replicas: tuple[int, ...],
    replica_id: int,
    requests: Mapping[int, dict[TopicPartition, LeaderAndIsrPartitionState]],
    fresh: dict[int, dict[TopicPartition, LeaderAndIsrPartitionState]],
    later: dict[int, list[TopicPartition]],
) -> tuple[list[dict[TopicPartition, LeaderAndIsrPartitionState]], list[list[TopicPartition]]]:
    """``isr_removal_states``' recipients of a partition of ``replicas``: its replicas but
    ``replica_id`` (none negative), as the maps to fill of those with nothing in ``requests`` and
    the partition lists of the others, each made on the recipient's first appearance."""
    maps: list[dict[TopicPartition, LeaderAndIsrPartitionState]] = []
    lists: list[list[TopicPartition]] = []
    for broker_id in replicas:
        if broker_id == replica_id or broker_id < 0:
            continue
        if broker_id in requests:
            lists.append(later.setdefault(broker_id, []))
        else:
            maps.append(fresh.setdefault(broker_id, {}))
    return maps, lists


def fill_broker_maps(
    requests: dict[int, dict[TopicPartition, LeaderAndIsrPartitionState]],
    groups: Iterable[tuple[int, Sequence[TopicPartition]]],
    states: Mapping[TopicPartition, LeaderAndIsrPartitionState],
    is_new: bool,
) -> None:
    """Each broker's LeaderAndIsr map in ``requests`` gets its partitions' ``states``, in order, in
    one update where nothing is queued for the broker yet or ``is_new``; ``is_new`` is sticky: a
    partition already queued as new stays new. A negative broker id (no broker) is skipped."""
    for broker_id, tps in groups:
        if broker_id < 0:
            continue
        per_broker = requests.get(broker_id)
        if per_broker is None:
            requests[broker_id] = dict(zip(tps, values_at(states, tps), strict=True))
        elif is_new:
            per_broker.update(zip(tps, values_at(states, tps), strict=True))
        else:
            for tp in tps:
                previous = per_broker.get(tp)
                state = states[tp]
                per_broker[tp] = (
                    state._replace(is_new=True) if previous is not None and previous.is_new else state
                )
