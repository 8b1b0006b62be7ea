"""The broker's metadata cache (Kafka's ``ZkMetadataCache``): what the last UpdateMetadata said.

It answers "who is the controller", "which brokers are alive and where do they listen", and
"what is the state of partition X" without a ZooKeeper read. Kafka's update rules: the live broker
list and the controller id are replaced on every request; partition states are merged in (a
request without partitions keeps them all); a partition sent with leader -2 (its topic is being
deleted) is dropped. Thread-safe: one lock, readers get copies; ``wait_until`` lets an admin
request wait for an update (Kafka's delayed CreateTopics/DeleteTopics) without polling.

Partitions are kept per topic, as Kafka's cache does, so that a Metadata request for one topic
reads that topic's partitions and not the whole cluster's.

A request's states are merged when the cache is next read, not when the request arrives: an
UpdateMetadata without a deletion is queued as it is (a decoded request's ``StateColumns``, no
object per partition) and the queue is merged, oldest first, by the first read, by a deletion,
once no UpdateMetadata has come for ``MERGE_WHEN_IDLE_S`` (on a timer thread), or once it holds
``MAX_PENDING_REQUESTS`` requests or ``MAX_PENDING_STATES`` states (both bound its memory). A
failover sends each broker two to four UpdateMetadata of up to 100,000 states that no one reads
meanwhile; each used to cost a loop over its states on arrival, now it costs an append, and the
merge (the same loop) runs once the burst is over, off the failover's critical path, when the
machine the broker shares with the controller and ZooKeeper is no longer saturated. States already
built (the controller's own broker, handed the controller's tuple in-process) are merged at once
when nothing is queued: queued, they would keep the controller's states alive beside the ones
they replace, at the controller's peak. Readers see what Kafka's state-by-state merge would have
given: the merge is the same, only later (README deviation 18: Kafka merges on arrival; this
departs from its call sequence, not from what a reader can observe).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Sequence
from itertools import groupby, islice
from operator import itemgetter
from typing import Any

from kafka_controller.domain.requests import UpdateMetadataPartitionState, UpdateMetadataRequest
from kafka_controller.domain.values import LEADER_DURING_DELETE, Broker, EndPoint, TopicPartition
from kafka_controller.transport.columns import gc_paused
from kafka_controller.transport.state_columns import StateColumns

#: Requests queued unmerged at most (see the module docstring).
MAX_PENDING_REQUESTS = 8
#: States queued unmerged at most: about 7 MB of decoded columns per 100,000.
MAX_PENDING_STATES = 400_000
#: A queue is merged once no UpdateMetadata has come for this long.
MERGE_WHEN_IDLE_S = 1.0
#: Below this many states a request is merged at once when nothing is queued.
MIN_QUEUED_STATES = 1_000

_State = UpdateMetadataPartitionState
_leader = itemgetter(3)


Timer = Callable[[float, Callable[[], None]], Any]


def _daemon_timer(delay_s: float, fn: Callable[[], None]) -> threading.Timer:
    timer = threading.Timer(delay_s, fn)
    timer.daemon = True
    timer.start()
    return timer


class MetadataCache:
    def __init__(
        self, broker_id: int, timer: Timer = _daemon_timer, clock: Callable[[], float] = time.monotonic
    ) -> None:
        """``timer(delay_s, fn)`` calls ``fn`` once after ``delay_s`` (the idle merge)."""
        self.broker_id = broker_id
        self._timer, self._clock = timer, clock
        self._timer_armed = False
        self._last_queued = 0.0
        self._lock = threading.Condition(threading.RLock())  # predicates of wait_until re-enter
        self._controller_id = -1
        self._brokers: dict[int, Broker] = {}
        self._topics: dict[str, dict[int, UpdateMetadataPartitionState]] = {}
        self._pending: list[Sequence[_State]] = []  # requests not merged yet, oldest first
        self._pending_states = 0
        self._topic_ids: dict[str, str] = {}

    def update_metadata(self, request: UpdateMetadataRequest) -> list[TopicPartition]:
        """Apply an UpdateMetadata; returns the partitions deleted by it (leader -2).

        Without a deletion the states are queued (see the module docstring) and nothing is
        returned, as Kafka returns nothing then either."""
        states = request.partition_states
        with self._lock:
            self._controller_id = request.controller_id if request.controller_id >= 0 else -1
            self._brokers = {b.id: b for b in request.live_brokers}
            self._topic_ids.update(request.topic_ids)
            deleted: list[TopicPartition] = []
            if states and not _deletes(states):
                pending = self._pending
                if pending or (len(states) >= MIN_QUEUED_STATES and isinstance(states, StateColumns)):
                    pending.append(states)
                    self._pending_states += len(states)
                    self._last_queued = self._clock()
                    if len(pending) > MAX_PENDING_REQUESTS or self._pending_states > MAX_PENDING_STATES:
                        self._merge_pending()
                    elif not self._timer_armed:
                        self._timer_armed = True
                        self._timer(MERGE_WHEN_IDLE_S, self._merge_when_idle)
                else:
                    self._merge(states, deleted)
            elif states:
                self._merge_pending()
                self._merge(states, deleted)
            self._lock.notify_all()
        return deleted

    def _merge_when_idle(self) -> None:
        """The timer: merge the queue if no request was queued for ``MERGE_WHEN_IDLE_S``, else wait
        for the rest of that time again."""
        with self._lock:
            self._timer_armed = False
            if not self._pending:
                return
            idle = self._clock() - self._last_queued
            if idle >= MERGE_WHEN_IDLE_S:
                self._merge_pending()
            else:
                self._timer_armed = True
                self._timer(MERGE_WHEN_IDLE_S - idle, self._merge_when_idle)

    def _merge_pending(self) -> None:
        """Merge the queued requests, oldest first (under the lock)."""
        pending = self._pending
        if not pending:
            return
        self._pending, self._pending_states = [], 0
        with gc_paused(sum(map(len, pending))):
            for states in pending:
                if isinstance(states, StateColumns):
                    self._merge_columns(states)
                else:  # built states queued behind a decoded request
                    self._merge(states, [])

    def _merge(self, states: Iterable[_State], deleted: list[TopicPartition]) -> None:
        """Kafka's merge, state by state."""
        topics = self._topics
        for s in states:
            if s.leader == LEADER_DURING_DELETE:
                parts = topics.get(s.topic)
                if parts is not None and parts.pop(s.partition, None) is not None:
                    deleted.append(TopicPartition(s.topic, s.partition))
                    if not parts:
                        del topics[s.topic]
                        self._topic_ids.pop(s.topic, None)
            else:
                parts = topics.get(s.topic)
                if parts is None:
                    parts = topics[s.topic] = {}
                parts[s.partition] = s

    def _merge_columns(self, states: StateColumns[_State]) -> None:
        """``_merge`` of a queued request's columns (no deletion in them), a run of one topic's
        states at a time: each run one ``dict.update`` (C), not a Python loop per state. Same keys,
        values and insertion order as ``_merge``."""
        topics = self._topics
        pairs = zip(states.partitions, states.rows(), strict=True)
        for topic, run in groupby(states.topics):
            parts = topics.get(topic)
            if parts is None:
                parts = topics[topic] = {}
            parts.update(islice(pairs, len(list(run))))

    def _merged(self) -> dict[str, dict[int, _State]]:
        """The partitions per topic, the queue merged first (under the lock)."""
        if self._pending:
            self._merge_pending()
        return self._topics

    def wait_until(self, predicate: Callable[[MetadataCache], bool], timeout_s: float) -> bool:
        """Whether ``predicate(self)`` held within ``timeout_s``; it is re-checked after every update."""
        with self._lock:
            return self._lock.wait_for(lambda: predicate(self), max(0.0, timeout_s))

    def contains_topic(self, topic: str) -> bool:
        with self._lock:
            return topic in self._merged()

    def topic_partitions(self, topic: str) -> dict[int, UpdateMetadataPartitionState]:
        with self._lock:
            return dict(self._merged().get(topic, {}))

    def topic_names_by_id(self) -> dict[str, str]:
        """Topic id -> name, of the topics whose ids the controller sent."""
        with self._lock:
            return {topic_id: name for name, topic_id in self._topic_ids.items()}

    @property
    def controller_id(self) -> int:
        """The controller named by the last UpdateMetadata, or -1."""
        return self._controller_id

    def alive_brokers(self) -> list[Broker]:
        with self._lock:
            return list(self._brokers.values())

    def get_alive_broker(self, broker_id: int) -> Broker | None:
        with self._lock:
            return self._brokers.get(broker_id)

    def endpoint(self, broker_id: int, listener_name: str = "PLAINTEXT") -> EndPoint | None:
        broker = self.get_alive_broker(broker_id)
        return None if broker is None else broker.endpoint(listener_name)

    def get_partition_info(self, tp: TopicPartition) -> UpdateMetadataPartitionState | None:
        with self._lock:
            parts = self._merged().get(tp.topic)
            return None if parts is None else parts.get(tp.partition)

    def all_partitions(self) -> list[TopicPartition]:
        with self._lock:
            return [TopicPartition(t, p) for t, parts in self._merged().items() for p in parts]

    def partition_states(
        self, tps: Iterable[TopicPartition] | None = None
    ) -> list[UpdateMetadataPartitionState]:
        with self._lock:
            topics = self._merged()
            if tps is None:
                return [s for parts in topics.values() for s in parts.values()]
            out = []
            for tp in tps:
                parts = topics.get(tp.topic)
                s = None if parts is None else parts.get(tp.partition)
                if s is not None:
                    out.append(s)
            return out

    def topic_partition_states(
        self, topics: Iterable[str] | None = None
    ) -> dict[str, list[UpdateMetadataPartitionState]]:
        """Each known topic asked for (all when ``None``) with its partitions, in partition order."""
        with self._lock:
            known = self._merged()
            names = known if topics is None else [t for t in topics if t in known]
            return {t: [known[t][p] for p in sorted(known[t])] for t in names}

    def topic_id(self, topic: str) -> str | None:
        with self._lock:
            return self._topic_ids.get(topic)


def _deletes(states: Sequence[_State]) -> bool:
    """Whether any state deletes its partition (leader -2)."""
    leaders = states.leaders if isinstance(states, StateColumns) else map(_leader, states)
    return LEADER_DURING_DELETE in leaders
