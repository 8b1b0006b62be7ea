"""The broker's metadata cache (Kafka's ``ZkMetadataCache``): what the last UpdateMetadata said.

It answers "who is the controller", "which brokers are alive and where do they listen", and
"what is the state of partition X" without a ZooKeeper read. Kafka's update rules: the live broker
list and the controller id are replaced on every request; partition states are merged in (a
request without partitions keeps them all); a partition sent with leader -2 (its topic is being
deleted) is dropped. Thread-safe: one lock, readers get copies; ``wait_until`` lets an admin
request wait for an update (Kafka's delayed CreateTopics/DeleteTopics) without polling.

Partitions are kept per topic, as Kafka's cache does, so that a Metadata request for one topic
reads that topic's partitions and not the whole cluster's.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

from kafka_controller.domain.requests import UpdateMetadataPartitionState, UpdateMetadataRequest
from kafka_controller.domain.values import LEADER_DURING_DELETE, Broker, EndPoint, TopicPartition


class MetadataCache:
    def __init__(self, broker_id: int) -> None:
        self.broker_id = broker_id
        self._lock = threading.Condition(threading.RLock())  # predicates of wait_until re-enter
        self._controller_id = -1
        self._brokers: dict[int, Broker] = {}
        self._topics: dict[str, dict[int, UpdateMetadataPartitionState]] = {}
        self._topic_ids: dict[str, str] = {}

    def update_metadata(self, request: UpdateMetadataRequest) -> list[TopicPartition]:
        """Apply an UpdateMetadata; returns the partitions deleted by it (leader -2)."""
        deleted: list[TopicPartition] = []
        with self._lock:
            self._controller_id = request.controller_id if request.controller_id >= 0 else -1
            self._brokers = {b.id: b for b in request.live_brokers}
            self._topic_ids.update(request.topic_ids)
            topics = self._topics
            for s in request.partition_states:
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
            self._lock.notify_all()
        return deleted

    def wait_until(self, predicate: Callable[[MetadataCache], bool], timeout_s: float) -> bool:
        """Whether ``predicate(self)`` held within ``timeout_s``; it is re-checked after every update."""
        with self._lock:
            return self._lock.wait_for(lambda: predicate(self), max(0.0, timeout_s))

    def contains_topic(self, topic: str) -> bool:
        with self._lock:
            return topic in self._topics

    def topic_partitions(self, topic: str) -> dict[int, UpdateMetadataPartitionState]:
        with self._lock:
            return dict(self._topics.get(topic, {}))

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
            parts = self._topics.get(tp.topic)
            return None if parts is None else parts.get(tp.partition)

    def all_partitions(self) -> list[TopicPartition]:
        with self._lock:
            return [TopicPartition(t, p) for t, parts in self._topics.items() for p in parts]

    def partition_states(
        self, tps: Iterable[TopicPartition] | None = None
    ) -> list[UpdateMetadataPartitionState]:
        with self._lock:
            topics = self._topics
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
            known = self._topics
            names = known if topics is None else [t for t in topics if t in known]
            return {t: [known[t][p] for p in sorted(known[t])] for t in names}

    def topic_id(self, topic: str) -> str | None:
        with self._lock:
            return self._topic_ids.get(topic)
