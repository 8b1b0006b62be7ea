"""The broker's metrics, with Kafka 2.8's MBean names (the controller's are in ``controller.gauges``).

* ``ReplicaManager``: ``LeaderCount``, ``PartitionCount``, ``UnderReplicatedPartitions``,
  ``UnderMinIsrPartitionCount`` and ``AtMinIsrPartitionCount`` (partitions this broker leads whose
  ISR is below / exactly ``min.insync.replicas``, the topic's override or the default 1), and the
  ``IsrShrinksPerSec`` / ``IsrExpandsPerSec`` meters, marked when the controller accepts an
  AlterIsr that shrinks or expands an ISR (as Kafka 2.8 does on a committed AlterIsr).
* ``KafkaServer``'s ``BrokerState``: Kafka's numbers (0 not running, 1 starting, 3 running as
  broker, 6 pending controlled shutdown, 7 shutting down).
* ZooKeeper: ``ZooKeeperClientMetrics``'s ``ZooKeeperRequestLatencyMs`` (a histogram of each
  request's or batch's round trip), ``SessionExpireListener``'s ``SessionState`` (Kafka's is a
  string; Prometheus has no string gauges, so here 1 = connected, 0 = not), ``ZooKeeperExpiresPerSec``
  and ``ZooKeeperDisconnectsPerSec``.
* ``ControllerChannelManager``'s ``TotalQueueSize`` and, per broker, ``QueueSize,broker-id=N``
  (requests the controller queued for that broker and not yet sent; all 0 off the controller).
* Not Kafka's: ``kafka.broker:type=Threads,name=CpuSeconds,thread=NAME``, the CPU each live thread
  of the process has used (``thread_cpu``; Linux only). The controller's event thread, its send
  threads and the broker's own share one GIL, and ``top -H`` cannot tell them apart.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Collection, Mapping
from typing import TYPE_CHECKING, Any

from kafka_controller.domain.config_keys import MIN_INSYNC_REPLICAS
from kafka_controller.domain.errors import KafkaControllerError
from kafka_controller.domain.values import LeaderAndIsr
from kafka_controller.ports import MetadataStore, SessionEvent
from kafka_controller.thread_cpu import thread_cpu_seconds

if TYPE_CHECKING:
    from kafka_controller.broker.replica_manager import ReplicaManager
    from kafka_controller.controller.metrics import Meter, MetricsRegistry

_RM = "kafka.server:type=ReplicaManager,name="
LEADER_COUNT = _RM + "LeaderCount"
PARTITION_COUNT = _RM + "PartitionCount"
UNDER_REPLICATED_PARTITIONS = _RM + "UnderReplicatedPartitions"
UNDER_MIN_ISR_PARTITION_COUNT = _RM + "UnderMinIsrPartitionCount"
AT_MIN_ISR_PARTITION_COUNT = _RM + "AtMinIsrPartitionCount"
ISR_SHRINKS_PER_SEC = _RM + "IsrShrinksPerSec"
ISR_EXPANDS_PER_SEC = _RM + "IsrExpandsPerSec"
BROKER_STATE = "kafka.server:type=KafkaServer,name=BrokerState"
ZK_REQUEST_LATENCY_MS = "kafka.server:type=ZooKeeperClientMetrics,name=ZooKeeperRequestLatencyMs"
ZK_SESSION_STATE = "kafka.server:type=SessionExpireListener,name=SessionState"
ZK_EXPIRES_PER_SEC = "kafka.server:type=SessionExpireListener,name=ZooKeeperExpiresPerSec"
ZK_DISCONNECTS_PER_SEC = "kafka.server:type=SessionExpireListener,name=ZooKeeperDisconnectsPerSec"
_CCM = "kafka.controller:type=ControllerChannelManager,name="
TOTAL_QUEUE_SIZE = _CCM + "TotalQueueSize"
QUEUE_SIZE = _CCM + "QueueSize"
THREAD_CPU_SECONDS = "kafka.broker:type=Threads,name=CpuSeconds"
#: What a metric label value may hold (``controller.metrics``'s MBean tags); the rest becomes ``_``.
_NOT_IN_LABEL = re.compile(r"[^\w.-]")

#: Kafka 2.8's ``BrokerState`` values (``kafka.metrics.BrokerState``).
NOT_RUNNING, STARTING, RUNNING_AS_BROKER, PENDING_CONTROLLED_SHUTDOWN, BROKER_SHUTTING_DOWN = 0, 1, 3, 6, 7
DEFAULT_MIN_INSYNC_REPLICAS = 1


def min_isr_of(config: Mapping[str, str]) -> int:
    try:
        return max(1, int(config.get(MIN_INSYNC_REPLICAS, DEFAULT_MIN_INSYNC_REPLICAS)))
    except ValueError:
        return DEFAULT_MIN_INSYNC_REPLICAS


class TopicMinIsr:
    """``min.insync.replicas`` per topic: read once per topic (one batched read for all the topics
    a scrape meets first), then kept up to date by the config change notifications."""

    def __init__(self, store: MetadataStore) -> None:
        self._store = store
        self._lock = threading.Lock()
        self._known: dict[str, int] = {}

    def on_topic_config(self, topic: str, config: Mapping[str, str]) -> None:
        with self._lock:
            self._known[topic] = min_isr_of(config)

    def get(self, topics: Collection[str]) -> dict[str, int]:
        with self._lock:
            missing = [t for t in topics if t not in self._known]
        if missing:
            try:
                configs, _failed = self._store.get_log_configs(missing, {})
            except KafkaControllerError:
                configs = {}  # ZooKeeper unreachable: the default until a later scrape reads them
            with self._lock:
                for topic, config in configs.items():
                    self._known.setdefault(topic, min_isr_of(config))
        with self._lock:
            return {t: self._known.get(t, DEFAULT_MIN_INSYNC_REPLICAS) for t in topics}


class IsrChangeMeters:
    """Marks ``IsrShrinksPerSec`` / ``IsrExpandsPerSec`` from a committed ISR change."""

    def __init__(self, shrinks: Meter, expands: Meter) -> None:
        self.shrinks = shrinks
        self.expands = expands

    def committed(self, old_isr: Collection[int], new: LeaderAndIsr) -> None:
        if len(new.isr) < len(old_isr):
            self.shrinks.mark()
        elif len(new.isr) > len(old_isr):
            self.expands.mark()


def register_replica_manager_metrics(
    registry: MetricsRegistry, rm: ReplicaManager, min_isr: TopicMinIsr
) -> IsrChangeMeters:
    def led() -> list[Any]:
        with rm.lock:
            return [p for p in rm.partitions.values() if p.is_leader]

    def partitions() -> int:
        with rm.lock:
            return len(rm.partitions)

    def vs_min_isr() -> tuple[int, int]:
        leaders = led()
        mins = min_isr.get({p.tp.topic for p in leaders})
        under = sum(1 for p in leaders if len(p.isr) < mins[p.tp.topic])
        at = sum(1 for p in leaders if len(p.isr) == mins[p.tp.topic])
        return under, at

    registry.gauge(LEADER_COUNT, lambda: len(led()), "Partitions this broker leads")
    registry.gauge(PARTITION_COUNT, partitions, "Replicas on this broker")
    registry.gauge(
        UNDER_REPLICATED_PARTITIONS,
        lambda: sum(1 for p in led() if len(p.isr) < len(p.replicas)),
        "Led partitions with ISR < replicas",
    )
    registry.gauge(
        UNDER_MIN_ISR_PARTITION_COUNT, lambda: vs_min_isr()[0], "Led partitions with ISR < min ISR"
    )
    registry.gauge(AT_MIN_ISR_PARTITION_COUNT, lambda: vs_min_isr()[1], "Led partitions with ISR = min ISR")
    return IsrChangeMeters(
        registry.meter(ISR_SHRINKS_PER_SEC, "ISR shrinks committed"),
        registry.meter(ISR_EXPANDS_PER_SEC, "ISR expansions committed"),
    )


def register_zookeeper_metrics(registry: MetricsRegistry, store: MetadataStore) -> None:
    """Session state and meters from the store's session events; request latency from the kazoo
    backend when there is one (the in-memory store has no round trips to time)."""
    connected = [1.0]
    expires = registry.meter(ZK_EXPIRES_PER_SEC, "ZooKeeper session expirations")
    disconnects = registry.meter(ZK_DISCONNECTS_PER_SEC, "ZooKeeper disconnections")

    def on_event(event: SessionEvent) -> None:  # a store thread: a flag and a meter, nothing more
        connected[0] = 1.0 if event is SessionEvent.CONNECTED else 0.0
        if event is SessionEvent.EXPIRED:
            expires.mark()
        elif event is SessionEvent.SUSPENDED:
            disconnects.mark()

    store.add_session_listener(on_event)
    registry.gauge(ZK_SESSION_STATE, lambda: connected[0], "ZooKeeper session: 1 connected, 0 not")
    latency = registry.histogram(ZK_REQUEST_LATENCY_MS, "ZooKeeper request round trips (ms)")
    backend = getattr(store, "backend", None)
    if backend is not None and hasattr(backend, "on_request_latency_ms"):
        backend.on_request_latency_ms = latency.update


def register_channel_metrics(
    registry: MetricsRegistry, broker_ids: Callable[[], list[int]], queue_size: Callable[[int], int]
) -> None:
    registry.gauge(
        TOTAL_QUEUE_SIZE,
        lambda: float(sum(queue_size(b) for b in broker_ids())),
        "Requests queued, all brokers",
    )
    registry.collector(
        lambda: {f"{QUEUE_SIZE},broker-id={b}": float(queue_size(b)) for b in broker_ids()},
        "Requests queued for one broker",
    )


def register_thread_cpu_metrics(registry: MetricsRegistry) -> None:
    """``CpuSeconds,thread=NAME`` per live thread, read at each scrape (threads of one name summed)."""

    def by_thread() -> dict[str, float]:
        out: dict[str, float] = {}
        for name, cpu in thread_cpu_seconds().values():
            key = f"{THREAD_CPU_SECONDS},thread={_NOT_IN_LABEL.sub('_', name) or '_'}"
            out[key] = out.get(key, 0.0) + cpu
        return out

    registry.collector(by_thread, "CPU seconds this thread of the broker's process has used")
