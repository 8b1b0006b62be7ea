"""The broker's metadata cache (Kafka's ``ZkMetadataCache``): what the last UpdateMetadata said.

It answers "who is the controller", "which brokers are alive and where do they listen", and
"what is the state of partition X" without a ZooKeeper read. Kafka's update rules: the live broker
list and the controller id are replaced on every request; partition states are merged in (a
request without partitions keeps them all); a partition sent with leader -2 (its topic is being
deleted) is dropped. Thread-safe: one lock, readers get copies; ``wait_until`` lets an admin
request wait for an update (Kafka's delayed CreateTopics/DeleteTopics) without polling.

Partitions are kept per topic, as Kafka's cache does, so that a Metadata request for one topic
reads that topic's partitions and not the whole cluster's: each topic holds references to the runs of
the requests that named it (``StateColumns``, the decoded columns) and builds its partitions'
states when first read, so an UpdateMetadata of 100,000 partitions costs per topic, not per
partition, until a Metadata request asks.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

from kafka_controller.domain.requests import UpdateMetadataPartitionState, UpdateMetadataRequest
from kafka_controller.domain.values import LEADER_DURING_DELETE, Broker, EndPoint, TopicPartition
from kafka_controller.transport.columns import gc_paused
from kafka_controller.transport.state_columns import StateColumns

#: Runs of one topic kept unmaterialised before the topic is built anyway (bounds their memory).
MAX_PENDING_RUNS = 8

_State = UpdateMetadataPartitionState


class _TopicStates:
    """One topic's partitions: ``states`` as built, then the runs of later requests not built yet
    (``pending``: ``(columns, start, stop)``, applied in order). ``keys`` is every partition held,
    ``order`` the same sorted (``None``: not known). A run naming exactly the partitions held (one
    list comparison: a full UpdateMetadata's runs) replaces all that came before it."""

    __slots__ = ("keys", "order", "pending", "states")

    def __init__(self) -> None:
        self.states: dict[int, _State] = {}
        self.pending: list[tuple[StateColumns[_State], int, int]] = []
        self.keys: set[int] = set()
        self.order: list[int] | None = []

    def add_run(self, cols: StateColumns[_State], start: int, stop: int) -> None:
        parts = cols.partitions[start:stop]
        if parts == self.order:
            self.states, self.pending = {}, [(cols, start, stop)]
            return
        self.pending.append((cols, start, stop))
        keys = self.keys
        if self.order is None or not all(map(keys.__contains__, parts)):
            keys.update(parts)
            self.order = sorted(keys)
        if len(self.pending) > MAX_PENDING_RUNS:
            self.built()

    def set(self, partition: int, state: _State) -> None:
        self.built()[partition] = state
        if partition not in self.keys:
            self.keys.add(partition)
            self.order = None

    def discard(self, partition: int) -> bool:
        if self.built().pop(partition, None) is None:
            return False
        self.keys.discard(partition)
        self.order = None
        return True

    def built(self) -> dict[int, _State]:
        if self.pending:
            states = self.states
            for cols, start, stop in self.pending:
                states.update(zip(cols.partitions[start:stop], cols.rows(start, stop), strict=True))
            self.pending = []
        return self.states


class MetadataCache:
    def __init__(self, broker_id: int) -> None:
        self.broker_id = broker_id
        self._lock = threading.Condition(threading.RLock())  # predicates of wait_until re-enter
        self._controller_id = -1
        self._brokers: dict[int, Broker] = {}
        self._topics: dict[str, _TopicStates] = {}
        self._topic_ids: dict[str, str] = {}

    def update_metadata(self, request: UpdateMetadataRequest) -> list[TopicPartition]:
        """Apply an UpdateMetadata; returns the partitions deleted by it (leader -2).

        Without a deletion, each topic's run of states is kept by reference (``StateColumns``),
        built when read: no work per partition here."""
        deleted: list[TopicPartition] = []
        cols = StateColumns.of(request.partition_states)
        with self._lock, gc_paused(len(cols)):
            self._controller_id = request.controller_id if request.controller_id >= 0 else -1
            self._brokers = {b.id: b for b in request.live_brokers}
            self._topic_ids.update(request.topic_ids)
            topics = self._topics
            if LEADER_DURING_DELETE not in cols.leaders:
                for topic, start, stop in cols.topic_runs():
                    t = topics.get(topic)
                    if t is None:
                        t = topics[topic] = _TopicStates()
                    t.add_run(cols, start, stop)
            else:
                self._merge(cols, deleted)
            self._lock.notify_all()
        return deleted

    def _merge(self, cols: StateColumns[_State], deleted: list[TopicPartition]) -> None:
        """Kafka's merge, state by state: a request that deletes partitions."""
        topics = self._topics
        for s in cols:
            t = topics.get(s.topic)
            if s.leader == LEADER_DURING_DELETE:
                if t is not None and t.discard(s.partition):
                    deleted.append(TopicPartition(s.topic, s.partition))
                    if not t.keys:
                        del topics[s.topic]
                        self._topic_ids.pop(s.topic, None)
            else:
                if t is None:
                    t = topics[s.topic] = _TopicStates()
                t.set(s.partition, s)

    def _parts(self, topic: str) -> dict[int, _State] | None:
        t = self._topics.get(topic)
        return None if t is None else t.built()

    def wait_until(self, predicate: Callable[[MetadataCache], bool], timeout_s: float) -> bool:
        """Whether ``predicate(self)`` held within ``timeout_s``; it is re-checked after every update."""
        with self._lock:
            return self._lock.wait_for(lambda: predicate(self), max(0.0, timeout_s))

    def contains_topic(self, topic: str) -> bool:
        with self._lock:
            return topic in self._topics

    def topic_partitions(self, topic: str) -> dict[int, UpdateMetadataPartitionState]:
        with self._lock:
            return dict(self._parts(topic) or {})

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
            parts = self._parts(tp.topic)
            return None if parts is None else parts.get(tp.partition)

    def all_partitions(self) -> list[TopicPartition]:
        with self._lock:
            return [TopicPartition(t, p) for t, parts in self._topics.items() for p in parts.built()]

    def partition_states(
        self, tps: Iterable[TopicPartition] | None = None
    ) -> list[UpdateMetadataPartitionState]:
        with self._lock:
            if tps is None:
                return [s for parts in self._topics.values() for s in parts.built().values()]
            out = []
            for tp in tps:
                parts = self._parts(tp.topic)
                s = None if parts is None else parts.get(tp.partition)
                if s is not None:
                    out.append(s)
            return out

    def topic_partition_states(
        self, topics: Iterable[str] | None = None
    ) -> dict[str, list[UpdateMetadataPartitionState]]:
        """Each known topic asked for (all when ``None``) with its partitions, in partition order."""
        with self._lock:
            known = self._topics
            names = known if topics is None else [t for t in topics if t in known]
            built = {t: known[t].built() for t in names}
            return {t: [parts[p] for p in sorted(parts)] for t, parts in built.items()}

    def topic_id(self, topic: str) -> str | None:
        with self._lock:
            return self._topic_ids.get(topic)
