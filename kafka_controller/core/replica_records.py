"""Logging and audit records of replica transitions, for ``ReplicaStateMachine`` (which inherits
them and sets the attributes): bounded failure lines, one ``ReplicaTransition`` per replica, or
for a sink that accepts them (``_bulk``), successful transitions gathered as columns in
``ReplicaTransitions`` (one object per run of successes between failures, in recording order)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from operator import itemgetter

from kafka_controller.core.context import ControllerContext
from kafka_controller.core.log_budget import LogBudget
from kafka_controller.domain.audit_records import (
    OUTCOME_FAILED,
    OUTCOME_INVALID,
    OUTCOME_OK,
    AuditItem,
    ReplicaTransition,
    ReplicaTransitions,
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

__all__ = ["ReplicaTransitionLog"]

_STATE_CHANGE_LOG = logging.getLogger("kafka_controller.state_change")
_NON_EXISTENT = ReplicaState.NON_EXISTENT_REPLICA
_Leadership = LeaderIsrAndControllerEpoch | None
_KAFKA_NAME: dict[ReplicaState, str] = {s: s.kafka_name for s in ReplicaState}
# ``_audit_record`` builds records positionally (one per replica in a failover): refuse to import
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
require_leading_fields(ReplicaTransition, _RECORD_FIELDS, "ReplicaStateMachine._audit_record")


class ReplicaTransitionLog:
    """The logging and audit methods of ``ReplicaStateMachine``."""

    controller_id: int
    controller_context: ControllerContext
    _records: list[AuditItem] | None
    _bulk: bool  # the sink accepts ``ReplicaTransitions``
    _debug: bool
    _failure_lines: LogBudget

    def _succeeded(
        self,
        replica: PartitionAndReplica,
        state: ReplicaState,
        target: ReplicaState,
        before: _Leadership = None,
        after: _Leadership = None,
    ) -> None:
        if self._debug:  # the caller checked self._tracking
            _STATE_CHANGE_LOG.debug(
                "Changed state of replica %s for partition %s from %s to %s",
                replica.replica,
                replica.topic_partition,
                state,
                target,
            )
        if self._records is not None:
            self._audit_record(replica, state, target, OUTCOME_OK, before, after)

    def _record_unchanged(
        self,
        replica_id: int,
        partitions: Sequence[TopicPartition],
        states: Sequence[ReplicaState],
        target: ReplicaState,
    ) -> None:
        """``_audit_record`` of a success with the partition's cached leadership before and after
        (``after is before``), for replica ``replica_id`` of each partition, from each state, in
        order: in bulk, for a sink that accepts bulk records (the caller checked ``_bulk``)."""
        records = self._records
        if records is None or not partitions:
            return
        to_state = _KAFKA_NAME[target]
        bulk = records[-1] if records else None
        if type(bulk) is not ReplicaTransitions or bulk.to_state != to_state:
            bulk = ReplicaTransitions.unchanged(to_state)
            records.append(bulk)
        leadership = self.controller_context.partitions_leadership_info
        infos = [i.leader_and_isr if i is not None else None for i in map(leadership.get, partitions)]
        bulk.extend_unchanged(
            list(map(itemgetter(0), partitions)),
            list(map(itemgetter(1), partitions)),
            [replica_id] * len(partitions),
            list(map(_KAFKA_NAME.__getitem__, states)),
            [None if i is None else i.leader for i in infos],
            [None if i is None else i.isr for i in infos],
            [None if i is None else i.leader_epoch for i in infos],
        )

    def _invalid_transition(
        self, replica: PartitionAndReplica, state: ReplicaState, target: ReplicaState
    ) -> None:
        if self._records is None and not _STATE_CHANGE_LOG.isEnabledFor(logging.ERROR):
            return
        previous = ",".join(sorted(s.kafka_name for s in target.valid_previous_states))
        error = IllegalControllerStateError(
            f"Replica {replica} should be in the {previous} states before moving to {target} state. "
            f"Instead it is in {state} state"
        )
        self._log_failed(replica, state, target, error)
        self._audit_record(replica, state, target, OUTCOME_INVALID, None, None, error)

    def _log_failed(
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

    def _record_unfinished(
        self, replicas: Sequence[PartitionAndReplica], target: ReplicaState, error: Exception
    ) -> None:
        """After an aborted call, each replica without a record yet gets a "failed" one."""
        if self._records is None:
            return
        done: set[tuple[str, int, int]] = set()
        for r in self._records:
            if isinstance(r, ReplicaTransition):
                done.add((r.topic, r.partition, r.replica))
            elif isinstance(r, ReplicaTransitions):
                done.update(zip(r.topic, r.partition, r.replica, strict=True))
        states = self.controller_context.replica_states
        for replica in dict.fromkeys(replicas):
            if (replica.topic, replica.partition, replica.replica) not in done:
                state = states.get(replica, _NON_EXISTENT)
                self._audit_record(replica, state, target, OUTCOME_FAILED, None, None, error)

    def _audit_record(
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
        builds one per replica. A success goes into the trailing ``ReplicaTransitions`` of the
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
            bulk = records[-1] if records else None
            to_state = _KAFKA_NAME[target]
            if type(bulk) is not ReplicaTransitions or bulk.to_state != to_state:
                bulk = (
                    ReplicaTransitions.unchanged(to_state)
                    if after is before
                    else ReplicaTransitions(to_state)
                )
                records.append(bulk)
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
