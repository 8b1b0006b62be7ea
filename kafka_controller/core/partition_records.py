"""``PartitionTransitionRecorder``: the log lines and audit rows of the partition state machine.

One object owns what a ``handle_state_changes`` call records, and the one choice of shape: one
``PartitionTransition`` per partition, built positionally (one per partition of a failover, so the
field order is checked once, at import), or, for a ``BulkAuditSink``, successes and
failed elections gathered as columns (``PartitionTransitionColumns``, the failures with a column
of their messages). The machine and its elector say what happened;
neither holds a record list, a flag for the shape, or the notes an election's rows need.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import groupby, repeat
from operator import itemgetter
from typing import Any, cast

from kafka_controller.core.context import ControllerContext
from kafka_controller.core.log_budget import LogBudget
from kafka_controller.domain.audit_records import (
    OUTCOME_FAILED,
    OUTCOME_INVALID,
    OUTCOME_OK,
    PartitionTransition,
    PartitionTransitionColumns,
    require_leading_fields,
)
from kafka_controller.domain.states import PartitionState
from kafka_controller.domain.values import LeaderAndIsr, LeaderIsrAndControllerEpoch, TopicPartition
from kafka_controller.hotpath import members, values_at
from kafka_controller.ports import AuditSink, BulkAuditSink, NullAuditSink, record_items

__all__ = [
    "ElectionNotes",
    "ElectionOutcome",
    "PartitionRecords",
    "PartitionTransitionRecorder",
    "error_text",
    "leader_and_isr_columns",
    "partition_transition",
    "recorded_partitions",
]

#: One state-machine call's records, in recording order.
PartitionRecords = list[PartitionTransition | PartitionTransitionColumns]
#: An election's outcome: the written ``LeaderAndIsr``, or why the partition got none.
ElectionOutcome = LeaderAndIsr | Exception

state_change_log = logging.getLogger("kafka_controller.state_change")
_NON_EXISTENT = PartitionState.NON_EXISTENT_PARTITION


@dataclass(slots=True)
class ElectionNotes:
    """What the audit rows of an election need beyond the result map: the state each partition's
    election read (its ``before``) and which were unclean."""

    before: dict[TopicPartition, LeaderAndIsr] = field(default_factory=dict)
    unclean: set[TopicPartition] = field(default_factory=set)


class PartitionTransitionRecorder:
    """The log lines and audit rows of one ``handle_state_changes`` call at a time (``begin``,
    then ``deliver`` and ``summarize``), for ``PartitionStateMachine`` and its elector."""

    def __init__(self, controller_id: int, context: ControllerContext, audit: AuditSink | None) -> None:
        self.controller_id = controller_id
        self.controller_context = context
        #: The sink, None when auditing is off (nothing is built then).
        self.audit: AuditSink | None = None if audit is None or isinstance(audit, NullAuditSink) else audit
        self._bulk = isinstance(self.audit, BulkAuditSink)
        self._records: PartitionRecords | None = None
        #: The election notes of the call in progress, None when auditing is off: the elector
        #: notes each ``before`` and unclean election here as it reads and decides.
        self.notes: ElectionNotes | None = None
        self._failure_lines = LogBudget()

    @property
    def auditing(self) -> bool:
        """Whether the call in progress builds audit rows."""
        return self._records is not None

    def begin(self) -> None:
        self._records = [] if self.audit is not None else None
        self.notes = ElectionNotes() if self.audit is not None else None
        self._failure_lines.reset()

    def summarize(self, target: PartitionState) -> None:
        """The suppressed failure lines of the call, as one line."""
        self._failure_lines.summarize(
            state_change_log, logging.ERROR, f"partitions failed to move to {target}"
        )

    def log_failed(
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

    def log_invalid_transitions(self, invalid: list[TopicPartition], target: PartitionState) -> None:
        states = self.controller_context.partition_states
        allowed = ",".join(sorted(s.kafka_name for s in target.valid_previous_states))
        enabled = state_change_log.isEnabledFor(logging.ERROR)
        records = self._records
        if not enabled and records is None:
            return
        for tp in invalid:
            current = states[tp]
            message = (
                f"Partition {tp} should be in one of {allowed} states before moving to {target} state. "
                f"Instead it is in {current} state"
            )
            if enabled:
                self.log_failed(tp, current, target, message)
            if records is not None:
                self.record(tp, current, target, OUTCOME_INVALID, error=message)

    def failed(
        self, tp: TopicPartition, current: PartitionState, target: PartitionState, error: Exception
    ) -> None:
        self.log_failed(tp, current, target, error)
        if self._records is not None:
            self.record(tp, current, target, OUTCOME_FAILED, error=error_text(error))

    def record(
        self,
        tp: TopicPartition,
        current: PartitionState,
        target: PartitionState,
        outcome: str = OUTCOME_OK,
        *,
        after: LeaderAndIsr | None = None,
        error: str | None = None,
    ) -> None:
        """A non-election row: ``before`` is the cached leadership, unchanged unless ``after`` is given."""
        records = self._records
        if records is None:
            return
        cached = self.controller_context.partition_leadership_info(tp)
        before = cached.leader_and_isr if cached is not None and after is None else None
        after = after if after is not None else before
        if outcome == OUTCOME_OK:
            return _record_success(records, self._bulk, tp, current, target, before, after)
        records.append(partition_transition(tp, current, target, outcome, before, after, error=error))

    def record_elections(
        self,
        tps: list[TopicPartition],
        outcomes: list[ElectionOutcome],
        currents: list[PartitionState],
        strategy: str,
    ) -> None:
        """The rows of these elections, in order, with what the call's notes say of each."""
        records, notes = self._records, self.notes
        if records is None or notes is None:
            return
        lookup = self.controller_context.partition_leadership_info
        _record_elections(records, self._bulk, tps, outcomes, currents, strategy, notes, lookup)

    def deliver(
        self, partitions: Sequence[TopicPartition], target: PartitionState, error: Exception | None
    ) -> None:
        """One ``record`` call per ``handle_state_changes``; on an error, unrecorded partitions fail."""
        records = self._records
        try:
            if records is None or self.audit is None:
                return
            if error is not None:
                states = self.controller_context.partition_states
                seen = recorded_partitions(records)
                text = error_text(error)
                for tp in dict.fromkeys(partitions):
                    if (tp.topic, tp.partition) not in seen:
                        current = states.get(tp, _NON_EXISTENT)
                        self.record(tp, current, target, OUTCOME_FAILED, error=text)
            record_items(self.audit, records)
        finally:
            self._records = self.notes = None


