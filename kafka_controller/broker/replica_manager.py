"""The broker's own view of its replicas (Kafka's ``ReplicaManager``): LeaderAndIsr and StopReplica.

Fencing, in Kafka 2.8's order:

* a request from an older controller epoch than the newest one seen is refused whole
  (STALE_CONTROLLER_EPOCH); a newer one raises the epoch;
* per partition, a LeaderAndIsr is taken only with a leader epoch **greater** than the one held
  (older: STALE_CONTROLLER_EPOCH, equal: FENCED_LEADER_EPOCH), and only if this broker is in its
  replicas (else UNKNOWN_TOPIC_OR_PARTITION);
* per partition, a StopReplica is taken with a greater epoch, or the sentinels -1 (no epoch) and
  -2 (topic being deleted); otherwise FENCED_LEADER_EPOCH.

The broker-epoch check (STALE_BROKER_EPOCH) belongs to the request handler, which sees the
request before this class does. Every method takes the one lock: requests from two controllers
(one of them a zombie) and fetches from followers never interleave inside a partition.

Leadership changes go to a ``ReplicaListener`` (the data plane) as whole batches: followers grouped
by leader, so ten thousand partitions are one call, not ten thousand.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import threading
from collections.abc import Callable, Iterable, Iterator
from operator import countOf, itemgetter
from typing import Protocol

from kafka_controller.broker.partition import Partition
from kafka_controller.domain.requests import (
    Errors,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    StopReplicaRequest,
    StopReplicaResponse,
)
from kafka_controller.domain.values import EPOCH_DURING_DELETE, NO_EPOCH, Broker, TopicPartition
from kafka_controller.heap import end_bulk
from kafka_controller.transport.state_columns import StateColumns

log = logging.getLogger(__name__)

_NONE = Errors.NONE
_STALE_CONTROLLER_EPOCH = Errors.STALE_CONTROLLER_EPOCH
_FENCED = Errors.FENCED_LEADER_EPOCH
_UNKNOWN = Errors.UNKNOWN_TOPIC_OR_PARTITION
_first8 = itemgetter(slice(8))  # a state's fields up to ``replicas``


#: Above this many partitions a request pauses the cyclic garbage collector (see ``_gc_paused``).
GC_PAUSE_THRESHOLD = 5_000


@contextlib.contextmanager
def _gc_paused(partitions: int) -> Iterator[None]:
    """Handling a big request allocates hundreds of thousands of small objects, none in a cycle;
    the collector's repeated passes over the whole heap meanwhile cost more than the handling
    itself (about 60% at 100,000 partitions). Reference counting still frees everything; what
    stays (partitions, their states) is frozen at the end (``heap.end_bulk``)."""
    if partitions < GC_PAUSE_THRESHOLD or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        end_bulk()


class ReplicaListener(Protocol):
    """Told about leadership changes, under the replica manager's lock; must not block."""

    def on_become_leaders(self, partitions: list[Partition]) -> None: ...

    def on_become_followers(
        self, by_leader: dict[int, list[Partition]], leaders: dict[int, Broker]
    ) -> None: ...

    def on_stop_replicas(self, partitions: list[TopicPartition]) -> None: ...


class _NoListener:
    def on_become_leaders(self, partitions: list[Partition]) -> None:
        return None

    def on_become_followers(self, by_leader: dict[int, list[Partition]], leaders: dict[int, Broker]) -> None:
        return None

    def on_stop_replicas(self, partitions: list[TopicPartition]) -> None:
        return None


