"""The partition state machine (spec §3): Kafka's ``ZkPartitionStateMachine``.

``handle_state_changes`` returns only election outcomes (Online/Offline -> Online): the written
``LeaderAndIsr`` or the per-partition error. Invalid transitions are logged and skipped, never
raised. ``ControllerMovedError`` always propagates (the controller must resign); any other error
fails every partition of the call and the batch is not sent. Store I/O is one batched call per
round: one read, at most one ``get_log_configs``, one conditional write; only partitions whose
write hit BADVERSION go round again, re-read.
"""

from __future__ import annotations

import abc
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from kafka_controller.core.batch_api import LeaderAndIsrEntry, RequestBatch
from kafka_controller.core.context import ControllerContext
from kafka_controller.core.election import (
    ElectionDecision,
    ElectionResult,
    LiveReplicaFilter,
    leader_for_controlled_shutdown,
    leader_for_preferred_replica,
    leader_for_reassign,
    offline_election_decisions,
)
from kafka_controller.core.log_budget import LogBudget
from kafka_controller.core.strategies import (
    ControlledShutdownPartitionLeaderElectionStrategy,
    OfflinePartitionLeaderElectionStrategy,
    PartitionLeaderElectionStrategy,
    PreferredReplicaPartitionLeaderElectionStrategy,
    ReassignPartitionLeaderElectionStrategy,
)
from kafka_controller.domain.audit_records import (
    OUTCOME_FAILED,
    OUTCOME_INVALID,
    OUTCOME_OK,
    PartitionTransition,
    require_leading_fields,
)
from kafka_controller.domain.errors import (
    ControllerMovedError,
    InvalidArgumentError,
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
from kafka_controller.ports import AuditSink, NullAuditSink, PartitionStateStore

__all__ = ["AbstractPartitionStateMachine", "PartitionStateMachine"]

_log = logging.getLogger(__name__)
state_change_log = logging.getLogger("kafka_controller.state_change")

_NEW = PartitionState.NEW_PARTITION
_ONLINE = PartitionState.ONLINE_PARTITION
_OFFLINE = PartitionState.OFFLINE_PARTITION
_NON_EXISTENT = PartitionState.NON_EXISTENT_PARTITION
_TRIGGER_STATES = frozenset({_OFFLINE, _NEW})
UNCLEAN_LEADER_ELECTION_ENABLE = "unclean.leader.election.enable"

ElectionOutcome = LeaderAndIsr | Exception
Records = list[PartitionTransition] | None


class AbstractPartitionStateMachine(abc.ABC):
    """What the controller and the topic-deletion manager use; tests substitute a mock."""

    def __init__(self, context: ControllerContext) -> None:
        self.controller_context = context

    def startup(self) -> None:
        _log.info("Initializing partition state")
        self.initialize_partition_state()
        _log.info("Triggering online partition state changes")
        self.trigger_online_partition_state_change()

    def shutdown(self) -> None:
        _log.info("Stopped partition state machine")

    def initialize_partition_state(self) -> None:
        """New without leadership; else Online iff the cached leader is online (leader -1 never is)."""
        ctx = self.controller_context
        live = LiveReplicaFilter(ctx)
        leadership_of = ctx.partition_leadership_info
        put = ctx.put_partition_state
        for tp, _ in ctx.iter_assignments():
            info = leadership_of(tp)
            if info is None:
                put(tp, _NEW)
            elif live.is_online(info.leader_and_isr.leader, tp):
                put(tp, _ONLINE)
            else:
                put(tp, _OFFLINE)

    def trigger_online_partition_state_change(
        self, topic: str | None = None
    ) -> dict[TopicPartition, LeaderAndIsr | Exception]:
        """Elect leaders for New/Offline partitions (of ``topic``), skipping topics queued for deletion.

        Unclean election is then decided per topic from its config (spec §3.6).
        """
        ctx = self.controller_context
        if topic is None:
            candidates = ctx.partitions_in_states(_TRIGGER_STATES)
        else:
            states = ctx.partition_states
            candidates = [tp for tp in ctx.partitions_for_topic(topic) if states.get(tp) in _TRIGGER_STATES]
        queued = ctx.topics_to_be_deleted
        partitions = [tp for tp in candidates if tp.topic not in queued] if queued else candidates
        return self.handle_state_changes(
            partitions, _ONLINE, OfflinePartitionLeaderElectionStrategy(allow_unclean=False)
        )

    @abc.abstractmethod
    def handle_state_changes(
        self,
        partitions: Sequence[TopicPartition],
        target: PartitionState,
        strategy: PartitionLeaderElectionStrategy | None = None,
    ) -> dict[TopicPartition, LeaderAndIsr | Exception]:
        """Move ``partitions`` to ``target``; returns the outcome of each leader election."""


@dataclass(slots=True)
class _ElectionNotes:
    """What the audit records of an election need beyond the result map (kept only when auditing)."""

    before: dict[TopicPartition, LeaderAndIsr] = field(default_factory=dict)
    unclean: set[TopicPartition] = field(default_factory=set)


class PartitionStateMachine(AbstractPartitionStateMachine):
    """Kafka's ``ZkPartitionStateMachine`` over a ``PartitionStateStore`` and a dedicated batch.

    ``broker_config`` is Kafka's ``config.originals()``: broker settings as strings, the defaults
    that topic configs are merged over when deciding on unclean election.
    """

    def __init__(
        self,
        controller_id: int,
        context: ControllerContext,
        store: PartitionStateStore,
        batch: RequestBatch,
        *,
        broker_config: Mapping[str, str] | None = None,
        audit: AuditSink | None = None,
    ) -> None:
        super().__init__(context)
        self.controller_id = controller_id
        self._store = store
        self._batch = batch
        self._broker_config: dict[str, str] = dict(broker_config or {})
        self._audit = None if audit is None or isinstance(audit, NullAuditSink) else audit
        self._failure_lines = LogBudget()

    # ------------------------------------------------------------------------- entry point
    def handle_state_changes(
        self,
        partitions: Sequence[TopicPartition],
        target: PartitionState,
        strategy: PartitionLeaderElectionStrategy | None = None,
    ) -> dict[TopicPartition, LeaderAndIsr | Exception]:
        if not partitions:
            return {}
        ctx = self.controller_context
        records: Records = [] if self._audit is not None else None
        self._failure_lines.reset()
        try:
            self._batch.new_batch()
            result = self._do_handle_state_changes(partitions, target, strategy, records)
            self._batch.send_requests_to_brokers(ctx.epoch)
        except ControllerMovedError as e:
            _log.error("Controller moved to another broker when moving some partitions to %s state", target)
            self._deliver_audit(records, partitions, target, e)
            raise
        except Exception as e:
            _log.error("Error while moving some partitions to %s state", target, exc_info=True)
            self._deliver_audit(records, partitions, target, e)
            failed: dict[TopicPartition, LeaderAndIsr | Exception] = dict.fromkeys(partitions, e)
            return failed
        finally:
            self._failure_lines.summarize(
                state_change_log, logging.ERROR, f"partitions failed to move to {target}"
            )
        self._deliver_audit(records, partitions, target, None)
        return result

    def _do_handle_state_changes(
        self,
        partitions: Sequence[TopicPartition],
        target: PartitionState,
        strategy: PartitionLeaderElectionStrategy | None,
        records: Records,
    ) -> dict[TopicPartition, ElectionOutcome]:
        ctx = self.controller_context
        states = ctx.partition_states
        for tp in partitions:
            if tp not in states:
                ctx.put_partition_state_if_not_exists(tp, _NON_EXISTENT)
        valid, invalid = ctx.check_valid_partition_state_change(partitions, target)
        if invalid:
            self._log_invalid_transitions(invalid, target, records)
        if target is _ONLINE:
            return self._to_online(valid, strategy, records)
        debug = state_change_log.isEnabledFor(logging.DEBUG)
        for tp in valid:
            if debug:
                state_change_log.debug(
                    "Changed partition %s state from %s to %s with assigned replicas %s",
                    tp,
                    states[tp],
                    target,
                    ctx.partition_replica_assignment(tp),
                )
            if records is not None:
                records.append(self._transition(tp, states[tp], target))
            ctx.put_partition_state(tp, target)
        if valid:
            state_change_log.info("Changed %d partitions to %s", len(valid), target)
        return {}

    # ------------------------------------------------------------------------- -> OnlinePartition
    def _to_online(
        self,
        valid: list[TopicPartition],
        strategy: PartitionLeaderElectionStrategy | None,
        records: Records,
    ) -> dict[TopicPartition, ElectionOutcome]:
        ctx = self.controller_context
        states = ctx.partition_states
        uninitialized = [tp for tp in valid if states[tp] is _NEW]
        to_elect = [tp for tp in valid if states[tp] is not _NEW] if uninitialized else valid
        if uninitialized:
            for tp in self._initialize_leader_and_isr_for_partitions(uninitialized, records):
                ctx.put_partition_state(tp, _ONLINE)
        if not to_elect:
            return {}
        if strategy is None:
            raise InvalidArgumentError(
                "an election strategy is required when the target state is OnlinePartition"
            )
        notes = _ElectionNotes() if records is not None else None
        results = self._elect_leader_for_partitions(to_elect, strategy, notes)
        debug = state_change_log.isEnabledFor(logging.DEBUG)
        elected = 0
        for tp, outcome in results.items():
            from_state = states[tp]
            if isinstance(outcome, LeaderAndIsr):
                elected += 1
                if debug:
                    state_change_log.debug(
                        "Changed partition %s from %s to %s with state %s", tp, from_state, _ONLINE, outcome
                    )
                ctx.put_partition_state(tp, _ONLINE)
            if records is not None and notes is not None:
                records.append(self._election_transition(tp, from_state, outcome, strategy, notes))
        state_change_log.info(
            "Elected leaders for %d of %d partitions under %s", elected, len(to_elect), strategy
        )
        return results

    def _initialize_leader_and_isr_for_partitions(
        self, partitions: list[TopicPartition], records: Records
    ) -> list[TopicPartition]:
        """New -> Online: the first online replica leads, all online replicas form the ISR (§3.5)."""
        ctx = self.controller_context
        live = LiveReplicaFilter(ctx)
        epoch = ctx.epoch
        to_create: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        for tp in partitions:
            assignment = ctx.partition_replica_assignment(tp)
            live_replicas = live.filter(assignment, tp)
            if live_replicas:
                to_create[tp] = LeaderIsrAndControllerEpoch(
                    LeaderAndIsr.initial(live_replicas[0], live_replicas), epoch
                )
                continue
            error = StateChangeFailedError(
                f"Controller {self.controller_id} epoch {epoch} encountered error during state change of "
                f"partition {tp} from New to Online, assigned replicas are {list(assignment)}, live brokers "
                f"are {sorted(ctx.live_broker_ids)}. No assigned replica is alive."
            )
            self._failed(tp, _NEW, _ONLINE, error, records)
        if not to_create:
            return []
        try:
            responses = self._store.create_partition_states(to_create, ctx.epoch_zk_version)
        except ControllerMovedError:
            _log.error("Controller moved to another broker when creating partition state znodes")
            raise
        except Exception as e:
            for tp in to_create:
                self._failed(tp, _NEW, _ONLINE, e, records)
            return []
        initialized: list[TopicPartition] = []
        requests: list[LeaderAndIsrEntry] = []
        for tp, leadership in to_create.items():
            if tp not in responses:
                missing = StateChangeFailedError(f"the metadata store gave no create result for {tp}")
                self._failed(tp, _NEW, _ONLINE, missing, records)
                continue
            create_error = responses[tp]
            if create_error is not None:
                self._failed(tp, _NEW, _ONLINE, create_error, records)
                continue
            ctx.put_partition_leadership_info(tp, leadership)
            leader_and_isr = leadership.leader_and_isr
            requests.append((leader_and_isr.isr, tp, leadership, ctx.partition_full_replica_assignment(tp)))
            initialized.append(tp)
            if records is not None:
                records.append(self._transition(tp, _NEW, _ONLINE, after=leader_and_isr))
        self._batch.add_leader_and_isr_requests(requests, True)
        if initialized:
            state_change_log.info("Initialized leader and ISR of %d new partitions", len(initialized))
        return initialized

    # ------------------------------------------------------------------------- elections
    def _elect_leader_for_partitions(
        self,
        partitions: list[TopicPartition],
        strategy: PartitionLeaderElectionStrategy,
        notes: _ElectionNotes | None,
    ) -> dict[TopicPartition, ElectionOutcome]:
        """Rounds of read-elect-write; only BADVERSION partitions go round again (no limit, §3.6)."""
        states = self.controller_context.partition_states
        remaining: list[TopicPartition] = partitions
        finished: dict[TopicPartition, ElectionOutcome] = {}
        while remaining:
            elected, failed, remaining = self._do_elect_leader_for_partitions(remaining, strategy, notes)
            for tp, error in failed.items():
                self._log_failed(tp, states[tp], _ONLINE, error)
            finished.update(elected)
            finished.update(failed)
            if remaining:
                state_change_log.info(
                    "Retrying leader election of %d partitions after BADVERSION", len(remaining)
                )
        return finished

    def _do_elect_leader_for_partitions(
        self,
        partitions: list[TopicPartition],
        strategy: PartitionLeaderElectionStrategy,
        notes: _ElectionNotes | None,
    ) -> tuple[dict[TopicPartition, ElectionOutcome], dict[TopicPartition, Exception], list[TopicPartition]]:
        """One round: ``(elected, failed, to_retry)``; only BADVERSION partitions are retried."""
        ctx = self.controller_context
        try:
            reads = self._store.get_partition_states(partitions)
        except ControllerMovedError:
            raise
        except Exception as e:
            return {}, dict.fromkeys(partitions, e), []
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
        for tp, new_leader_and_isr, live_replicas, unclean in decisions:
            if new_leader_and_isr is None:
                failed[tp] = self._no_leader_error(tp, strategy, config_failures.get(tp.topic))
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
            update = self._store.update_leader_and_isr(to_update, epoch, ctx.epoch_zk_version)
        except ControllerMovedError:
            raise
        except Exception as e:
            failed.update(dict.fromkeys(to_update, e))
            return {}, failed, []
        elected: dict[TopicPartition, ElectionOutcome] = {}
        failed_before_update = len(failed)
        put_leadership = ctx.put_partition_leadership_info
        assignments = ctx.partition_assignments
        requests: list[LeaderAndIsrEntry] = []
        for tp, outcome in update.finished.items():
            if tp not in to_update:
                continue
            if isinstance(outcome, LeaderAndIsr):
                leadership = build_leader_isr_and_controller_epoch(outcome, epoch)
                put_leadership(tp, leadership)
                # ctx.partition_full_replica_assignment(tp), inlined for the hot path.
                per_topic = assignments.get(tp.topic)
                full = per_topic.get(tp.partition) if per_topic is not None else None
                requests.append((recipients[tp], tp, leadership, full or EMPTY_ASSIGNMENT))
                elected[tp] = outcome
            else:
                failed[tp] = outcome
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
        """Unclean is allowed per partition only when no ISR member is online (§3.6 step 4).

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
        self, tp: TopicPartition, strategy: PartitionLeaderElectionStrategy, config_error: Exception | None
    ) -> StateChangeFailedError:
        message = f"Failed to elect leader for partition {tp} under strategy {strategy}"
        if config_error is None:
            return StateChangeFailedError(message)
        error = StateChangeFailedError(
            f"{message}: cannot use the config of topic {tp.topic}: {config_error}"
        )
        error.__cause__ = config_error
        return error

    # ------------------------------------------------------------------------- logging and audit
    def _log_invalid_transitions(
        self, invalid: list[TopicPartition], target: PartitionState, records: Records
    ) -> None:
        states = self.controller_context.partition_states
        allowed = ",".join(sorted(s.kafka_name for s in target.valid_previous_states))
        enabled = state_change_log.isEnabledFor(logging.ERROR)
        if not enabled and records is None:
            return
        for tp in invalid:
            current = states[tp]
            message = (
                f"Partition {tp} should be in one of {allowed} states before moving to {target} state. "
                f"Instead it is in {current} state"
            )
            if enabled:
                self._log_failed(tp, current, target, message)
            if records is not None:
                records.append(self._transition(tp, current, target, OUTCOME_INVALID, error=message))

    def _log_failed(
        self, tp: TopicPartition, current: PartitionState, target: PartitionState, error: object
    ) -> None:
        if not self._failure_lines.take():
            return
        state_change_log.error(
            "Controller %d epoch %d failed to change state for partition %s from %s to %s: %s",
            self.controller_id,
            self.controller_context.epoch,
            tp,
            current,
            target,
            error,
        )

    def _failed(
        self,
        tp: TopicPartition,
        current: PartitionState,
        target: PartitionState,
        error: Exception,
        records: Records,
    ) -> None:
        self._log_failed(tp, current, target, error)
        if records is not None:
            records.append(self._transition(tp, current, target, OUTCOME_FAILED, error=_error_text(error)))

    def _transition(
        self,
        tp: TopicPartition,
        current: PartitionState,
        target: PartitionState,
        outcome: str = OUTCOME_OK,
        *,
        after: LeaderAndIsr | None = None,
        error: str | None = None,
    ) -> PartitionTransition:
        """A non-election record: ``before`` is the cached leadership, unchanged unless ``after`` is given."""
        cached = self.controller_context.partition_leadership_info(tp)
        before = cached.leader_and_isr if cached is not None and after is None else None
        return _record(
            tp, current, target, outcome, before, after if after is not None else before, error=error
        )

    def _election_transition(
        self,
        tp: TopicPartition,
        current: PartitionState,
        outcome: ElectionOutcome,
        strategy: PartitionLeaderElectionStrategy,
        notes: _ElectionNotes,
    ) -> PartitionTransition:
        before = notes.before.get(tp)
        if isinstance(outcome, LeaderAndIsr):
            return _record(
                tp, current, _ONLINE, OUTCOME_OK, before, outcome, str(strategy), tp in notes.unclean
            )
        if before is None:
            cached = self.controller_context.partition_leadership_info(tp)
            before = cached.leader_and_isr if cached is not None else None
        return _record(
            tp, current, _ONLINE, OUTCOME_FAILED, before, None, str(strategy), error=_error_text(outcome)
        )

    def _deliver_audit(
        self,
        records: Records,
        partitions: Sequence[TopicPartition],
        target: PartitionState,
        error: Exception | None,
    ) -> None:
        """One ``record`` call per ``handle_state_changes``; on an error, unrecorded partitions fail."""
        if records is None or self._audit is None:
            return
        if error is not None:
            states = self.controller_context.partition_states
            seen = {(r.topic, r.partition) for r in records}
            text = _error_text(error)
            for tp in dict.fromkeys(partitions):
                if (tp.topic, tp.partition) not in seen:
                    current = states.get(tp, _NON_EXISTENT)
                    records.append(self._transition(tp, current, target, OUTCOME_FAILED, error=text))
        self._audit.record(records)


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


def _error_text(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


def _record(
    tp: TopicPartition,
    current: PartitionState,
    target: PartitionState,
    outcome: str,
    before: LeaderAndIsr | None,
    after: LeaderAndIsr | None,
    strategy: str | None = None,
    unclean: bool = False,
    error: str | None = None,
) -> PartitionTransition:
    """Positional, in ``PartitionTransition``'s field order: one per partition of a failover."""
    return PartitionTransition(
        tp.topic,
        tp.partition,
        _KAFKA_NAME[current],
        _KAFKA_NAME[target],
        outcome,
        before.leader if before is not None else None,
        after.leader if after is not None else None,
        before.isr if before is not None else None,
        after.isr if after is not None else None,
        before.leader_epoch if before is not None else None,
        after.leader_epoch if after is not None else None,
        strategy,
        unclean,
        error,
    )


_KAFKA_NAME: dict[PartitionState, str] = {s: s.kafka_name for s in PartitionState}
# ``_record`` is positional: refuse to import if ``PartitionTransition``'s leading fields move.
_RECORD_FIELDS = [
    "topic",
    "partition",
    "from_state",
    "to_state",
    "outcome",
    "leader_before",
    "leader_after",
    "isr_before",
    "isr_after",
    "leader_epoch_before",
    "leader_epoch_after",
    "election_strategy",
    "unclean",
    "error",
]
require_leading_fields(PartitionTransition, _RECORD_FIELDS, "partition_state_machine._record")