def error_text(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


def partition_transition(
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


def _record_success(
    records: PartitionRecords,
    bulk: bool,
    tp: TopicPartition,
    current: PartitionState,
    target: PartitionState,
    before: LeaderAndIsr | None,
    after: LeaderAndIsr | None,
    strategy: str | None = None,
    unclean: bool = False,
) -> None:
    """Record one successful transition: into the trailing ``PartitionTransitionColumns`` of the same
    target and strategy when ``bulk`` (a new one after anything else), else as a single record."""
    if not bulk:
        record = partition_transition(tp, current, target, OUTCOME_OK, before, after, strategy, unclean)
        records.append(record)
        return
    last = _trailing(records, _KAFKA_NAME[target], strategy)
    last.add(
        tp.topic,
        tp.partition,
        _KAFKA_NAME[current],
        before.leader if before is not None else None,
        after.leader if after is not None else None,
        before.isr if before is not None else None,
        after.isr if after is not None else None,
        before.leader_epoch if before is not None else None,
        after.leader_epoch if after is not None else None,
        unclean,
    )


def _record_election(
    records: PartitionRecords,
    bulk: bool,
    tp: TopicPartition,
    current: PartitionState,
    outcome: ElectionOutcome,
    strategy: str,
    notes: ElectionNotes,
    cached: Callable[[TopicPartition], LeaderIsrAndControllerEpoch | None],
) -> None:
    """Record one election's outcome; a failure's ``before`` is the cached leadership if the
    election noted none."""
    if isinstance(outcome, LeaderAndIsr):
        before = notes.before.get(tp)
        _record_success(records, bulk, tp, current, _ONLINE, before, outcome, strategy, tp in notes.unclean)
        return
    before = _failed_before(tp, notes, cached)
    error = error_text(outcome)
    records.append(
        partition_transition(tp, current, _ONLINE, OUTCOME_FAILED, before, None, strategy, error=error)
    )


def _record_elections(
    records: PartitionRecords,
    bulk: bool,
    tps: list[TopicPartition],
    outcomes: list[ElectionOutcome],
    currents: list[PartitionState],
    strategy: str,
    notes: ElectionNotes,
    cached: Callable[[TopicPartition], LeaderIsrAndControllerEpoch | None],
) -> None:
    """``_record_election`` of each election, in order; for a bulk sink, each run of successes and
    each run of failures as columns (a failover's 20,000 elections), not ten appends and a call
    chain a partition."""
    if not bulk:
        for tp, outcome, current in zip(tps, outcomes, currents, strict=True):
            _record_election(records, bulk, tp, current, outcome, strategy, notes, cached)
        return
    elected_at = list(map(isinstance, outcomes, repeat(LeaderAndIsr, len(outcomes))))
    start = 0
    for ok, run in groupby(elected_at):
        stop = start + sum(1 for _ in run)
        if ok:
            elected = cast("list[LeaderAndIsr]", outcomes[start:stop])
            _extend_elected(records, tps[start:stop], elected, currents[start:stop], strategy, notes)
        else:
            failures = cast("list[Exception]", outcomes[start:stop])
            _extend_failed(records, tps[start:stop], failures, currents[start:stop], strategy, notes, cached)
        start = stop


def _failed_before(
    tp: TopicPartition,
    notes: ElectionNotes,
    cached: Callable[[TopicPartition], LeaderIsrAndControllerEpoch | None],
) -> LeaderAndIsr | None:
    """A failed election's ``before``: what it noted, else the cached leadership."""
    before = notes.before.get(tp)
    if before is None and (info := cached(tp)) is not None:
        return info.leader_and_isr
    return before


def _extend_failed(
    records: PartitionRecords,
    tps: list[TopicPartition],
    errors: list[Exception],
    currents: list[PartitionState],
    strategy: str,
    notes: ElectionNotes,
    cached: Callable[[TopicPartition], LeaderIsrAndControllerEpoch | None],
) -> None:
    """``_record_election`` of each of these failed elections, in bulk: rows of the trailing failed
    record, with their messages (at RF 1 a failover fails 20,000, one single record each before)."""
    befores: list[LeaderAndIsr | None] = list(map(notes.before.get, tps))
    if None in befores:
        befores = [_failed_before(tp, notes, cached) for tp in tps]
    nones: list[None] = [None] * len(tps)
    last = _trailing(records, _KAFKA_NAME[_ONLINE], strategy, OUTCOME_FAILED)
    _extend_rows(last, tps, currents, befores, (nones, nones, nones), repeat(False, len(tps)))
    if last.error is None:
        last.error = []
    last.error.extend(map(error_text, errors))


def _extend_elected(
    records: PartitionRecords,
    tps: list[TopicPartition],
    outcomes: list[LeaderAndIsr],
    currents: list[PartitionState],
    strategy: str,
    notes: ElectionNotes,
) -> None:
    """``_record_success`` of each of these elections (every outcome a ``LeaderAndIsr``), in bulk."""
    last = _trailing(records, _KAFKA_NAME[_ONLINE], strategy)
    # an election that noted no state before: its before columns are None
    befores = list(map(notes.before.get, tps))
    afters = leader_and_isr_columns(outcomes)
    _extend_rows(last, tps, currents, befores, afters, members(notes.unclean, tps))


def _extend_rows(
    last: PartitionTransitionColumns,
    tps: list[TopicPartition],
    currents: list[PartitionState],
    befores: list[LeaderAndIsr | None],
    afters: tuple[list[Any], list[Any], list[Any]],
    unclean: Iterable[bool],
) -> None:
    """Rows of ``tps`` into ``last``'s columns: the leadership before each (None: none noted),
    the (leaders, ISRs, leader epochs) after, a column at a time."""
    leaders, isrs, epochs = leader_and_isr_columns(befores)
    leaders_after, isrs_after, epochs_after = afters
    last.topic.extend(map(itemgetter(0), tps))
    last.partition.extend(map(itemgetter(1), tps))
    last.from_state.extend(values_at(_KAFKA_NAME, currents))
    last.leader_before.extend(leaders)
    last.leader_after.extend(leaders_after)
    last.isr_before.extend(isrs)
    last.isr_after.extend(isrs_after)
    last.leader_epoch_before.extend(epochs)
    last.leader_epoch_after.extend(epochs_after)
    last.unclean.extend(unclean)


def leader_and_isr_columns(
    lais: list[Any],  # LeaderAndIsr or None each
) -> tuple[list[int | None], list[tuple[int, ...] | None], list[int | None]]:
    """The leaders, ISRs and leader epochs of ``lais`` as three audit columns, None where a
    ``LeaderAndIsr`` is None; a column at a time when none is (the bulk records of a failover)."""
    if None in lais:
        return (
            [None if x is None else x.leader for x in lais],
            [None if x is None else x.isr for x in lais],
            [None if x is None else x.leader_epoch for x in lais],
        )
    # LeaderAndIsr is (leader, leader_epoch, isr, zk_version)
    return list(map(_field0, lais)), list(map(_field2, lais)), list(map(_field1, lais))


_field0, _field1, _field2 = itemgetter(0), itemgetter(1), itemgetter(2)


def recorded_partitions(records: PartitionRecords) -> set[tuple[str, int]]:
    """(topic, partition) of every row in ``records``."""
    seen: set[tuple[str, int]] = set()
    for r in records:
        if isinstance(r, PartitionTransitionColumns):
            seen.update(zip(r.topic, r.partition, strict=True))
        else:
            seen.add((r.topic, r.partition))
    return seen


_KAFKA_NAME: dict[PartitionState, str] = {s: s.kafka_name for s in PartitionState}
_ONLINE = PartitionState.ONLINE_PARTITION
# ``partition_transition`` is positional: refuse to import if ``PartitionTransition``'s leading fields move.
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
require_leading_fields(PartitionTransition, _RECORD_FIELDS, "partition_records.partition_transition")


def _trailing(
    records: PartitionRecords, to_state: str, strategy: str | None, outcome: str = OUTCOME_OK
) -> PartitionTransitionColumns:
    """The trailing ``PartitionTransitionColumns`` of ``to_state``, ``strategy`` and ``outcome`` in
    ``records``; a new one appended when the last record is anything else (the order of rows is
    the order of calls)."""
    last = records[-1] if records else None
    if (
        type(last) is not PartitionTransitionColumns
        or last.to_state != to_state
        or last.election_strategy != strategy
        or last.outcome != outcome
    ):
        last = PartitionTransitionColumns(to_state, outcome, strategy)
        records.append(last)
    return last
