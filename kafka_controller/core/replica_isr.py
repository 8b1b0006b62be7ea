"""Taking a replica out of the ISR: Kafka's ``removeReplicasFromIsr`` and ``doRemoveReplicasFromIsr``
(``ReplicaStateMachine.scala``), as the ``IsrRemoval`` object the OfflineReplica step calls.

Per replica id, one batched read and one batched conditional write per round; only partitions whose
write hit BADVERSION go round again.

Departure from Kafka's call sequence, off unless ``write_on_cached_zk_version`` is on (the
``KafkaController`` turns it on; the ported tests, which script Kafka's exact reads, leave it off): a
first round writes from the leadership cached in the context, conditionally on its zk version,
without reading. A conditional write succeeds only if the znode is still at the version the cache
holds, and the cache only ever holds what was read from, or written to, the znode at that version
(its controller epoch aside, which the write replaces with this controller's anyway), so the write
computes what Kafka's read-modify-write would have. Partitions whose cache cannot stand in for the
read (none cached, a newer controller epoch, the replica already out of the ISR: Kafka then only
refreshes the cache from the read) and those whose write hits BADVERSION or NONODE go on to Kafka's
rounds, read first. The failover's context load read every state a moment before, so the 60,000
re-reads of a 100,000-partition RF-3 failover with one broker dead become one write round.

That round can start early (``start_isr_prewrite``, ``core.early_write``, README deviation 21): a
new controller's startup starts it before its online replicas move, and the OfflineReplica step
takes its outcome where it would have written.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping, Sequence

from kafka_controller.core.context import ControllerContext
from kafka_controller.core.early_write import EarlyWrite
from kafka_controller.core.replica_records import ReplicaTransitionRecorder
from kafka_controller.core.state_reads import read_partition_states
from kafka_controller.domain.errors import (
    ControllerMovedError,
    IllegalControllerStateError,
    NoNodeError,
    StateChangeFailedError,
)
from kafka_controller.domain.states import ReplicaState
from kafka_controller.domain.values import (
    NO_LEADER,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    PartitionAndReplica,
    TopicPartition,
    build_leader_and_isr,
    build_leader_isr_and_controller_epoch,
)
from kafka_controller.ports import AuditSink, PartitionStateStore

__all__ = ["IsrRemoval"]

_STATE_CHANGE_LOG = logging.getLogger("kafka_controller.state_change")
_OFFLINE = ReplicaState.OFFLINE_REPLICA
_NON_EXISTENT = ReplicaState.NON_EXISTENT_REPLICA


class IsrRemoval:
    """The ISR-removal rounds of the replica state machine's OfflineReplica step; final failures
    are logged through the ``recorder``."""

    def __init__(
        self,
        context: ControllerContext,
        store: PartitionStateStore,
        recorder: ReplicaTransitionRecorder,
        audit: AuditSink | None,
        *,
        write_on_cached_zk_version: bool = False,
    ) -> None:
        """``audit``: where a started first round nobody took records its writes (None: nowhere)."""
        self.controller_context = context
        self._store = store
        self._recorder = recorder
        self._audit = audit
        #: Write the first round from the cached states, without Kafka's re-read (see the module docs).
        self.write_on_cached_zk_version = write_on_cached_zk_version
        #: The first round started ahead of its turn (replica id, write) until the OfflineReplica
        #: step takes it.
        self.prewrite: tuple[int, EarlyWrite] | None = None

    def start_isr_prewrite(self, replica_id: int, partitions: Sequence[TopicPartition]) -> None:
        """Start the cached first round for ``replica_id`` now, on a thread (module docs): only
        while nothing this controller does writes or re-caches these partitions until
        ``remove_replicas_from_isr`` takes it (``abandon_isr_prewrite`` if it never comes)."""
        self.abandon_isr_prewrite()
        if not self.write_on_cached_zk_version:
            return
        ctx = self.controller_context
        cached, _ = ctx.cached_leaderships(partitions, with_isr_replica=replica_id)
        if cached:
            shrink = _isr_remover(replica_id)
            adjusted = {tp: shrink(info.leader_and_isr) for tp, info in cached.items()}
            early = EarlyWrite(self._store, adjusted, ctx.epoch, ctx.epoch_zk_version, "isr-prewrite")
            self.prewrite = (replica_id, early)

    def abandon_isr_prewrite(self) -> None:
        """Wait for a started round nobody took (startup failed before its OfflineReplica step)."""
        pre, self.prewrite = self.prewrite, None
        if pre is not None:
            pre[1].cache_written(self.controller_context, self._audit)

    def remove_replicas_from_isr(
        self,
        replica_id: int,
        partitions: Sequence[TopicPartition],
        failures: dict[TopicPartition, Exception] | None = None,
    ) -> dict[TopicPartition, LeaderIsrAndControllerEpoch]:
        """Take ``replica_id`` out of each partition's ISR (docs/controller-behaviour.md §4.4);
        return the updated states.

        Only partitions whose conditional write hit BADVERSION are retried, re-read each round and
        without limit, as in Kafka. Final failures are logged and put in ``failures`` if given;
        partitions of topics queued for deletion whose state znode is missing are in neither map.
        """
        results: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        failed: dict[TopicPartition, Exception] = {} if failures is None else failures
        remaining = list(dict.fromkeys(partitions))
        if self.write_on_cached_zk_version and remaining:
            remaining = self._remove_replicas_from_cached_isr(replica_id, remaining, results, failed)
        while remaining:
            remaining = self._do_remove_replicas_from_isr(replica_id, remaining, results, failed)
        states = self.controller_context.replica_states
        for tp, error in failed.items():
            replica = PartitionAndReplica(tp, replica_id)
            self._recorder.log_failed(replica, states.get(replica, _NON_EXISTENT), _OFFLINE, error)
        return results

    def _remove_replicas_from_cached_isr(
        self,
        replica_id: int,
        partitions: list[TopicPartition],
        results: dict[TopicPartition, LeaderIsrAndControllerEpoch],
        failures: dict[TopicPartition, Exception],
    ) -> list[TopicPartition]:
        """The round without a read (module docs): returns the partitions left for Kafka's rounds."""
        to_retry: list[TopicPartition] = []
        round_failures: dict[TopicPartition, Exception] = {}
        if self.prewrite is not None and self.prewrite[0] == replica_id:
            pre = self.prewrite[1]
            self.prewrite = None
            written = pre.states
            partitions = [tp for tp in partitions if tp not in written]
            del written  # the shrunk states held by the callee alone (it drops them)
            to_retry = self._write_removals(
                pre.take_states(), [], [], replica_id, results, round_failures, pre
            )
        cached, unread = self.controller_context.cached_leaderships(partitions, with_isr_replica=replica_id)
        if cached:
            shrink = _isr_remover(replica_id)
            to_retry += self._write_removals(
                {tp: shrink(info.leader_and_isr) for tp, info in cached.items()},
                [],
                [],
                replica_id,
                results,
                round_failures,
            )
        for tp, error in round_failures.items():
            if isinstance(error, NoNodeError):
                to_retry.append(tp)  # deleted since it was cached: Kafka's read says what that means
            else:
                failures[tp] = error
        return unread + to_retry

    def _do_remove_replicas_from_isr(
        self,
        replica_id: int,
        partitions: list[TopicPartition],
        results: dict[TopicPartition, LeaderIsrAndControllerEpoch],
        failures: dict[TopicPartition, Exception],
    ) -> list[TopicPartition]:
        """One of Kafka's rounds: read, shrink the ISRs, write; returns the BADVERSION ones."""
        epoch = self.controller_context.epoch
        reads = read_partition_states(self._store, partitions, None)
        if isinstance(reads, Exception):  # a failed read is final for every partition: nothing is retried
            failures.update(dict.fromkeys(partitions, reads))
            return []

        adjusted: dict[TopicPartition, LeaderAndIsr] = {}
        kept: list[tuple[TopicPartition, LeaderAndIsr]] = []  # read, replica not in the ISR
        missing: list[TopicPartition] = []
        shrink = _isr_remover(replica_id)
        for tp in partitions:
            read = reads.get(tp, _NO_RESPONSE)
            if isinstance(read, LeaderIsrAndControllerEpoch):
                if read.controller_epoch > epoch:
                    failures[tp] = StateChangeFailedError(
                        "Leader and isr path written by another controller. This probably means the "
                        f"current controller with epoch {epoch} went through a soft failure and another "
                        f"controller was elected with epoch {read.controller_epoch}. Aborting state "
                        "change by this controller"
                    )
                    continue
                lai = read.leader_and_isr
                if replica_id in lai.isr:
                    adjusted[tp] = shrink(lai)
                else:
                    kept.append((tp, lai))
            elif read is None or isinstance(read, NoNodeError):
                missing.append(tp)
            elif isinstance(read, Exception):
                failures[tp] = read
            else:
                failures[tp] = IllegalControllerStateError(f"the store returned no state read for {tp}")
        return self._write_removals(adjusted, kept, missing, replica_id, results, failures)

    def _write_removals(
        self,
        adjusted: dict[TopicPartition, LeaderAndIsr],
        kept: list[tuple[TopicPartition, LeaderAndIsr]],
        missing: list[TopicPartition],
        replica_id: int,
        results: dict[TopicPartition, LeaderIsrAndControllerEpoch],
        failures: dict[TopicPartition, Exception],
        written: EarlyWrite | None = None,
    ) -> list[TopicPartition]:
        """Write the ``adjusted`` states (or take ``written``'s outcome: it wrote them), fail the
        ``missing`` ones and cache what was written and ``kept``; returns the partitions whose
        write hit BADVERSION."""
        ctx = self.controller_context
        epoch = ctx.epoch
        to_retry: list[TopicPartition] = []
        finished: Mapping[TopicPartition, LeaderAndIsr | Exception] = {}
        if adjusted:
            try:
                if written is None:
                    result = self._store.update_leader_and_isr(adjusted, epoch, ctx.epoch_zk_version)
                else:
                    result = written.result()
            except ControllerMovedError:
                raise
            except Exception as e:
                failures.update(dict.fromkeys(adjusted, e))
            else:
                finished = result.finished
                for tp, outcome in finished.items():
                    if not isinstance(outcome, LeaderAndIsr):
                        failures[tp] = outcome
                to_retry = [tp for tp in result.to_retry if tp in adjusted]
        del adjusted  # the written states are in ``finished``: let the pre-write ones go first

        for tp in missing:
            if tp.topic not in ctx.topics_to_be_deleted:
                failures[tp] = StateChangeFailedError(
                    f"Failed to change state of replica {replica_id} for partition {tp} since the leader "
                    "and isr path in zookeeper is empty"
                )

        # Partitions whose ISR lacks the replica are not written, yet the cache is refreshed from
        # what was read and stamped with this controller's epoch (Kafka's ``doRemoveReplicasFromIsr``).
        # Streamed into the cache, without a list of the round's states beside ``results``.
        def cache_now() -> Iterator[tuple[TopicPartition, LeaderIsrAndControllerEpoch]]:
            for tp, lai in kept:
                info = results[tp] = build_leader_isr_and_controller_epoch(lai, epoch)
                yield tp, info
            for tp, outcome in finished.items():
                if isinstance(outcome, LeaderAndIsr):
                    info = results[tp] = build_leader_isr_and_controller_epoch(outcome, epoch)
                    yield tp, info

        ctx.put_partition_leadership_infos(cache_now())
        return to_retry


def _isr_remover(replica_id: int) -> Callable[[LeaderAndIsr], LeaderAndIsr]:
    """Kafka's new state without ``replica_id``: no leader if it led, next leader epoch, same zk
    version; few distinct ISRs exist, so each is shrunk once."""
    shrunk: dict[tuple[int, ...], tuple[int, ...]] = {}

    def remove(lai: LeaderAndIsr) -> LeaderAndIsr:
        isr = lai.isr
        new_isr = shrunk.get(isr)
        if new_isr is None:
            # KAFKA-5083: the last ISR member stays, even when it is this replica.
            new_isr = shrunk[isr] = isr if len(isr) == 1 else tuple(b for b in isr if b != replica_id)
        leader = NO_LEADER if lai.leader == replica_id else lai.leader
        return build_leader_and_isr(leader, lai.leader_epoch + 1, new_isr, lai.zk_version)

    return remove


#: Marks a partition the store left out of its answer (a broken store, not a missing znode).
_NO_RESPONSE = object()
