"""The partition state machine: Kafka's ``ZkPartitionStateMachine``.

``PartitionStateMachine`` is composed of a ``PartitionTransitionRecorder`` (log lines and audit
rows) and a ``PartitionLeaderElector`` (the election rounds and the startup's early election
write), both built in its constructor from its arguments.

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
from collections.abc import Callable, Collection, Mapping, Sequence
from operator import itemgetter

from kafka_controller.core.batch_api import LeaderAndIsrEntry, RequestBatch
from kafka_controller.core.context import ControllerContext
from kafka_controller.core.election import LiveReplicaFilter
from kafka_controller.core.partition_election import PartitionLeaderElector
from kafka_controller.core.partition_records import ElectionOutcome, PartitionTransitionRecorder
from kafka_controller.core.strategies import (
    OfflinePartitionLeaderElectionStrategy,
    PartitionLeaderElectionStrategy,
)
from kafka_controller.domain.errors import (
    ControllerMovedError,
    InvalidArgumentError,
    StateChangeFailedError,
)
from kafka_controller.domain.states import PartitionState
from kafka_controller.domain.values import (
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    TopicPartition,
)
from kafka_controller.hotpath import members, values_at
from kafka_controller.ports import AuditSink, PartitionStateStore

__all__ = ["AbstractPartitionStateMachine", "PartitionStateMachine"]

_log = logging.getLogger(__name__)
state_change_log = logging.getLogger("kafka_controller.state_change")

_NEW = PartitionState.NEW_PARTITION
_ONLINE = PartitionState.ONLINE_PARTITION
_OFFLINE = PartitionState.OFFLINE_PARTITION
_NON_EXISTENT = PartitionState.NON_EXISTENT_PARTITION
_TRIGGER_STATES = frozenset({_OFFLINE, _NEW})
_STATE_BY_ONLINE = {True: _ONLINE, False: _OFFLINE}
_FIRST = itemgetter(0)  # a LeaderIsrAndControllerEpoch's LeaderAndIsr, and that one's leader


class AbstractPartitionStateMachine(abc.ABC):
    """What the controller and the topic-deletion manager use; tests substitute a mock."""

    def __init__(self, context: ControllerContext) -> None:
        self.controller_context = context

    def startup(self, on_initialized: Callable[[], None] | None = None) -> None:
        """``on_initialized`` runs once every partition has a state and before any election."""
        _log.info("Initializing partition state")
        self.initialize_partition_state()
        if on_initialized is not None:
            on_initialized()
        _log.info("Triggering online partition state changes")
        self.trigger_online_partition_state_change()

    def shutdown(self) -> None:
        _log.info("Stopped partition state machine")

    def initialize_partition_state(self) -> None:
        """New without leadership; else Online iff the cached leader is online (leader -1 never is)."""
        ctx = self.controller_context
        live = LiveReplicaFilter(ctx)
        tps = ctx.all_partitions
        infos = list(map(ctx.partitions_leadership_info.get, tps))
        if None not in infos and not live.has_offline_dirs:  # a failover: by leader, all at once
            online = members(live.broker_ids, map(_FIRST, map(_FIRST, infos)))  # type: ignore[arg-type]
            ctx.put_partition_states(list(zip(tps, values_at(_STATE_BY_ONLINE, online), strict=True)))
            return
        states: list[tuple[TopicPartition, PartitionState]] = []
        for tp, info in zip(tps, infos, strict=True):
            if info is None:
                states.append((tp, _NEW))
            elif live.is_online(info.leader_and_isr.leader, tp):
                states.append((tp, _ONLINE))
            else:
                states.append((tp, _OFFLINE))
        ctx.put_partition_states(states)

    def trigger_online_partition_state_change(
        self, topic: str | None = None
    ) -> dict[TopicPartition, LeaderAndIsr | Exception]:
        """Elect leaders for New/Offline partitions (of ``topic``), skipping topics queued for deletion.

        Unclean election is then decided per topic from its config (docs/controller-behaviour.md §3.6).
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


