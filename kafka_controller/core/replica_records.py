"""``ReplicaTransitionRecorder``: the logging and audit rows of the replica state machine's calls.

One object owns what a call records: its bounded failure lines, and its audit rows, one
``ReplicaTransition`` per replica or, for a ``BulkAuditSink``, successful transitions gathered
as columns in ``ReplicaTransitionColumns`` (one object per run of successes between failures, in
recording order). The machine and its steps (the ISR removal, the OfflineReplica
step) tell it what happened; none of them holds a record list or knows which shape it takes."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from operator import itemgetter
from typing import Any

from kafka_controller.core.context import ControllerContext
from kafka_controller.core.log_budget import LogBudget
from kafka_controller.core.partition_records import leader_and_isr_columns
from kafka_controller.core.replica_runs import ReplicaRuns
from kafka_controller.domain.audit_records import (
    OUTCOME_FAILED,
    OUTCOME_INVALID,
    OUTCOME_OK,
    AuditItem,
    ReplicaTransition,
    ReplicaTransitionColumns,
    require_leading_fields,
)
from kafka_controller.domain.errors import (
    IllegalControllerStateError,
)
from kafka_controller.domain.states import ReplicaState
from kafka_controller.domain.values import (
    LeaderIsrAndControllerEpoch,
    PartitionAndReplica,
    TopicPartition,
)
from kafka_controller.hotpath import values_at
from kafka_controller.ports import AuditSink, BulkAuditSink, NullAuditSink, record_items

__all__ = ["ReplicaTransitionRecorder"]

_STATE_CHANGE_LOG = logging.getLogger("kafka_controller.state_change")
_NON_EXISTENT = ReplicaState.NON_EXISTENT_REPLICA
_Leadership = LeaderIsrAndControllerEpoch | None
#: A success for ``record_changed``: the replica, its state, its leadership before and after.
_Changed = tuple[PartitionAndReplica, ReplicaState, LeaderIsrAndControllerEpoch, LeaderIsrAndControllerEpoch]
_KAFKA_NAME: dict[ReplicaState, str] = {s: s.kafka_name for s in ReplicaState}
#: A partition's values in ``record_unchanged_replicas``'s rows: topic, partition, leader, ISR,
#: leader epoch (the last three None without a cached leadership).
_UnchangedRow = tuple[str, int, int | None, tuple[int, ...] | None, int | None]
_TOPIC, _PARTITION, _LEADER, _ISR, _LEADER_EPOCH = map(itemgetter, range(5))
# ``audit_record`` builds records positionally (one per replica in a failover): refuse to import
# if ``ReplicaTransition``'s leading fields ever change order.
_RECORD_FIELDS = [
    "topic",
    "partition",
    "replica",
    "from_state",
    "to_state",
    "outcome",
    "leader_before",
    "leader_after",
    "isr_before",
    "isr_after",
    "leader_epoch_before",
    "leader_epoch_after",
    "error",
]
require_leading_fields(ReplicaTransition, _RECORD_FIELDS, "ReplicaTransitionRecorder.audit_record")


class ReplicaTransitionRecorder:
    """The log lines and audit rows of one ``handle_state_changes`` call at a time (``begin`` to
    ``finish``), for ``ReplicaStateMachine`` and the steps it is composed of."""

    def __init__(self, controller_id: int, context: ControllerContext, audit: AuditSink | None) -> None:
        self.controller_id = controller_id
        self.controller_context = context
        self.audit: AuditSink = audit if audit is not None else NullAuditSink()
        self.auditing = not isinstance(self.audit, NullAuditSink)
        self._bulk = isinstance(self.audit, BulkAuditSink)
        # The audit records of the call in progress; None when auditing is off (zero cost).
        self._records: list[AuditItem] | None = None
        #: Per-replica debug lines in the call in progress.
        self.debug = False
        #: Whether per-replica successes are logged or audited at all in the call in progress.
        self.tracking = False
        self._failure_lines = LogBudget()
        #: The "removed from the ISR" info lines of the call in progress (the OfflineReplica step's).
        self.isr_lines = LogBudget()
        self._pending: tuple[list[_Changed] | None, ReplicaState] = (None, ReplicaState.OFFLINE_REPLICA)

    def begin(self) -> None:
        """A call starts: an empty record list if auditing, the log levels read once."""
        self._records = [] if self.auditing else None
        self.debug = _STATE_CHANGE_LOG.isEnabledFor(logging.DEBUG)
        self.tracking = self.auditing or self.debug

    def finish(self, target: ReplicaState) -> None:
        """The call ended: its records in one ``record`` call, the suppressed lines summarised."""
        records, self._records = self._records, None
        self._pending = (None, target)
        if records:
            record_items(self.audit, records)
        self._failure_lines.summarize(
            _STATE_CHANGE_LOG, logging.ERROR, f"replicas failed to move to {target}"
        )
        self.isr_lines.summarize(
            _STATE_CHANGE_LOG, logging.INFO, "partitions had a replica removed from the ISR"
        )

    @property
    def per_row(self) -> bool:
        """Whether each success must be logged or recorded on its own (a debug line, or a sink that
        takes rows only): the bulk paths stand aside then."""
        return self.debug or (self._records is not None and not self._bulk)

    def succeeded(
        self,
        replica: PartitionAndReplica,
        state: ReplicaState,
        target: ReplicaState,
        before: _Leadership = None,
        after: _Leadership = None,
    ) -> None:
        if self.debug:  # the caller checked self.tracking
            _STATE_CHANGE_LOG.debug(
                "Changed state of replica %s for partition %s from %s to %s",
                replica.replica,
                replica.topic_partition,
                state,
                target,
            )
        if self._records is not None:
            self.audit_record(replica, state, target, OUTCOME_OK, before, after)

    def record_unchanged(
        self,
        replica_id: int,
        partitions: Sequence[TopicPartition],
        states: Sequence[ReplicaState],
        target: ReplicaState,
    ) -> None:
        """``audit_record`` of a success with the partition's cached leadership before and after
        (``after is before``), for replica ``replica_id`` of each partition, from each state, in
        order: in bulk, for a sink that accepts bulk records (the caller checked ``per_row``)."""
        records = self._records
        if records is None or not partitions:
            return
        bulk = _trailing(records, _KAFKA_NAME[target], unchanged=True)
        infos: list[Any] = list(map(self.controller_context.partitions_leadership_info.get, partitions))
        # a partition without a leader: its before and after are None
        lais = (
            [None if i is None else i.leader_and_isr for i in infos]
            if None in infos
            else list(map(itemgetter(0), infos))  # LeaderIsrAndControllerEpoch's leader_and_isr
        )
        leaders, isrs, epochs = leader_and_isr_columns(lais)
        bulk.extend_unchanged(
            list(map(itemgetter(0), partitions)),
            list(map(itemgetter(1), partitions)),
            [replica_id] * len(partitions),
            list(values_at(_KAFKA_NAME, states)),
            leaders,
            isrs,
            epochs,
        )

    def record_unchanged_replicas(self, runs: ReplicaRuns, state: ReplicaState) -> None:
        """``record_unchanged(replica_id, partitions, [state] * n, state)`` of each replica id's group
        of ``runs.replicas``, the groups in order of first appearance (Kafka's ``groupBy``, the
        order ``handle_state_changes`` moves them in): a startup's OnlineReplica rows, 240,000 at
        RF 3.

        The same rows, built run by run (``core.replica_runs``): one leadership look-up and one
        row of partition values (topic, partition, leader, ISR, leader epoch) per run, which each
        group picks by position; a group's columns are then read off its rows. The per-group
        calls looked each replica's partition up, and read its fields, once per column (0.16
        CPU-s of a failover's event thread at RF 3, docs/performance.md)."""
        records = self._records
        if records is None or not runs.replicas:
            return
        leadership = self.controller_context.partitions_leadership_info
        rows: list[_UnchangedRow] = []
        for tp in runs.partitions:
            info = leadership.get(tp)
            if info is None:  # no leader: before and after are None
                rows.append((tp[0], tp[1], None, None, None))
            else:
                (leader, leader_epoch, isr, _), _ = info
                rows.append((tp[0], tp[1], leader, isr, leader_epoch))
        name = _KAFKA_NAME[state]
        bulk = _trailing(records, name, unchanged=True)
        for replica_id, group in runs.groups:
            picked = list(values_at(rows, group))
            n = len(picked)
            bulk.extend_unchanged(
                list(map(_TOPIC, picked)),
                list(map(_PARTITION, picked)),
                [replica_id] * n,
                [name] * n,
                list(map(_LEADER, picked)),
                list(map(_ISR, picked)),
                list(map(_LEADER_EPOCH, picked)),
            )

    def changed_run(self, target: ReplicaState) -> list[_Changed] | None:
        """An empty run for ``record_changed`` when successes may be recorded in bulk (a sink
        that takes bulk records, no per-replica debug line), else None. Kept until the call
        ends, so that a call aborted mid-run still records the run's successes as successes."""
        bulk = self._bulk and self._records is not None and not self.debug
        run: list[_Changed] | None = [] if bulk else None
        self._pending = (run, target)
        return run

    def record_changed(self, run: list[_Changed] | None, target: ReplicaState) -> None:
        """``audit_record`` of each success in ``run`` (replica, its state, its leadership before
        and after, neither None), in order, in bulk, then empties ``run``: a failover's 60,000
        OfflineReplica rows at RF 3 as a few column builds instead of a call chain and ten appends
        a row. ``run`` comes from ``changed_run``."""
        records = self._records
        if records is None or not run:
            return
        bulk = _trailing(records, _KAFKA_NAME[target], unchanged=False)
        bulk.own_after_columns()  # rows whose after values differ follow (as ``add``)
        replicas = list(map(itemgetter(0), run))
        tps = list(map(itemgetter(0), replicas))
        before = list(map(itemgetter(0), map(itemgetter(2), run)))  # LeaderAndIsr
        after = list(map(itemgetter(0), map(itemgetter(3), run)))
        bulk.topic.extend(map(itemgetter(0), tps))
        bulk.partition.extend(map(itemgetter(1), tps))
        bulk.replica.extend(map(itemgetter(1), replicas))
        bulk.from_state.extend(values_at(_KAFKA_NAME, map(itemgetter(1), run)))
        bulk.leader_before.extend(map(itemgetter(0), before))
        bulk.leader_after.extend(map(itemgetter(0), after))
        bulk.isr_before.extend(map(itemgetter(2), before))
        bulk.isr_after.extend(map(itemgetter(2), after))
        bulk.leader_epoch_before.extend(map(itemgetter(1), before))
        bulk.leader_epoch_after.extend(map(itemgetter(1), after))
        run.clear()

    def invalid_transition(
        self, replica: PartitionAndReplica, state: ReplicaState, target: ReplicaState
    ) -> None:
        if self._records is None and not _STATE_CHANGE_LOG.isEnabledFor(logging.ERROR):
            return
        previous = ",".join(sorted(s.kafka_name for s in target.valid_previous_states))
        error = IllegalControllerStateError(
            f"Replica {replica} should be in the {previous} states before moving to {target} state. "
            f"Instead it is in {state} state"
        )
        self.log_failed(replica, state, target, error)
        self.audit_record(replica, state, target, OUTCOME_INVALID, None, None, error)

    def log_failed(
        self, replica: PartitionAndReplica, state: ReplicaState, target: ReplicaState, error: Exception
    ) -> None:
        if not self._failure_lines.take():
            return
        _STATE_CHANGE_LOG.error(
            "Controller %s epoch %s initiated state change of replica %s for partition %s from %s to %s "
            "failed: %s",
            self.controller_id,
            self.controller_context.epoch,
            replica.replica,
            replica.topic_partition,
            state,
            target,
            error,
        )

    def record_unfinished(
        self, replicas: Sequence[PartitionAndReplica], target: ReplicaState, error: Exception
    ) -> None:
        """After an aborted call, each replica without a record yet gets a "failed" one."""
        if self._records is None:
            return
        run, to = self._pending
        self.record_changed(run, to)  # successes of an aborted run were successes
        done: set[tuple[str, int, int]] = set()
        for r in self._records:
            if isinstance(r, ReplicaTransition):
                done.add((r.topic, r.partition, r.replica))
            elif isinstance(r, ReplicaTransitionColumns):
                done.update(zip(r.topic, r.partition, r.replica, strict=True))
        states = self.controller_context.replica_states
        for replica in dict.fromkeys(replicas):
            if (replica.topic, replica.partition, replica.replica) not in done:
                state = states.get(replica, _NON_EXISTENT)
                self.audit_record(replica, state, target, OUTCOME_FAILED, None, None, error)

    def audit_record(
        self,
        replica: PartitionAndReplica,
        state: ReplicaState,
        target: ReplicaState,
        outcome: str,
        before: _Leadership,
        after: _Leadership,
        error: Exception | str | None = None,
    ) -> None:
        """One record; built positionally (field order of ``ReplicaTransition``) since a failover
        builds one per replica. A success goes into the trailing ``ReplicaTransitionColumns`` of the
        same target when the sink accepts bulk records (a new one after anything else)."""
        records = self._records
        if records is None:
            return
        tp = replica.topic_partition
        if before is None:
            lb = ib = eb = None
        else:
            b = before.leader_and_isr
            lb, ib, eb = b.leader, b.isr, b.leader_epoch
        if after is None:
            la = ia = ea = None
        elif after is before:
            la, ia, ea = lb, ib, eb
        else:
            a = after.leader_and_isr
            la, ia, ea = a.leader, a.isr, a.leader_epoch
        if self._bulk and outcome == OUTCOME_OK:
            bulk = _trailing(records, _KAFKA_NAME[target], unchanged=after is before)
            if after is before:
                bulk.add_unchanged(tp.topic, tp.partition, replica.replica, _KAFKA_NAME[state], lb, ib, eb)
            else:
                bulk.add(tp.topic, tp.partition, replica.replica, _KAFKA_NAME[state], lb, la, ib, ia, eb, ea)
            return
        records.append(
            ReplicaTransition(
                tp.topic,
                tp.partition,
                replica.replica,
                _KAFKA_NAME[state],
                _KAFKA_NAME[target],
                outcome,
                lb,
                la,
                ib,
                ia,
                eb,
                ea,
                None if error is None else (str(error) or type(error).__name__),
            )
        )


def _trailing(records: list[AuditItem], to_state: str, unchanged: bool) -> ReplicaTransitionColumns:
    """The trailing ``ReplicaTransitionColumns`` of ``to_state`` in ``records``; when the last record is
    anything else, a new one appended (rows keep the order of calls), sharing its after columns
    with its before ones when its first rows are ``unchanged`` (``ReplicaTransitionColumns.unchanged``)."""
    last = records[-1] if records else None
    if type(last) is not ReplicaTransitionColumns or last.to_state != to_state:
        columns = ReplicaTransitionColumns
        last = columns.unchanged(to_state) if unchanged else columns(to_state)
        records.append(last)
    return last
