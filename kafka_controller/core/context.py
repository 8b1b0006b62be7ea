"""ControllerContext: the controller's cache of cluster metadata (docs/controller-behaviour.md §5).

Touched only by the controller's event thread. Two counters are maintained incrementally, as in
Kafka 2.8: the offline partition count and the preferred replica imbalance count
(docs/controller-behaviour.md §5.4, §5.5).
The assignment is kept per topic (topic -> partition -> ReplicaAssignment) so that topic-wide
lookups and removals do not scan every partition; a per-broker index is not kept (Kafka keeps none)
— ``partitions_on_broker`` scans, which the controller calls once per broker event.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from itertools import chain
from operator import attrgetter, is_, itemgetter, ne

from kafka_controller.domain.errors import IllegalControllerStateError
from kafka_controller.domain.states import PartitionState, ReplicaState
from kafka_controller.domain.values import (
    EMPTY_ASSIGNMENT,
    Broker,
    LeaderIsrAndControllerEpoch,
    PartitionAndReplica,
    ReplicaAssignment,
    TopicPartition,
)
from kafka_controller.hotpath import values_at

_OFFLINE = PartitionState.OFFLINE_PARTITION
_NON_EXISTENT = PartitionState.NON_EXISTENT_PARTITION
_values_of = dict.values
_first = itemgetter(0)
_replicas_of = attrgetter("replicas")
_adding_replicas_of = attrgetter("adding_replicas")
_leader_of = attrgetter("leader_and_isr.leader")


@dataclass
class ControllerStats:
    """The context's ``stats``: the unclean-election meter (a count; rates are the metrics layer's)."""

    unclean_leader_elections: int = 0

    def mark_unclean_leader_election(self, n: int = 1) -> None:
        self.unclean_leader_elections += n


def has_preferred_leader(assignment: ReplicaAssignment, leadership: LeaderIsrAndControllerEpoch) -> bool:
    """A new preferred replica still being added counts as preferred until it joins the ISR
    (docs/controller-behaviour.md §5.5)."""
    if not assignment.replicas:
        return True
    pref = assignment.replicas[0]
    if assignment.is_being_reassigned and pref in assignment.adding_replicas:
        return pref not in leadership.leader_and_isr.isr
    return leadership.leader_and_isr.leader == pref


@dataclass
class ControllerContext:
    """Kafka's ``ControllerContext``: one object, as in Kafka, since its states, brokers and
    assignments are read together by every decision (a partition's state, its replicas' brokers,
    its assignment); its sections below are grouped by what they cache."""

    stats: ControllerStats = field(default_factory=ControllerStats)
    offline_partition_count: int = 0
    preferred_replica_imbalance_count: int = 0
    shutting_down_broker_ids: set[int] = field(default_factory=set)
    epoch: int = 0
    epoch_zk_version: int = 0
    all_topics: set[str] = field(default_factory=set)
    topic_ids: dict[str, str] = field(default_factory=dict)
    topic_names: dict[str, str] = field(default_factory=dict)
    partition_assignments: dict[str, dict[int, ReplicaAssignment]] = field(default_factory=dict)
    partitions_being_reassigned: set[TopicPartition] = field(default_factory=set)
    partition_states: dict[TopicPartition, PartitionState] = field(default_factory=dict)
    replica_states: dict[PartitionAndReplica, ReplicaState] = field(default_factory=dict)
    replicas_on_offline_dirs: dict[int, set[TopicPartition]] = field(default_factory=dict)
    topics_to_be_deleted: set[str] = field(default_factory=set)
    topics_with_deletion_started: set[str] = field(default_factory=set)
    topics_ineligible_for_deletion: set[str] = field(default_factory=set)
    _live_brokers: dict[int, Broker] = field(default_factory=dict)
    _live_broker_epochs: dict[int, int] = field(default_factory=dict)
    _partition_leadership_info: dict[TopicPartition, LeaderIsrAndControllerEpoch] = field(
        default_factory=dict
    )
    # One ``TopicPartition`` per partition, handed out by the bulk iterators below, so that the maps
    # keyed by partition (leaderships, partition and replica states) share one key object instead
    # of a copy each: 200,000 fewer objects at 100,000 partitions, and a dict lookup is cheaper
    # than building a NamedTuple. Entries of a removed topic go with it; a stale one would be
    # harmless anyway (the values are immutable and equal).
    _topic_partitions: dict[str, dict[int, TopicPartition]] = field(
        default_factory=dict, repr=False, compare=False
    )

    # ----------------------------------------------------------------------------- assignments
    def partition_replica_assignment(self, tp: TopicPartition) -> tuple[int, ...]:
        return self.partition_full_replica_assignment(tp).replicas

    def partition_full_replica_assignment(self, tp: TopicPartition) -> ReplicaAssignment:
        per_topic = self.partition_assignments.get(tp.topic)
        if per_topic is None:
            return EMPTY_ASSIGNMENT
        return per_topic.get(tp.partition, EMPTY_ASSIGNMENT)

    def update_partition_full_replica_assignment(
        self, tp: TopicPartition, new_assignment: ReplicaAssignment
    ) -> None:
        per_topic = self.partition_assignments.setdefault(tp.topic, {})
        old = per_topic.get(tp.partition)
        per_topic[tp.partition] = new_assignment
        leadership = self._partition_leadership_info.get(tp)
        self._update_preferred_replica_imbalance_metric(tp, old, leadership, new_assignment, leadership)

    def load_topic_assignment(
        self, topic: str, assignment: Mapping[TopicPartition, ReplicaAssignment]
    ) -> None:
        """A failover's fill of ``topic``'s assignment, no leadership cached yet (imbalance count
        untouched); its partitions become the shared ones (``_topic_partitions``) if it has none."""
        partitions = list(map(itemgetter(1), assignment))
        self.partition_assignments[topic] = dict(zip(partitions, assignment.values(), strict=True))
        self._topic_partitions.setdefault(topic, dict(zip(partitions, assignment, strict=True)))

    def partition_replica_assignment_for_topic(self, topic: str) -> dict[TopicPartition, tuple[int, ...]]:
        per_topic = self.partition_assignments.get(topic, {})
        return {TopicPartition(topic, p): a.replicas for p, a in per_topic.items()}

    def partition_full_replica_assignment_for_topic(
        self, topic: str
    ) -> dict[TopicPartition, ReplicaAssignment]:
        per_topic = self.partition_assignments.get(topic, {})
        return {TopicPartition(topic, p): a for p, a in per_topic.items()}

    def _shared_topic_partitions(self, topic: str, partitions: Collection[int]) -> list[TopicPartition]:
        """The shared ``TopicPartition`` of each of ``topic``'s ``partitions`` (made on first use)."""
        shared = self._topic_partitions.get(topic)
        if shared is None:
            shared = self._topic_partitions[topic] = {}
        else:
            # Once made (a failover's load makes them all), every one is found in one lookup pass,
            # without a Python step each: a failover asks for all 100,000 three times (leaderships,
            # replica and partition states).
            try:
                return list(values_at(shared, partitions))
            except KeyError:  # some not made yet: made below
                pass
        get = shared.get
        out = []
        for p in partitions:
            tp = get(p)
            if tp is None:
                tp = shared[p] = TopicPartition(topic, p)
            out.append(tp)
        return out

    @property
    def all_partitions(self) -> list[TopicPartition]:
        by_topic = self.partition_assignments
        return list(chain.from_iterable(map(self._shared_topic_partitions, by_topic, by_topic.values())))

    def iter_assignments(self) -> Iterator[tuple[TopicPartition, ReplicaAssignment]]:
        shared = self._shared_topic_partitions
        for t, parts in self.partition_assignments.items():
            yield from zip(shared(t, parts), parts.values(), strict=True)

    def partitions_for_topic(self, topic: str) -> list[TopicPartition]:
        return self._shared_topic_partitions(topic, self.partition_assignments.get(topic, {}))

    def partitions_on_broker(self, broker_id: int) -> list[TopicPartition]:
        return [tp for tp, a in self.iter_assignments() if broker_id in a.replicas]

    def replicas_on_brokers(self, broker_ids: Collection[int]) -> list[PartitionAndReplica]:
        ids = set(broker_ids)
        return [
            PartitionAndReplica(tp, r) for tp, a in self.iter_assignments() for r in a.replicas if r in ids
        ]

    def replicas_for_topic(self, topic: str) -> list[PartitionAndReplica]:
        return [
            PartitionAndReplica(TopicPartition(topic, p), r)
            for p, a in self.partition_assignments.get(topic, {}).items()
            for r in a.replicas
        ]

    def replicas_for_partition(self, partitions: Iterable[TopicPartition]) -> list[PartitionAndReplica]:
        return [
            PartitionAndReplica(tp, r) for tp in partitions for r in self.partition_replica_assignment(tp)
        ]

    def online_and_offline_replicas(self) -> tuple[list[PartitionAndReplica], list[PartitionAndReplica]]:
        """Every replica, split by ``is_replica_online`` (inlined: a failover splits them all)."""
        online: list[PartitionAndReplica] = []
        offline: list[PartitionAndReplica] = []
        live = self.live_broker_ids
        offline_dirs = self.replicas_on_offline_dirs
        for t, parts in self.partition_assignments.items():
            for p, a in parts.items():
                tp = TopicPartition(t, p)
                for r in a.replicas:
                    is_online = r in live and (not offline_dirs or tp not in offline_dirs.get(r, ()))
                    (online if is_online else offline).append(PartitionAndReplica(tp, r))
        return online, offline

    # ----------------------------------------------------------------------------- leadership
    def partition_leadership_info(self, tp: TopicPartition) -> LeaderIsrAndControllerEpoch | None:
        return self._partition_leadership_info.get(tp)

    @property
    def partitions_leadership_info(self) -> Mapping[TopicPartition, LeaderIsrAndControllerEpoch]:
        return self._partition_leadership_info

    def cached_leaderships(
        self, partitions: Iterable[TopicPartition], with_isr_replica: int | None = None
    ) -> tuple[dict[TopicPartition, LeaderIsrAndControllerEpoch], list[TopicPartition]]:
        """Split ``partitions`` into those whose cached state a write may start from (written by
        this controller's epoch or an older one, and, if asked, with ``with_isr_replica`` in its
        ISR) and the rest, which need Kafka's read first (deviation 16)."""
        epoch = self.epoch
        infos = self._partition_leadership_info
        cached: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        unread: list[TopicPartition] = []
        for tp in partitions:
            info = infos.get(tp)
            if (
                info is not None
                and info.controller_epoch <= epoch
                and (with_isr_replica is None or with_isr_replica in info.leader_and_isr.isr)
            ):
                cached[tp] = info
            else:
                unread.append(tp)
        return cached, unread

    def put_partition_leadership_info(
        self, tp: TopicPartition, leadership: LeaderIsrAndControllerEpoch
    ) -> None:
        old = self._partition_leadership_info.get(tp)
        self._partition_leadership_info[tp] = leadership
        assignment = self.partition_full_replica_assignment(tp)
        self._update_preferred_replica_imbalance_metric(tp, assignment, old, assignment, leadership)

    def put_partition_leadership_infos(
        self, items: Iterable[tuple[TopicPartition, LeaderIsrAndControllerEpoch]]
    ) -> None:
        """``put_partition_leadership_info`` for many partitions at once (a failover caches all of
        them): the same cache and imbalance count, without a method call per partition."""
        infos = self._partition_leadership_info
        assignments = self.partition_assignments
        deleting = self.topics_to_be_deleted
        delta = 0
        for tp, leadership in items:
            old = infos.get(tp)
            infos[tp] = leadership
            topic, partition = tp
            if topic in deleting:
                continue
            per_topic = assignments.get(topic)
            assignment = EMPTY_ASSIGNMENT if per_topic is None else per_topic.get(partition, EMPTY_ASSIGNMENT)
            if not assignment.adding_replicas:  # ``has_preferred_leader``, inlined: the first replica leads
                if replicas := assignment.replicas:
                    delta += leadership.leader_and_isr.leader != replicas[0]
                    if old is not None:
                        delta -= old.leader_and_isr.leader != replicas[0]
                continue
            if old is not None and not has_preferred_leader(assignment, old):
                delta -= 1
            if not has_preferred_leader(assignment, leadership):
                delta += 1
        self.preferred_replica_imbalance_count += delta

    def load_partition_leadership_infos(
        self, leaderships: Mapping[TopicPartition, LeaderIsrAndControllerEpoch]
    ) -> bool:
        """A failover's fill of the leadership cache: ``put_partition_leadership_infos`` of every
        partition at once, in a few passes of ``map``, when it can be (False, nothing done, when not).

        It can when nothing is cached yet, no topic is queued for deletion, ``leaderships`` holds
        exactly the shared partitions of ``all_partitions`` in that order (as a failover's context
        load reads them), and no assignment is empty or adding replicas: then each partition counts
        towards the imbalance exactly when its leader is not its first replica, and the counts of
        100,000 partitions are summed without a Python step per partition."""
        infos = self._partition_leadership_info
        if infos or self.topics_to_be_deleted:
            return False
        partitions = self.all_partitions
        if len(partitions) != len(leaderships) or not all(map(is_, partitions, leaderships)):
            return False
        assignments = list(chain.from_iterable(map(_values_of, self.partition_assignments.values())))
        if any(map(_adding_replicas_of, assignments)):
            return False
        replicas = list(map(_replicas_of, assignments))
        if not all(replicas):
            return False
        imbalanced = sum(map(ne, map(_leader_of, leaderships.values()), map(_first, replicas)))
        infos.update(leaderships)
        self.preferred_replica_imbalance_count += imbalanced
        return True

    def clear_partition_leadership_info(self) -> None:
        self._partition_leadership_info.clear()

    @property
    def partition_with_leaders_count(self) -> int:
        return len(self._partition_leadership_info)

    @property
    def partitions_with_leaders(self) -> set[TopicPartition]:
        queued = self.topics_to_be_deleted
        return {tp for tp in self._partition_leadership_info if tp.topic not in queued}

    @property
    def partitions_with_offline_leader(self) -> set[TopicPartition]:
        queued = self.topics_to_be_deleted
        return {
            tp
            for tp, info in self._partition_leadership_info.items()
            if tp.topic not in queued and not self.is_replica_online(info.leader_and_isr.leader, tp)
        }

    def partition_leaders_on_broker(self, broker_id: int) -> set[TopicPartition]:
        queued = self.topics_to_be_deleted
        return {
            tp
            for tp, info in self._partition_leadership_info.items()
            if info.leader_and_isr.leader == broker_id
            and tp.topic not in queued
            and len(self.partition_replica_assignment(tp)) > 1
        }

    # ----------------------------------------------------------------------------- topics
    def set_all_topics(self, topics: Iterable[str]) -> None:
        self.all_topics = set(topics)

    def add_topic_id(self, topic: str, topic_id: str) -> None:
        if topic not in self.all_topics:
            raise IllegalControllerStateError(f"topic {topic} does not exist in the controller's cache")
        existing_id = self.topic_ids.get(topic)
        if existing_id is not None and existing_id != topic_id:
            raise IllegalControllerStateError(
                f"topic id {topic_id} for {topic} conflicts with the cached id {existing_id}"
            )
        existing_name = self.topic_names.get(topic_id)
        if existing_name is not None and existing_name != topic:
            raise IllegalControllerStateError(
                f"topic id {topic_id} for {topic} is already the id of {existing_name}"
            )
        self.topic_ids[topic] = topic_id
        self.topic_names[topic_id] = topic

    def queue_topic_deletion(self, topics: Iterable[str]) -> None:
        """Queue topics; only newly queued ones lose their imbalance contribution.

        Kafka 2.8 subtracted it again for re-queued topics, driving the count negative
        (KAFKA-13572, fixed in 3.2.3/3.3.0); the controller re-queues every child of
        ``/admin/delete_topics`` each time that watch fires, so the fix matters here.
        """
        new = set(topics) - self.topics_to_be_deleted
        self.topics_to_be_deleted |= new
        for topic in new:
            self._cleanup_preferred_imbalance_for_topic(topic)

    def begin_topic_deletion(self, topics: Iterable[str]) -> None:
        self.topics_with_deletion_started |= set(topics)

    def is_topic_deletion_in_progress(self, topic: str) -> bool:
        return topic in self.topics_with_deletion_started

    def is_topic_queued_up_for_deletion(self, topic: str) -> bool:
        return topic in self.topics_to_be_deleted

    def is_topic_eligible_for_deletion(self, topic: str) -> bool:
        return topic in self.topics_to_be_deleted and topic not in self.topics_ineligible_for_deletion

    @property
    def topics_queued_for_deletion(self) -> set[str]:
        return set(self.topics_to_be_deleted)

    def remove_topic(self, topic: str) -> None:
        if topic not in self.topics_to_be_deleted:
            self._cleanup_preferred_imbalance_for_topic(topic)
        self.topics_to_be_deleted.discard(topic)
        self.topics_with_deletion_started.discard(topic)
        self.all_topics.discard(topic)
        topic_id = self.topic_ids.pop(topic, None)
        if topic_id is not None:
            self.topic_names.pop(topic_id, None)
        for p in self.partition_assignments.pop(topic, {}):
            self._partition_leadership_info.pop(TopicPartition(topic, p), None)
        self._topic_partitions.pop(topic, None)

    def _cleanup_preferred_imbalance_for_topic(self, topic: str) -> None:
        for p, assignment in self.partition_assignments.get(topic, {}).items():
            leadership = self._partition_leadership_info.get(TopicPartition(topic, p))
            if leadership is not None and not has_preferred_leader(assignment, leadership):
                self.preferred_replica_imbalance_count -= 1

    def _update_preferred_replica_imbalance_metric(
        self,
        tp: TopicPartition,
        old_assignment: ReplicaAssignment | None,
        old_leadership: LeaderIsrAndControllerEpoch | None,
        new_assignment: ReplicaAssignment | None,
        new_leadership: LeaderIsrAndControllerEpoch | None,
    ) -> None:
        if tp.topic in self.topics_to_be_deleted:
            return
        if (
            old_assignment is not None
            and old_leadership is not None
            and not has_preferred_leader(old_assignment, old_leadership)
        ):
            self.preferred_replica_imbalance_count -= 1
        if (
            new_assignment is not None
            and new_leadership is not None
            and not has_preferred_leader(new_assignment, new_leadership)
        ):
            self.preferred_replica_imbalance_count += 1

    # ----------------------------------------------------------------------------- reset
    def reset_context(self) -> None:
        self.topics_to_be_deleted.clear()
        self.topics_with_deletion_started.clear()
        self.topics_ineligible_for_deletion.clear()
        self.shutting_down_broker_ids.clear()
        self.epoch = 0
        self.epoch_zk_version = 0
        self.clear_topics_state()
        self.clear_live_brokers()

    def clear_topics_state(self) -> None:
        self.all_topics.clear()
        self.topic_ids.clear()
        self.topic_names.clear()
        self.partition_assignments.clear()
        self._topic_partitions.clear()
        self._partition_leadership_info.clear()
        self.partitions_being_reassigned.clear()
        self.replicas_on_offline_dirs.clear()
        self.partition_states.clear()
        self.replica_states.clear()
        self.offline_partition_count = 0
        self.preferred_replica_imbalance_count = 0

    # ----------------------------------------------------------------------------- states
    # Partition and replica states, the valid-transition checks, and the offline partition
    # count kept as states change (Kafka keeps it in ``updatePartitionStateMetrics``).
    def partitions_in_state(self, state: PartitionState) -> list[TopicPartition]:
        return [tp for tp, s in self.partition_states.items() if s is state]

    def partitions_in_states(self, states: Collection[PartitionState]) -> list[TopicPartition]:
        return [tp for tp, s in self.partition_states.items() if s in states]

    def partitions_in_state_for_topic(self, topic: str, state: PartitionState) -> list[TopicPartition]:
        return [tp for tp in self.partitions_for_topic(topic) if self.partition_states.get(tp) is state]

    def check_valid_partition_state_change(
        self, partitions: Iterable[TopicPartition], target: PartitionState
    ) -> tuple[list[TopicPartition], list[TopicPartition]]:
        """Split into (valid, invalid) for ``target``, keeping input order; a missing entry is NonExistent."""
        allowed = target.valid_previous_states
        states = self.partition_states
        valid: list[TopicPartition] = []
        invalid: list[TopicPartition] = []
        for tp in partitions:
            (valid if states.get(tp, _NON_EXISTENT) in allowed else invalid).append(tp)
        return valid, invalid

    def check_valid_replica_state_change(
        self, replicas: Iterable[PartitionAndReplica], target: ReplicaState
    ) -> tuple[list[PartitionAndReplica], list[PartitionAndReplica]]:
        """Split into (valid, invalid) for ``target``, keeping input order; a missing entry is NonExistent."""
        allowed = target.valid_previous_states
        states = self.replica_states
        valid: list[PartitionAndReplica] = []
        invalid: list[PartitionAndReplica] = []
        for r in replicas:
            (valid if states.get(r, ReplicaState.NON_EXISTENT_REPLICA) in allowed else invalid).append(r)
        return valid, invalid

    def partition_state(self, tp: TopicPartition) -> PartitionState:
        return self.partition_states[tp]

    def put_partition_state(self, tp: TopicPartition, target: PartitionState) -> None:
        current = self.partition_states.get(tp, _NON_EXISTENT)
        self.partition_states[tp] = target
        self._update_partition_state_metrics(tp, current, target)

    def put_partition_states(self, items: Iterable[tuple[TopicPartition, PartitionState]]) -> None:
        """``put_partition_state`` for many partitions at once (a failover sets all of them): the
        same states and offline count, without a method call per partition.

        Without topics whose deletion started and without a partition given twice, the count moves
        by the targets' Offline count minus the replaced states' one, and the whole update is one
        dict update; otherwise partition by partition."""
        pairs = items if isinstance(items, list) else list(items)
        states = self.partition_states
        deletion_started = self.topics_with_deletion_started
        if not deletion_started:
            updates = dict(pairs)
            if len(updates) == len(pairs):
                currents = list(map(states.get, updates))
                states.update(updates)
                targets = list(updates.values())
                self.offline_partition_count += targets.count(_OFFLINE) - currents.count(_OFFLINE)
                return
        delta = 0
        for tp, target in pairs:
            current = states.get(tp, _NON_EXISTENT)
            states[tp] = target
            if tp.topic in deletion_started:
                continue
            if current is not _OFFLINE and target is _OFFLINE:
                delta += 1
            elif current is _OFFLINE and target is not _OFFLINE:
                delta -= 1
        self.offline_partition_count += delta

    def put_partition_state_if_not_exists(self, tp: TopicPartition, state: PartitionState) -> None:
        if tp not in self.partition_states:
            self.partition_states[tp] = state
            self._update_partition_state_metrics(tp, _NON_EXISTENT, state)

    def _update_partition_state_metrics(
        self, tp: TopicPartition, current: PartitionState, target: PartitionState
    ) -> None:
        if tp.topic in self.topics_with_deletion_started:
            return
        if current is not _OFFLINE and target is _OFFLINE:
            self.offline_partition_count += 1
        elif current is _OFFLINE and target is not _OFFLINE:
            self.offline_partition_count -= 1

    def replica_state(self, replica: PartitionAndReplica) -> ReplicaState:
        return self.replica_states[replica]

    def put_replica_state(self, replica: PartitionAndReplica, state: ReplicaState) -> None:
        self.replica_states[replica] = state

    def put_replica_state_if_not_exists(self, replica: PartitionAndReplica, state: ReplicaState) -> None:
        self.replica_states.setdefault(replica, state)

    def remove_replica_state(self, replica: PartitionAndReplica) -> None:
        self.replica_states.pop(replica, None)

    def replicas_in_state(self, topic: str, state: ReplicaState) -> set[PartitionAndReplica]:
        return {r for r in self.replicas_for_topic(topic) if self._replica_state_or_raise(r) is state}

    def are_all_replicas_in_state(self, topic: str, state: ReplicaState) -> bool:
        return all(self._replica_state_or_raise(r) is state for r in self.replicas_for_topic(topic))

    def is_any_replica_in_state(self, topic: str, state: ReplicaState) -> bool:
        return any(self._replica_state_or_raise(r) is state for r in self.replicas_for_topic(topic))

    def _replica_state_or_raise(self, replica: PartitionAndReplica) -> ReplicaState:
        state = self.replica_states.get(replica)
        if state is None:
            raise IllegalControllerStateError(f"replica {replica} has no state")
        return state

    # ----------------------------------------------------------------------------- brokers
    # Which brokers are live or shutting down, their epochs, whether a replica is online.
    @property
    def live_broker_ids(self) -> set[int]:
        return self._live_broker_epochs.keys() - self.shutting_down_broker_ids

    @property
    def live_or_shutting_down_broker_ids(self) -> set[int]:
        return set(self._live_broker_epochs)

    @property
    def live_or_shutting_down_brokers(self) -> list[Broker]:
        return list(self._live_brokers.values())

    @property
    def live_broker_id_and_epochs(self) -> dict[int, int]:
        return dict(self._live_broker_epochs)

    def live_broker_epoch(self, broker_id: int) -> int | None:
        return self._live_broker_epochs.get(broker_id)

    def live_or_shutting_down_broker(self, broker_id: int) -> Broker | None:
        return self._live_brokers.get(broker_id)

    def is_live_or_shutting_down(self, broker_id: int) -> bool:
        return broker_id in self._live_broker_epochs

    def set_live_brokers(self, broker_and_epochs: Mapping[Broker, int]) -> None:
        self.clear_live_brokers()
        self.add_live_brokers(broker_and_epochs)

    def add_live_brokers(self, broker_and_epochs: Mapping[Broker, int]) -> None:
        for broker, epoch in broker_and_epochs.items():
            self._live_brokers[broker.id] = broker
            self._live_broker_epochs[broker.id] = epoch

    def remove_live_brokers(self, broker_ids: Iterable[int]) -> None:
        for b in broker_ids:
            self._live_brokers.pop(b, None)
            self._live_broker_epochs.pop(b, None)

    def update_broker_metadata(self, old: Broker, new: Broker) -> None:
        self._live_brokers[new.id] = new

    def clear_live_brokers(self) -> None:
        self._live_brokers.clear()
        self._live_broker_epochs.clear()

    def is_replica_online(
        self, broker_id: int, tp: TopicPartition, include_shutting_down_brokers: bool = False
    ) -> bool:
        if include_shutting_down_brokers:
            alive = broker_id in self._live_broker_epochs
        else:
            alive = broker_id in self._live_broker_epochs and broker_id not in self.shutting_down_broker_ids
        if not alive:
            return False
        offline = self.replicas_on_offline_dirs.get(broker_id)
        return offline is None or tp not in offline

    # ----------------------------------------------------------------------------- controlled shutdown
    def partitions_to_move_off(self, broker_id: int) -> tuple[list[TopicPartition], list[TopicPartition]]:
        """Kafka's ``partitionsToActOn`` of a controlled shutdown, split into ``(led, followed)``
        by the broker: its partitions with more than one replica, a cached leadership and a topic
        not queued for deletion, in assignment order. One pass over the assignments that makes
        shared ``TopicPartition``s only for the broker's partitions: at 25,000 topics it is a third
        of ``partitions_on_broker`` and the filter after it."""
        queued = self.topics_to_be_deleted
        leadership = self._partition_leadership_info
        shared_by_topic = self._topic_partitions
        led: list[TopicPartition] = []
        followed: list[TopicPartition] = []
        for topic, parts in self.partition_assignments.items():
            shared: dict[int, TopicPartition] | None = None
            for p, assignment in parts.items():
                replicas = assignment.replicas
                if broker_id not in replicas or len(replicas) <= 1:
                    continue
                if topic in queued:
                    break
                if shared is None:
                    shared = shared_by_topic.get(topic)
                    if shared is None:
                        shared = shared_by_topic[topic] = {}
                tp = shared.get(p)
                if tp is None:
                    tp = shared[p] = TopicPartition(topic, p)
                info = leadership.get(tp)
                if info is not None:
                    (led if info.leader_and_isr.leader == broker_id else followed).append(tp)
        return led, followed
