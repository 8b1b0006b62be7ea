"""The partition state machine's election path: Kafka's ``doElectLeaderForPartitions`` and
``collectUncleanLeaderElectionState`` (``PartitionStateMachine.scala``).

Rounds of one batched read, the pure election functions of ``core.election`` (Kafka's
``Election.scala``), one batched conditional write; only partitions whose write hit BADVERSION go
round again. ``PartitionStateMachine`` calls it through a ``PartitionLeaderElector``, which is
given the context, store, batch, broker config and recorder it uses.

Departure from Kafka's call sequence, off unless ``write_on_cached_zk_version`` is on (as in
``core.replica_isr``, whose docs give the argument): a first round elects from the leadership
cached in the context and writes conditionally on its zk version, without reading. Only its
successful writes are kept: a write succeeds only on the version the cache holds, whose leader and
ISR the cache holds too, so the election made from the cache is the one Kafka's read would have
led to. Everything else — no cache, a newer controller epoch, no leader electable from the cache
(the cache might be stale), BADVERSION, NONODE — goes on to Kafka's rounds, read first. At failover
the partitions the dead broker led were written a moment before by the ISR removal, so their
20,000 re-reads at 100,000 partitions RF 3 are saved.

A partition with no online replica gets no leader whatever its state and its topic's config say
(every strategy elects an online replica of the assignment, which is the context's, not the state
znode's), so Kafka's read round could only fail it too: the cached round fails it at once with
Kafka's message, and reads neither its state nor its topic's config (at failover at RF 1, the
20,000 partitions of the dead broker and their topics). Only the reason could differ, for a state
changed behind the controller's back: Kafka's read would report a deleted state znode or a newer
controller epoch where this reports no leader, and audits the state it read as ``before`` where
this audits the cached one; the partition's state, the store and the requests are the same.

The early election write (``start_election_prewrite``): the offline election's write for the
partitions a new controller's startup leaves to it (``core.replica_offline``), started before the
online replicas move (``core.early_write``; both are in the README's deviations table). The startup
knows those partitions before its replica state machine moves anything; each has an online replica
of its assignment in its ISR, so the offline election elects it cleanly from the cached state,
reading no topic config. Nothing until the partition state machine's election writes or re-caches
them, so its cached round decides the same leaders and ISRs: it takes the early write's outcome for
the partitions whose decision is the one written, and writes the others itself. Should a decision
differ (never at startup), what the early write wrote is cached (and audited) first, as ZooKeeper
holds it, and the round's conditional write of those partitions hits BADVERSION and goes Kafka's
read-first way.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping

from kafka_controller.core.batch_api import LeaderAndIsrEntry, RequestBatch
from kafka_controller.core.context import ControllerContext
from kafka_controller.core.early_write import EarlyWrite
from kafka_controller.core.election import (
    ElectionDecision,
    ElectionResult,
    LiveReplicaFilter,
    leader_for_controlled_shutdown,
    leader_for_preferred_replica,
    leader_for_reassign,
    offline_election_decisions,
)
from kafka_controller.core.partition_records import ElectionOutcome, PartitionTransitionRecorder
from kafka_controller.core.state_reads import read_partition_states
from kafka_controller.core.strategies import (
    ControlledShutdownPartitionLeaderElectionStrategy,
    OfflinePartitionLeaderElectionStrategy,
    PartitionLeaderElectionStrategy,
    PreferredReplicaPartitionLeaderElectionStrategy,
    ReassignPartitionLeaderElectionStrategy,
)
from kafka_controller.domain.config_keys import UNCLEAN_LEADER_ELECTION_ENABLE
from kafka_controller.domain.errors import (
    ControllerMovedError,
    InvalidArgumentError,
    MetadataStoreError,
    NoNodeError,
    StateChangeFailedError,
)
from kafka_controller.domain.states import PartitionState
from kafka_controller.domain.values import (
    EMPTY_ASSIGNMENT,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    TopicPartition,
    build_leader_isr_and_controller_epoch,
)
from kafka_controller.ports import PartitionStateStore, UpdateLeaderAndIsrResult

__all__ = ["PartitionLeaderElector"]

state_change_log = logging.getLogger("kafka_controller.state_change")

_ONLINE = PartitionState.ONLINE_PARTITION
_NON_EXISTENT = PartitionState.NON_EXISTENT_PARTITION

#: A failure of the cached round that Kafka's read round decides instead (never returned).
_UNDECIDED_FROM_CACHE = StateChangeFailedError("no leader from the cached state: Kafka's read round decides")


class PartitionLeaderElector:
    """The election rounds of ``PartitionStateMachine`` (Kafka's ``doElectLeaderForPartitions``),
    and the startup's early election write (module docs)."""

    def __init__(
        self,
        controller_id: int,
        context: ControllerContext,
        store: PartitionStateStore,
        batch: RequestBatch,
        broker_config: Mapping[str, str],
        recorder: PartitionTransitionRecorder,
        *,
        write_on_cached_zk_version: bool = False,
    ) -> None:
        """``broker_config``: Kafka's ``config.originals()``, the defaults topic configs are merged
        over when deciding on unclean election; ``recorder``: where failures are logged and each
        election's ``before`` and uncleanness are noted for its audit row."""
        self.controller_id = controller_id
        self.controller_context = context
        self._store = store
        self._batch = batch
        self._broker_config: dict[str, str] = dict(broker_config)
        self._recorder = recorder
        #: Elect a first round from the cached states, without Kafka's re-read (see the module docs).
        self.write_on_cached_zk_version = write_on_cached_zk_version
        #: The startup's early election write, until an election round or ``abandon`` takes it.
        self.early_election: EarlyWrite | None = None

    def elect_leader_for_partitions(
        self,
        partitions: list[TopicPartition],
        strategy: PartitionLeaderElectionStrategy,
    ) -> dict[TopicPartition, ElectionOutcome]:
        """Rounds of read-elect-write; only BADVERSION partitions go round again, without limit
        (docs/controller-behaviour.md §3.6)."""
        states = self.controller_context.partition_states
        remaining: list[TopicPartition] = partitions
        finished: dict[TopicPartition, ElectionOutcome] = {}
        if self.write_on_cached_zk_version and remaining:
            remaining = self._elect_from_cached_states(remaining, strategy, finished)
        while remaining:
            elected, failed, remaining = self._do_elect_leader_for_partitions(remaining, strategy)
            for tp, error in failed.items():
                self._recorder.log_failed(tp, states[tp], _ONLINE, error)
            finished.update(elected)
            finished.update(failed)
            if remaining:
                state_change_log.info(
                    "Retrying leader election of %d partitions after BADVERSION", len(remaining)
                )
        return finished

    def _elect_from_cached_states(
        self,
        partitions: list[TopicPartition],
        strategy: PartitionLeaderElectionStrategy,
        finished: dict[TopicPartition, ElectionOutcome],
    ) -> list[TopicPartition]:
        """The round without a read (module docs): returns the partitions left for Kafka's rounds."""
        cached, unread = self.controller_context.cached_leaderships(partitions)
        self._fail_without_online_replica(cached, strategy, finished)
        if not cached:
            return unread
        elected, failed, retry = self._do_elect_leader_for_partitions(list(cached), strategy, cached)
        finished.update(elected)
        for tp, error in failed.items():
            if isinstance(error, NoNodeError) or not isinstance(error, MetadataStoreError):
                retry.append(tp)  # decided from the cache alone: Kafka's read decides instead
            else:
                finished[tp] = error  # the write failed: final, as after Kafka's read
                self._recorder.log_failed(tp, self.controller_context.partition_states[tp], _ONLINE, error)
        return unread + retry

    def _fail_without_online_replica(
        self,
        cached: dict[TopicPartition, LeaderIsrAndControllerEpoch],
        strategy: PartitionLeaderElectionStrategy,
        finished: dict[TopicPartition, ElectionOutcome],
    ) -> None:
        """Fail, with Kafka's message, and take out of ``cached`` the partitions with no online
        replica, which no state or config Kafka's read could find would give a leader (module docs)."""
        ctx = self.controller_context
        any_online, assignment = LiveReplicaFilter(ctx).any_online, ctx.partition_replica_assignment
        hopeless = [tp for tp in cached if not any_online(assignment(tp), tp)]
        strategy_text, states, notes = str(strategy), ctx.partition_states, self._recorder.notes
        for tp in hopeless:
            cached_state = cached.pop(tp)
            if notes is not None:
                notes.before[tp] = cached_state.leader_and_isr
            finished[tp] = error = self._no_leader_error(tp, strategy_text, None)
            self._recorder.log_failed(tp, states[tp], _ONLINE, error)

    def _do_elect_leader_for_partitions(
        self,
        partitions: list[TopicPartition],
        strategy: PartitionLeaderElectionStrategy,
        cached: Mapping[TopicPartition, LeaderIsrAndControllerEpoch] | None = None,
    ) -> tuple[dict[TopicPartition, ElectionOutcome], dict[TopicPartition, Exception], list[TopicPartition]]:
        """One round: ``(elected, failed, to_retry)``; only BADVERSION partitions are retried. With
        ``cached``, its states stand in for the read (``_elect_from_cached_states``)."""
        ctx = self.controller_context
        notes = self._recorder.notes  # None unless auditing
        reads = read_partition_states(self._store, partitions, cached)
        if isinstance(reads, Exception):
            return {}, dict.fromkeys(partitions, reads), []
        epoch = ctx.epoch
        failed: dict[TopicPartition, Exception] = {}
        valid: list[tuple[TopicPartition, LeaderAndIsr]] = []
        for tp in partitions:
            read = reads.get(tp)
            if isinstance(read, LeaderIsrAndControllerEpoch):
                if notes is not None:
                    notes.before[tp] = read.leader_and_isr
                if read.controller_epoch > epoch:
                    failed[tp] = StateChangeFailedError(
                        f"Leader and ISR of {tp} were written by controller epoch {read.controller_epoch}, "
                        f"newer than this controller's epoch {epoch}: it has probably been replaced. "
                        "Aborting the state change"
                    )
                else:
                    valid.append((tp, read.leader_and_isr))
            elif isinstance(read, Exception):
                failed[tp] = read
            else:
                failed[tp] = StateChangeFailedError(
                    f"LeaderAndIsr information doesn't exist for partition {tp} in "
                    f"{ctx.partition_states.get(tp, _NON_EXISTENT)} state"
                )
        if not valid:
            return {}, failed, []
        config_failures: dict[str, Exception] = {}
        decisions = self._run_strategy(valid, strategy, config_failures)
        to_update: dict[TopicPartition, LeaderAndIsr] = {}
        recipients: dict[TopicPartition, tuple[int, ...]] = {}
        strategy_text = str(strategy)
        for tp, new_leader_and_isr, live_replicas, unclean in decisions:
            if new_leader_and_isr is None:
                if cached is not None:
                    failed[tp] = _UNDECIDED_FROM_CACHE
                else:
                    failed[tp] = self._no_leader_error(tp, strategy_text, config_failures.get(tp.topic))
                continue
            to_update[tp] = new_leader_and_isr
            recipients[tp] = live_replicas
            if notes is not None:
                if unclean:
                    notes.unclean.add(tp)
                else:
                    notes.unclean.discard(tp)
        if not to_update:
            return {}, failed, []
        try:
            update = self._write_elected(to_update, epoch, ctx.epoch_zk_version)
        except ControllerMovedError:
            raise
        except Exception as e:
            failed.update(dict.fromkeys(to_update, e))
            return {}, failed, []
        elected: dict[TopicPartition, ElectionOutcome] = {}
        failed_before_update = len(failed)
        assignments = ctx.partition_assignments
        requests: list[LeaderAndIsrEntry] = []
        for tp, outcome in update.finished.items():
            if tp not in to_update:
                continue
            if isinstance(outcome, LeaderAndIsr):
                leadership = build_leader_isr_and_controller_epoch(outcome, epoch)
                # ctx.partition_full_replica_assignment(tp), inlined for the hot path.
                per_topic = assignments.get(tp.topic)
                full = per_topic.get(tp.partition) if per_topic is not None else None
                requests.append((recipients[tp], tp, leadership, full or EMPTY_ASSIGNMENT))
                elected[tp] = outcome
            else:
                failed[tp] = outcome
        # cached before queueing (the UpdateMetadata states are built from the cache), in one call
        ctx.put_partition_leadership_infos((tp, leadership) for _, tp, leadership, _ in requests)
        self._batch.add_leader_and_isr_requests(requests, False)
        retry = [tp for tp in update.to_retry if tp in to_update and tp not in elected and tp not in failed]
        if len(elected) + len(failed) - failed_before_update + len(retry) < len(to_update):
            answered = elected.keys() | failed.keys() | set(retry)
            for tp in to_update:
                if tp not in answered:
                    failed[tp] = StateChangeFailedError(
                        f"the metadata store returned no update result for {tp}"
                    )
        return elected, failed, retry

    def _run_strategy(
        self,
        valid: list[tuple[TopicPartition, LeaderAndIsr]],
        strategy: PartitionLeaderElectionStrategy,
        config_failures: dict[str, Exception],
    ) -> list[ElectionDecision]:
        ctx = self.controller_context
        if isinstance(strategy, OfflinePartitionLeaderElectionStrategy):
            with_unclean = self._collect_unclean_leader_election_state(
                valid, strategy.allow_unclean, config_failures
            )
            return offline_election_decisions(ctx, with_unclean)
        results: list[ElectionResult]
        if isinstance(strategy, ReassignPartitionLeaderElectionStrategy):
            results = leader_for_reassign(ctx, valid)
        elif isinstance(strategy, PreferredReplicaPartitionLeaderElectionStrategy):
            results = leader_for_preferred_replica(ctx, valid)
        elif isinstance(strategy, ControlledShutdownPartitionLeaderElectionStrategy):
            results = leader_for_controlled_shutdown(ctx, valid)
        else:
            raise InvalidArgumentError(f"unknown partition leader election strategy {strategy!r}")
        return [(r.topic_partition, r.leader_and_isr, r.live_replicas, r.unclean) for r in results]

    def _collect_unclean_leader_election_state(
        self,
        valid: list[tuple[TopicPartition, LeaderAndIsr]],
        allow_unclean: bool,
        config_failures: dict[str, Exception],
    ) -> list[tuple[TopicPartition, LeaderAndIsr | None, bool]]:
        """Unclean is allowed per partition only when no ISR member is online
        (docs/controller-behaviour.md §3.6).

        With ``allow_unclean`` false the topic configs are read even for an empty topic set, as
        Kafka does; a topic whose config cannot be read or is invalid fails its partitions.
        """
        live = LiveReplicaFilter(self.controller_context)
        no_live_isr: list[tuple[TopicPartition, LeaderAndIsr]] = []
        with_live_isr: list[tuple[TopicPartition, LeaderAndIsr | None, bool]] = []
        if live.has_offline_dirs:
            any_online = live.any_online
            for tp, leader_and_isr in valid:
                if any_online(leader_and_isr.isr, tp):
                    with_live_isr.append((tp, leader_and_isr, False))
                else:
                    no_live_isr.append((tp, leader_and_isr))
        else:
            live_ids = live.broker_ids
            for tp, leader_and_isr in valid:
                if live_ids.isdisjoint(leader_and_isr.isr):
                    no_live_isr.append((tp, leader_and_isr))
                else:
                    with_live_isr.append((tp, leader_and_isr, False))
        if allow_unclean:
            return [(tp, lai, True) for tp, lai in no_live_isr] + with_live_isr
        topics = {tp.topic for tp, _ in no_live_isr}
        configs, failures = self._store.get_log_configs(topics, self._broker_config)
        config_failures.update(failures)
        unclean_by_topic: dict[str, bool] = {}
        for topic in topics:
            if topic in config_failures:
                continue
            try:
                unclean_by_topic[topic] = _unclean_enabled(topic, configs.get(topic, self._broker_config))
            except InvalidArgumentError as e:
                config_failures[topic] = e
        collected: list[tuple[TopicPartition, LeaderAndIsr | None, bool]] = []
        for tp, leader_and_isr in no_live_isr:
            enabled = unclean_by_topic.get(tp.topic)
            if enabled is None:
                collected.append((tp, None, False))
            else:
                collected.append((tp, leader_and_isr, enabled))
        return collected + with_live_isr

    def _no_leader_error(
        self, tp: TopicPartition, strategy: str, config_error: Exception | None
    ) -> StateChangeFailedError:
        message = f"Failed to elect leader for partition {tp} under strategy {strategy}"
        if config_error is None:
            return StateChangeFailedError(message)
        error = StateChangeFailedError(
            f"{message}: cannot use the config of topic {tp.topic}: {config_error}"
        )
        error.__cause__ = config_error
        return error

    # ------------------------------------------------------------------ the early election write
    def start_election_prewrite(self, partitions: Collection[TopicPartition]) -> None:
        """Write now the clean offline election of each of ``partitions`` from its cached state."""
        self.abandon_election_prewrite()
        if not self.write_on_cached_zk_version or not partitions:
            return
        ctx = self.controller_context
        cached, _ = ctx.cached_leaderships(partitions)
        valid = [(tp, info.leader_and_isr) for tp, info in cached.items()]
        # the election's own split into partitions with and without an online ISR member; allowing
        # unclean marks the latter (and reads no config): only the clean ones are written early
        collected = self._collect_unclean_leader_election_state(valid, True, {})
        clean = [c for c in collected if not c[2]]
        states = {tp: lai for tp, lai, _, _ in offline_election_decisions(ctx, clean) if lai is not None}
        if states:
            self.early_election = EarlyWrite(
                self._store, states, ctx.epoch, ctx.epoch_zk_version, "election-prewrite"
            )

    def abandon_election_prewrite(self) -> None:
        """Wait for an early write no election took and cache what it wrote."""
        early, self.early_election = self.early_election, None
        if early is not None:
            early.cache_written(self.controller_context, self._recorder.audit)

    def _write_elected(
        self, to_update: dict[TopicPartition, LeaderAndIsr], epoch: int, epoch_zk_version: int
    ) -> UpdateLeaderAndIsrResult:
        """``update_leader_and_isr`` of a round's decisions, taking the early write's outcome for
        the partitions it wrote with the same decision."""
        early, self.early_election = self.early_election, None
        if early is None:
            return self._store.update_leader_and_isr(to_update, epoch, epoch_zk_version)
        written = early.states
        # every partition written early is decided alike (one comparison of the two mappings)
        if not written.items() <= to_update.items():
            early.cache_written(self.controller_context, self._recorder.audit)
            return self._store.update_leader_and_isr(to_update, epoch, epoch_zk_version)
        everything = len(written) == len(to_update)  # the usual case: the early write is the round's
        rest = {} if everything else {tp: lai for tp, lai in to_update.items() if tp not in written}
        done = early.result()
        other = self._store.update_leader_and_isr(rest, epoch, epoch_zk_version) if rest else None
        # one answer, in the order of ``to_update``: the order a single write answers in, which the
        # election's requests and audit records follow
        finished, more = done.finished, other.finished if other is not None else {}
        if other is None and list(finished) == list(to_update):
            merged = dict(finished)  # answered in that order already
        else:
            merged = {
                tp: finished[tp] if tp in finished else more[tp]
                for tp in to_update
                if tp in finished or tp in more
            }
        retry = set(done.to_retry).union(other.to_retry if other is not None else ())
        return UpdateLeaderAndIsrResult(merged, [tp for tp in to_update if tp in retry] if retry else [])


def _unclean_enabled(topic: str, config: Mapping[str, str]) -> bool:
    """``unclean.leader.election.enable`` of a merged topic config; Kafka's default is false."""
    value = config.get(UNCLEAN_LEADER_ELECTION_ENABLE)
    if value is None:
        return False
    normalized = str(value).strip().lower()
    if normalized == "true":
        return True
    if normalized == "false":
        return False
    raise InvalidArgumentError(
        f"invalid {UNCLEAN_LEADER_ELECTION_ENABLE}={value!r} for topic {topic}: expected true or false"
    )
