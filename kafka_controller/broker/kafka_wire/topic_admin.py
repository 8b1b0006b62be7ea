"""Topic creation, deletion and partition addition as Kafka 2.8's controller broker does them
(``ZkAdminManager`` + ``AdminZkClient``), over the metadata store and the broker's metadata cache.

The checks run in Kafka's order and fail one topic at a time with Kafka's error code and message;
a topic that passes is written in Kafka's ZooKeeper formats (``create_topic``: config and topic
znode in one multi; ``/admin/delete_topics/<t>``; the topic znode rewritten with the new
partitions). With a positive timeout the answer waits, bounded by it, until the metadata cache shows
every new partition with a leader (or the deleted topic gone), as Kafka's ``DelayedCreatePartitions``
/ ``DelayedDeleteTopics`` do; otherwise a written topic is answered ``REQUEST_TIMED_OUT``, as in
Kafka. ``validate_only`` runs every check and writes nothing.
"""

from __future__ import annotations

import logging
import random
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode as E

from kafka_controller.admin.placement import PlacementError, assign_replicas
from kafka_controller.admin.znode_size import (
    DEFAULT_JUTE_MAXBUFFER,
    ZnodeTooLargeError,
    assignment_znode_size,
    check_partition_count,
    check_topic_znode,
    config_size,
)
from kafka_controller.broker.kafka_wire.topic_checks import (
    ApiException,
    check_topic_configs,
    render,
    validate_added,
)
from kafka_controller.broker.metadata_cache import MetadataCache
from kafka_controller.domain.errors import (
    InvalidArgumentError,
    KafkaControllerError,
    NodeExistsError,
    NoNodeError,
)
from kafka_controller.domain.values import MATCH_ANY_VERSION, ReplicaAssignment
from kafka_controller.ports import MetadataStore
from kafka_controller.zk.codecs import new_topic_id
from kafka_controller.zk.paths import validate_topic_name

log = logging.getLogger(__name__)

NO_NUM_PARTITIONS = -1
NO_REPLICATION_FACTOR = -1
_SEGMENT_BYTES_100_MIB = str(100 * 1024 * 1024)
#: Kafka 2.8's defaults for its internal topics when a Metadata request auto-creates them
#: (``offsets.topic.*`` with ``GroupCoordinator.offsetsTopicConfigs``, ``transaction.state.log.*``
#: with ``TransactionStateManager.transactionTopicConfigs``): partitions, replication factor, configs.
INTERNAL_TOPIC_SETTINGS: dict[str, tuple[int, int, dict[str, str]]] = {
    "__consumer_offsets": (
        50,
        3,
        {
            "cleanup.policy": "compact",
            "segment.bytes": _SEGMENT_BYTES_100_MIB,
            "compression.type": "producer",
        },
    ),
    "__transaction_state": (
        50,
        3,
        {
            "unclean.leader.election.enable": "false",
            "compression.type": "uncompressed",
            "cleanup.policy": "compact",
            "min.insync.replicas": "2",
            "segment.bytes": _SEGMENT_BYTES_100_MIB,
        },
    ),
}
_PLACEMENT_ERRORS = {
    "partitions": E.invalid_partitions,
    "replication_factor": E.invalid_replication_factor,
    "racks": E.unknown_server_error,
}


@dataclass(frozen=True, slots=True)
class NewTopic:
    name: str
    num_partitions: int = NO_NUM_PARTITIONS
    replication_factor: int = NO_REPLICATION_FACTOR
    assignments: Mapping[int, Sequence[int]] = field(default_factory=dict)
    configs: Sequence[tuple[str, str | None]] = ()


@dataclass(frozen=True, slots=True)
class NewPartitions:
    name: str
    count: int
    assignments: Sequence[Sequence[int]] | None = None


@dataclass(slots=True)
class Outcome:
    """One topic's answer; ``partitions``/``configs`` are set once the topic passed the checks."""

    name: str
    code: E = E.none
    message: str | None = None
    topic_id: str | None = None
    partitions: dict[int, tuple[int, ...]] | None = None
    configs: dict[str, str] | None = None

    def fail(self, error: ApiException) -> Outcome:
        self.code, self.message, self.partitions, self.configs = error.code, error.message, None, None
        return self