class ReplicaManager:
    """Partitions hosted here, keyed by ``TopicPartition``; see the module docstring."""

    def __init__(
        self,
        broker_id: int,
        now_ms: Callable[[], int],
        *,
        produce_rate_per_s: float = 0.0,
        listener: ReplicaListener | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.now_ms = now_ms
        self.produce_rate_per_s = produce_rate_per_s
        self.listener: ReplicaListener = listener or _NoListener()
        self.lock = threading.RLock()
        self.controller_epoch = 0  # Kafka's KafkaController.InitialControllerEpoch
        self.partitions: dict[TopicPartition, Partition] = {}
        #: Controller epoch -> ids of the controllers whose requests this broker acted on in it.
        #: One id per epoch, always: an epoch is won once (a conditional write of
        #: ``/controller_epoch``), so a second id means a zombie's request got through. Kept for
        #: checkers (DescribeReplicas reports it); a handful of entries per controller change.
        self.acted_on: dict[int, set[int]] = {}

    # -- controller epoch --------------------------------------------------------------------------
    def check_controller_epoch(self, controller_epoch: int, controller_id: int) -> bool:
        """False for a request from an older controller; otherwise remember the epoch (the caller
        acts on the request)."""
        with self.lock:
            if controller_epoch < self.controller_epoch:
                return False
            self._accept(controller_id, controller_epoch)
            return True

    def _accept(self, controller_id: int, controller_epoch: int) -> None:
        self.controller_epoch = controller_epoch
        self.acted_on.setdefault(controller_epoch, set()).add(controller_id)

    # -- LeaderAndIsr ------------------------------------------------------------------------------
    def become_leader_or_follower(self, request: LeaderAndIsrRequest) -> LeaderAndIsrResponse:
        with self.lock, _gc_paused(len(request.partition_states)):
            if request.controller_epoch < self.controller_epoch:
                log.warning(
                    "Ignoring LeaderAndIsr from controller %d with epoch %d: the latest known epoch is %d",
                    request.controller_id,
                    request.controller_epoch,
                    self.controller_epoch,
                )
                tps = (TopicPartition(s.topic, s.partition) for s in request.partition_states)
                return LeaderAndIsrResponse(
                    _STALE_CONTROLLER_EPOCH, dict.fromkeys(tps, _STALE_CONTROLLER_EPOCH)
                )
            self._accept(request.controller_id, request.controller_epoch)
            now = self.now_ms()
            me = self.broker_id
            rate = self.produce_rate_per_s
            partitions = self.partitions
            errors: dict[TopicPartition, Errors] = {}
            leaders: list[Partition] = []
            followers: dict[int, list[Partition]] = {}
            states = request.partition_states
            # A decoded request's columns, row by row: no LeaderAndIsrPartitionState each.
            rows = states.raw(8) if isinstance(states, StateColumns) else map(_first8, states)
            for topic, partition, controller_epoch, leader, epoch, isr, zk_version, replicas in rows:
                # A plain (topic, partition) tuple finds the TopicPartition key (equal, hashed
                # alike); a TopicPartition is built only for a partition not hosted here yet.
                p = partitions.get((topic, partition))  # type: ignore[call-overload]
                if p is None:
                    tp = TopicPartition(topic, partition)
                    current = -1
                else:
                    tp = p.tp
                    current = p.leader_epoch
                if epoch > current:
                    if me not in replicas:
                        errors[tp] = _UNKNOWN
                        continue
                    if p is None:
                        p = partitions[tp] = Partition(tp, me, rate)
                    if p.apply_state(leader, epoch, isr, zk_version, replicas, controller_epoch, now):
                        leaders.append(p)
                    else:
                        followers.setdefault(leader, []).append(p)
                    errors[tp] = _NONE
                elif epoch < current:
                    errors[tp] = _STALE_CONTROLLER_EPOCH
                else:
                    errors[tp] = _FENCED
            if leaders:
                self.listener.on_become_leaders(leaders)
            if followers:
                live = {b.id: b for b in request.live_leaders}
                self.listener.on_become_followers(followers, live)
            log.info(
                "LeaderAndIsr from controller %d epoch %d: %d partitions, %d led, %d followed, %d refused",
                request.controller_id,
                request.controller_epoch,
                len(request.partition_states),
                len(leaders),
                sum(map(len, followers.values())),
                len(errors) - countOf(errors.values(), _NONE),  # C-level: 100,000+ entries
            )
            return LeaderAndIsrResponse(_NONE, errors)

    # -- StopReplica -------------------------------------------------------------------------------
    def stop_replicas(self, request: StopReplicaRequest) -> StopReplicaResponse:
        with self.lock:
            if request.controller_epoch < self.controller_epoch:
                return StopReplicaResponse(
                    _STALE_CONTROLLER_EPOCH, dict.fromkeys(request.partition_states, _STALE_CONTROLLER_EPOCH)
                )
            self._accept(request.controller_id, request.controller_epoch)
            errors: dict[TopicPartition, Errors] = {}
            stopped: list[TopicPartition] = []
            for tp, s in request.partition_states.items():
                p = self.partitions.get(tp)
                epoch = s.leader_epoch
                if p is not None and epoch not in (EPOCH_DURING_DELETE, NO_EPOCH) and epoch <= p.leader_epoch:
                    errors[tp] = _FENCED
                    continue
                if p is not None:
                    stopped.append(tp)  # its fetcher stops; Kafka keeps the partition unless deleting
                    if s.delete_partition or request.delete_partitions:
                        del self.partitions[tp]
                errors[tp] = _NONE
            if stopped:
                self.listener.on_stop_replicas(stopped)
            return StopReplicaResponse(_NONE, errors)

    # -- reads -------------------------------------------------------------------------------------
    def get(self, tp: TopicPartition) -> Partition | None:
        return self.partitions.get(tp)

    def leader_partitions(self) -> list[Partition]:
        with self.lock:
            return [p for p in self.partitions.values() if p.is_leader]

    def partitions_led(self) -> set[TopicPartition]:
        with self.lock:
            return {tp for tp, p in self.partitions.items() if p.is_leader}

    def snapshot(self, tps: Iterable[TopicPartition] | None = None) -> list[Partition]:
        with self.lock:
            if tps is None:
                return list(self.partitions.values())
            return [p for p in map(self.partitions.get, tps) if p is not None]