class PartitionStateMachine(AbstractPartitionStateMachine):
    """Kafka's ``ZkPartitionStateMachine`` over a ``PartitionStateStore`` and a dedicated batch.

    ``broker_config`` is Kafka's ``config.originals()``: broker settings as strings, the defaults
    that topic configs are merged over when deciding on unclean election.
    ``write_on_cached_zk_version``: a departure from Kafka's call sequence, off by default
    (``core.partition_election``'s docs).
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
        write_on_cached_zk_version: bool = False,
    ) -> None:
        super().__init__(context)
        self.controller_id = controller_id
        self._store = store
        self._batch = batch
        self._recorder = recorder = PartitionTransitionRecorder(controller_id, context, audit)
        self._elector = PartitionLeaderElector(
            controller_id,
            context,
            store,
            batch,
            broker_config or {},
            recorder,
            write_on_cached_zk_version=write_on_cached_zk_version,
        )

    @property
    def write_on_cached_zk_version(self) -> bool:
        """Elect a first round from the cached states (``core.partition_election``'s docs): a
        switch of the constructor, off by default (Kafka's read first)."""
        return self._elector.write_on_cached_zk_version

    def start_election_prewrite(self, partitions: Collection[TopicPartition]) -> None:
        """Start now the offline election's write of the partitions the startup leaves to it."""
        self._elector.start_election_prewrite(partitions)

    def abandon_election_prewrite(self) -> None:
        """Wait for an early election write no election took, and cache what it wrote."""
        self._elector.abandon_election_prewrite()

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
        recorder = self._recorder
        recorder.begin()
        try:
            self._batch.new_batch()
            result = self._do_handle_state_changes(partitions, target, strategy)
            self._batch.send_requests_to_brokers(ctx.epoch)
        except ControllerMovedError as e:
            _log.error("Controller moved to another broker when moving some partitions to %s state", target)
            recorder.deliver(partitions, target, e)
            raise
        except Exception as e:
            _log.error("Error while moving some partitions to %s state", target, exc_info=True)
            recorder.deliver(partitions, target, e)
            failed: dict[TopicPartition, LeaderAndIsr | Exception] = dict.fromkeys(partitions, e)
            return failed
        finally:
            recorder.summarize(target)
        recorder.deliver(partitions, target, None)
        return result

    def _do_handle_state_changes(
        self,
        partitions: Sequence[TopicPartition],
        target: PartitionState,
        strategy: PartitionLeaderElectionStrategy | None,
    ) -> dict[TopicPartition, ElectionOutcome]:
        ctx = self.controller_context
        states = ctx.partition_states
        for tp in partitions:
            if tp not in states:
                ctx.put_partition_state_if_not_exists(tp, _NON_EXISTENT)
        valid, invalid = ctx.check_valid_partition_state_change(partitions, target)
        recorder = self._recorder
        if invalid:
            recorder.log_invalid_transitions(invalid, target)
        if target is _ONLINE:
            return self._to_online(valid, strategy)
        debug = state_change_log.isEnabledFor(logging.DEBUG)
        auditing = recorder.auditing
        for tp in valid:
            if debug:
                state_change_log.debug(
                    "Changed partition %s state from %s to %s with assigned replicas %s",
                    tp,
                    states[tp],
                    target,
                    ctx.partition_replica_assignment(tp),
                )
            if auditing:
                recorder.record(tp, states[tp], target)
            ctx.put_partition_state(tp, target)
        if valid:
            state_change_log.info("Changed %d partitions to %s", len(valid), target)
        return {}

    # ------------------------------------------------------------------------- -> OnlinePartition
    def _to_online(
        self,
        valid: list[TopicPartition],
        strategy: PartitionLeaderElectionStrategy | None,
    ) -> dict[TopicPartition, ElectionOutcome]:
        ctx = self.controller_context
        states = ctx.partition_states
        uninitialized = [tp for tp in valid if states[tp] is _NEW]
        to_elect = [tp for tp in valid if states[tp] is not _NEW] if uninitialized else valid
        if uninitialized:
            for tp in self._initialize_leader_and_isr_for_partitions(uninitialized):
                ctx.put_partition_state(tp, _ONLINE)
        if not to_elect:
            return {}
        if strategy is None:
            raise InvalidArgumentError(
                "an election strategy is required when the target state is OnlinePartition"
            )
        recorder = self._recorder
        results = self._elector.elect_leader_for_partitions(to_elect, strategy)
        debug = state_change_log.isEnabledFor(logging.DEBUG)
        elected = done = 0
        auditing = recorder.auditing
        from_states = list(values_at(states, results)) if auditing else []
        try:
            for tp, outcome in results.items():
                from_state = states[tp]
                if isinstance(outcome, LeaderAndIsr):
                    elected += 1
                    if debug:
                        msg = "Changed partition %s from %s to %s with state %s"
                        state_change_log.debug(msg, tp, from_state, _ONLINE, outcome)
                    ctx.put_partition_state(tp, _ONLINE)
                done += 1
        finally:  # recorded in bulk once the states are set: those set so far, should one fail
            if auditing:
                elections = (list(results)[:done], list(results.values())[:done], from_states[:done])
                recorder.record_elections(*elections, str(strategy))
        state_change_log.info(
            "Elected leaders for %d of %d partitions under %s", elected, len(to_elect), strategy
        )
        return results

    def _initialize_leader_and_isr_for_partitions(
        self, partitions: list[TopicPartition]
    ) -> list[TopicPartition]:
        """New -> Online: the first online replica leads, all online replicas form the ISR
        (docs/controller-behaviour.md §3.5)."""
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
            self._recorder.failed(tp, _NEW, _ONLINE, error)
        if not to_create:
            return []
        try:
            responses = self._store.create_partition_states(to_create, ctx.epoch_zk_version)
        except ControllerMovedError:
            _log.error("Controller moved to another broker when creating partition state znodes")
            raise
        except Exception as e:
            for tp in to_create:
                self._recorder.failed(tp, _NEW, _ONLINE, e)
            return []
        initialized: list[TopicPartition] = []
        requests: list[LeaderAndIsrEntry] = []
        for tp, leadership in to_create.items():
            if tp not in responses:
                missing = StateChangeFailedError(f"the metadata store gave no create result for {tp}")
                self._recorder.failed(tp, _NEW, _ONLINE, missing)
                continue
            create_error = responses[tp]
            if create_error is not None:
                self._recorder.failed(tp, _NEW, _ONLINE, create_error)
                continue
            ctx.put_partition_leadership_info(tp, leadership)
            leader_and_isr = leadership.leader_and_isr
            requests.append((leader_and_isr.isr, tp, leadership, ctx.partition_full_replica_assignment(tp)))
            initialized.append(tp)
            if self._recorder.auditing:
                self._recorder.record(tp, _NEW, _ONLINE, after=leader_and_isr)
        self._batch.add_leader_and_isr_requests(requests, True)
        if initialized:
            state_change_log.info("Initialized leader and ISR of %d new partitions", len(initialized))
        return initialized