class TopicAdmin:
    """The topic half of Kafka's ``ZkAdminManager``; thread-safe (one call per request thread)."""

    def __init__(
        self,
        store: MetadataStore,
        cache: MetadataCache,
        is_controller: Callable[[], bool],
        *,
        default_partitions: int = 1,
        default_replication_factor: int = 1,
        rng: random.Random | None = None,
        jute_maxbuffer: int = DEFAULT_JUTE_MAXBUFFER,
    ) -> None:
        self.store = store
        self.cache = cache
        self.is_controller = is_controller
        self.default_partitions = default_partitions
        self.default_replication_factor = default_replication_factor
        self.rng = rng or random.Random()
        self.jute_maxbuffer = jute_maxbuffer
        self._inflight: set[str] = set()
        self._inflight_lock = threading.Lock()

    # -- CreateTopics ------------------------------------------------------------------------------------
    def create_topics(
        self, topics: Sequence[NewTopic], timeout_ms: int, validate_only: bool
    ) -> list[Outcome]:
        """One outcome per requested topic, in request order (duplicates included)."""
        if not self.is_controller():
            return [Outcome(t.name, E.not_controller) for t in topics]
        return self._create_all(topics, timeout_ms, validate_only)

    def _create_all(self, topics: Sequence[NewTopic], timeout_ms: int, validate_only: bool) -> list[Outcome]:
        counts = Counter(t.name for t in topics)
        outcomes = []
        for t in topics:
            outcome = Outcome(t.name)
            if counts[t.name] > 1:
                outcome.fail(ApiException(E.invalid_request, "Found multiple entries for this topic."))
            else:
                try:
                    self._create(t, outcome, validate_only)
                except ApiException as e:
                    outcome.fail(e)
                except KafkaControllerError as e:
                    log.warning("Creating topic %s failed: %s", t.name, e)
                    outcome.fail(ApiException(E.unknown_server_error, str(e)))
            outcomes.append(outcome)
        if not validate_only:
            self._await_leaders(outcomes, timeout_ms)
        return outcomes

    # -- auto-creation (a Metadata request naming unknown topics) -----------------------------------------
    def auto_create(self, names: Sequence[str]) -> dict[str, E]:
        """Kafka's ``AutoTopicCreationManager.createTopicsInZk``: on any broker, not only the controller,
        write each topic with the broker's ``num.partitions``/``default.replication.factor`` (the
        internal topics with their coordinators' settings) without waiting for leaders; a topic
        written, or written meanwhile by someone else, answers LEADER_NOT_AVAILABLE, a failed one its
        error. A topic another request is creating right now answers UNKNOWN_TOPIC_OR_PARTITION, as
        Kafka's in-flight set does, so concurrent clients do not race one another into ZooKeeper."""
        with self._inflight_lock:
            fresh = [n for n in dict.fromkeys(names) if n not in self._inflight]
            self._inflight.update(fresh)
        answers = {n: E.unknown_topic_or_partition for n in names}
        try:
            for o in self._create_all([self._auto_topic(n) for n in fresh], 0, False):
                code = o.code
                if code in (E.topic_already_exists, E.request_timed_out):
                    code = E.leader_not_available
                else:
                    log.info("Auto-creating topic %s failed: %s %s", o.name, code.name, o.message or "")
                answers[o.name] = code
        finally:
            with self._inflight_lock:
                self._inflight.difference_update(fresh)
        return answers

    def _auto_topic(self, name: str) -> NewTopic:
        internal = INTERNAL_TOPIC_SETTINGS.get(name)
        if internal is not None:
            n, rf, configs = internal
            return NewTopic(name, n, rf, configs=tuple(configs.items()))
        return NewTopic(name, self.default_partitions, self.default_replication_factor)

    def _create(self, t: NewTopic, outcome: Outcome, validate_only: bool) -> None:
        if self.cache.contains_topic(t.name):
            raise ApiException(E.topic_already_exists, f"Topic '{t.name}' already exists.")
        nulls = [name for name, value in t.configs if value is None]
        if nulls:
            raise ApiException(
                E.invalid_request, f"Null value not supported for topic configs : {','.join(nulls)}"
            )
        explicit = bool(t.assignments)
        if explicit and (
            t.num_partitions != NO_NUM_PARTITIONS or t.replication_factor != NO_REPLICATION_FACTOR
        ):
            raise ApiException(
                E.invalid_request,
                "Both numPartitions or replicationFactor and replicasAssignments were set. "
                "Both cannot be used at the same time.",
            )
        configs = {name: value for name, value in t.configs if value is not None}
        if explicit:
            assignment = {p: tuple(rs) for p, rs in t.assignments.items()}
        else:
            n = self.default_partitions if t.num_partitions == NO_NUM_PARTITIONS else t.num_partitions
            rf = (
                self.default_replication_factor
                if t.replication_factor == NO_REPLICATION_FACTOR
                else t.replication_factor
            )
            alive = {b.id: b.rack for b in self.cache.alive_brokers()}
            assignment = self._place(t.name, alive, n, rf, extra=config_size(configs))
        self._validate_create(t.name, assignment, configs)
        if explicit:
            what = f"{len(assignment):,} partitions in the request's assignment"
            self._check_explicit(t.name, assignment, what, config_size(configs))
        outcome.partitions, outcome.configs = assignment, configs
        if validate_only:
            return
        topic_id = new_topic_id()
        try:
            self.store.create_topic(
                t.name,
                {p: ReplicaAssignment.of(rs) for p, rs in assignment.items()},
                configs,
                topic_id=topic_id,
            )
        except NodeExistsError:
            raise ApiException(E.topic_already_exists, f"Topic '{t.name}' already exists.") from None
        except InvalidArgumentError as e:
            raise ApiException(E.invalid_replica_assignment, str(e)) from None
        outcome.topic_id = topic_id
        log.info("Created topic %s with assignment %s", t.name, assignment)

    def _place(
        self,
        topic: str,
        brokers: Mapping[int, str | None],
        n: int,
        rf: int,
        *,
        total: int | None = None,
        replica_ids: Iterable[int] = (),
        extra: int = 0,
        **fixed: int,
    ) -> dict[int, tuple[int, ...]]:
        """Kafka's placement, after the topic znode's size is known to fit (``total`` partitions in
        all, over ``brokers`` and ``replica_ids``): Kafka would place them and then fail the
        ZooKeeper write; an absurd count is refused before the work."""
        if n > 0 and 0 < rf <= len(brokers):
            try:
                check_partition_count(
                    topic,
                    total if total is not None else n,
                    rf,
                    [*brokers, *replica_ids],
                    extra=extra,
                    jute_maxbuffer=self.jute_maxbuffer,
                )
            except ZnodeTooLargeError as e:
                raise ApiException(E.invalid_partitions, str(e)) from None
        try:
            return assign_replicas(brokers, n, rf, rng=self.rng, **fixed)
        except PlacementError as e:
            raise ApiException(_PLACEMENT_ERRORS[e.kind], str(e)) from None

    def _check_explicit(
        self, topic: str, assignment: Mapping[int, Sequence[int]], what: str, extra: int = 0
    ) -> None:
        """An assignment the request spelled out: its exact znode size, before the write."""
        try:
            check_topic_znode(
                topic,
                assignment_znode_size(assignment),
                extra=extra,
                jute_maxbuffer=self.jute_maxbuffer,
                what=what,
            )
        except ZnodeTooLargeError as e:
            raise ApiException(E.invalid_request, str(e)) from None

    def _validate_create(
        self, topic: str, assignment: Mapping[int, tuple[int, ...]], configs: Mapping[str, str]
    ) -> None:
        """Kafka's ``AdminZkClient.validateTopicCreate``."""
        try:
            validate_topic_name(topic)
        except InvalidArgumentError as e:
            raise ApiException(E.invalid_topic_exception, str(e)) from None
        if self.store.is_topic_marked_for_deletion(topic):
            raise ApiException(E.topic_already_exists, f"Topic '{topic}' is marked for deletion.")
        existing = self.store.get_all_topics()
        if topic in existing:
            raise ApiException(E.topic_already_exists, f"Topic '{topic}' already exists.")
        if "." in topic or "_" in topic:
            key = topic.replace(".", "_")
            clash = sorted(t for t in existing if t.replace(".", "_") == key)
            if clash:
                raise ApiException(
                    E.invalid_topic_exception, f"Topic '{topic}' collides with existing topic: {clash[0]}"
                )
        if len({len(rs) for rs in assignment.values()}) != 1 or any(not rs for rs in assignment.values()):
            raise ApiException(
                E.invalid_replica_assignment, "All partitions should have the same number of replicas"
            )
        if any(len(set(rs)) != len(rs) for rs in assignment.values()):
            raise ApiException(
                E.invalid_replica_assignment, f"Duplicate replica assignment found: {render(assignment)}"
            )
        if any(b < 0 for rs in assignment.values() for b in rs):
            raise ApiException(
                E.invalid_replica_assignment,
                f"Negative broker id in replica assignment: {render(assignment)}",
            )
        if sorted(assignment) != list(range(len(assignment))):
            raise ApiException(
                E.invalid_replica_assignment, "partitions should be a consecutive 0-based integer sequence"
            )
        check_topic_configs(configs)

    def _await_leaders(self, outcomes: Iterable[Outcome], timeout_ms: int) -> None:
        """Kafka's DelayedCreatePartitions: wait until every partition written has a leader."""
        written = [o for o in outcomes if o.code == E.none and o.partitions is not None]
        if not written:
            return

        def missing(cache: MetadataCache, o: Outcome) -> bool:
            states = cache.topic_partitions(o.name)
            assert o.partitions is not None
            return any(p not in states or states[p].leader < 0 for p in o.partitions)

        if timeout_ms > 0:
            self.cache.wait_until(lambda c: not any(missing(c, o) for o in written), timeout_ms / 1000.0)
        for o in written:
            if timeout_ms <= 0 or missing(self.cache, o):
                o.code, o.message = E.request_timed_out, None

    # -- DeleteTopics ------------------------------------------------------------------------------------
    def delete_topics(self, names: Sequence[str], timeout_ms: int) -> dict[str, tuple[E, str | None]]:
        """Topics the handler found in the metadata cache, marked for deletion; Kafka's
        ``deleteTopics`` answers."""
        results: dict[str, tuple[E, str | None]] = {}
        for name in names:
            try:
                self.store.create_delete_topic_path(name)
                results[name] = (E.none, None)
            except NodeExistsError:  # already marked: wait for it all the same, as Kafka does
                results[name] = (E.none, None)
            except NoNodeError:
                results[name] = (E.unknown_topic_or_partition, f"Topic `{name}` to delete does not exist")
            except KafkaControllerError as e:
                results[name] = (E.unknown_server_error, str(e))
        pending = [n for n, (code, _) in results.items() if code == E.none]
        if pending and timeout_ms > 0:
            self.cache.wait_until(
                lambda c: not any(c.contains_topic(n) for n in pending), timeout_ms / 1000.0
            )
        for n in pending:
            if timeout_ms <= 0 or self.cache.contains_topic(n):
                results[n] = (E.request_timed_out, None)
        return results

    # -- CreatePartitions --------------------------------------------------------------------------------
    def create_partitions(
        self, topics: Sequence[NewPartitions], timeout_ms: int, validate_only: bool
    ) -> dict[str, tuple[E, str | None]]:
        """Kafka's ``handleCreatePartitionsRequest`` + ``ZkAdminManager.createPartitions``: one answer per
        distinct topic name."""
        if not self.is_controller():
            return {t.name: (E.not_controller, None) for t in topics}
        counts = Counter(t.name for t in topics)
        errors: dict[str, tuple[E, str | None]] = {
            n: (E.invalid_request, "Duplicate topic in request.") for n, c in counts.items() if c > 1
        }
        brokers = {b.id: b.rack for b in self.store.get_all_brokers_and_epochs()}
        outcomes: list[Outcome] = []
        for t in topics:
            if t.name in errors:
                continue
            outcome = Outcome(t.name)
            try:
                self._add_partitions(t, brokers, outcome, validate_only)
            except ApiException as e:
                outcome.fail(e)
            except KafkaControllerError as e:
                outcome.fail(ApiException(E.unknown_server_error, str(e)))
            outcomes.append(outcome)
        if not validate_only:
            self._await_leaders(outcomes, timeout_ms)
        return {**{o.name: (o.code, o.message) for o in outcomes}, **errors}

    def _add_partitions(
        self, t: NewPartitions, brokers: Mapping[int, str | None], outcome: Outcome, validate_only: bool
    ) -> None:
        try:
            validate_topic_name(t.name)
        except InvalidArgumentError:
            raise ApiException(
                E.unknown_topic_or_partition, f"The topic '{t.name}' does not exist."
            ) from None
        if self.store.is_topic_marked_for_deletion(t.name):
            raise ApiException(E.invalid_topic_exception, "The topic is queued for deletion.")
        read = self.store.get_replica_assignment_and_topic_ids([t.name]).get(t.name)
        if isinstance(read, Exception):
            raise ApiException(E.unknown_server_error, str(read))
        if read is None or not read.assignment:
            raise ApiException(E.unknown_topic_or_partition, f"The topic '{t.name}' does not exist.")
        existing = {tp.partition: ra for tp, ra in read.assignment.items()}
        if any(ra.adding_replicas or ra.removing_replicas for ra in existing.values()):
            raise ApiException(
                E.reassignment_in_progress,
                f"A partition reassignment is in progress for the topic '{t.name}'.",
            )
        old = len(existing)
        increment = t.count - old
        if increment < 0:
            raise ApiException(
                E.invalid_partitions,
                f"Topic currently has {old} partitions, which is higher than the requested {t.count}.",
            )
        if increment == 0:
            raise ApiException(E.invalid_partitions, f"Topic already has {old} partitions.")
        if 0 not in existing:
            raise ApiException(
                E.unknown_server_error,
                f"Unexpected existing replica assignment for topic '{t.name}', partition id 0 is missing.",
            )
        rf = len(existing[0].replicas)
        if t.assignments is not None:
            added = {old + i: tuple(rs) for i, rs in enumerate(t.assignments)}
            unknown = sorted({b for rs in added.values() for b in rs} - set(brokers))
            if unknown:
                raise ApiException(
                    E.invalid_replica_assignment,
                    f"Unknown broker(s) in replica assignment: {', '.join(map(str, unknown))}.",
                )
            if len(added) != increment:
                raise ApiException(
                    E.invalid_replica_assignment,
                    f"Increasing the number of partitions by {increment} but {len(added)} assignments "
                    "provided.",
                )
            validate_added(added, rf)
            whole = {**{p: ra.replicas for p, ra in existing.items()}, **added}
            self._check_explicit(t.name, whole, f"{len(whole):,} partitions with the assignment asked")
        else:
            ordered = sorted(brokers)
            first = existing[0].replicas[0] if existing[0].replicas else -1
            start = next((i for i, b in enumerate(ordered) if b >= first), 0)
            added = self._place(
                t.name,
                brokers,
                increment,
                rf,
                total=t.count,
                replica_ids=(b for ra in existing.values() for b in ra.replicas),
                fixed_start_index=start,
                start_partition=old,
            )
        outcome.partitions = {**{p: ra.replicas for p, ra in existing.items()}, **added}
        if validate_only:
            return
        full = {**existing, **{p: ReplicaAssignment.of(rs) for p, rs in added.items()}}
        self.store.set_topic_assignment(t.name, read.topic_id, full, MATCH_ANY_VERSION)
        log.info("Added %d partitions to topic %s: %s", increment, t.name, added)
