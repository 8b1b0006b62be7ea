"""Ports: one ``typing.Protocol`` per outside system, each method's guarantee on its docstring.

The core reaches ZooKeeper only through ``PartitionStateStore`` (the part of the metadata store the
state machines need), brokers only through ``BrokerChannel``, the audit store only through
``AuditSink``, and time only through ``Clock``. Errors crossing a port are the project's own
(``kafka_controller.domain.errors``): ``ControllerMovedError`` means fenced (resign),
``StoreUnavailableError`` means try again later, any other ``MetadataStoreError`` is per znode.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from kafka_controller.domain.audit_records import AuditRecord
from kafka_controller.domain.errors import MetadataStoreError
from kafka_controller.domain.requests import ControlRequest, ControlResponse
from kafka_controller.domain.values import LeaderAndIsr, LeaderIsrAndControllerEpoch, TopicPartition

#: One partition's read of its state znode: the decoded value (its ``leader_and_isr.zk_version`` is
#: the znode's data version), ``None`` when the znode is missing or empty, or the per-znode error
#: (including ``ZNodeDecodeError`` for corrupt data).
PartitionStateRead = LeaderIsrAndControllerEpoch | None | MetadataStoreError


@dataclass(slots=True)
class UpdateLeaderAndIsrResult:
    """Kafka's ``UpdateLeaderAndIsrResult`` (spec §7.4).

    ``finished`` maps each partition to the written value (with its new zk version) or to the
    per-partition error; ``to_retry`` lists, in response order, the partitions whose conditional
    write hit BADVERSION and must be re-read and retried.
    """

    finished: dict[TopicPartition, LeaderAndIsr | MetadataStoreError] = field(default_factory=dict)
    to_retry: list[TopicPartition] = field(default_factory=list)


@runtime_checkable
class PartitionStateStore(Protocol):
    """The partition-state part of the metadata store, which is all the core state machines use.

    Every write is **fenced**: it happens only if ``/controller_epoch`` still has the data version
    ``expected_controller_epoch_zk_version``; otherwise the call raises ``ControllerMovedError`` and
    writes nothing. Reads are not fenced. Batches are handled in as few round trips as the backend
    allows; no method does one round trip per partition.
    """

    def get_partition_states(
        self, partitions: Sequence[TopicPartition]
    ) -> dict[TopicPartition, PartitionStateRead]:
        """Read ``/brokers/topics/<t>/partitions/<p>/state`` for each partition, keyed in input order.

        Raises ``MetadataStoreError`` (usually ``StoreUnavailableError``) if the batch as a whole
        could not be read; per-znode problems are values in the result, never raised.
        """
        ...

    def create_partition_states(
        self,
        states: Mapping[TopicPartition, LeaderIsrAndControllerEpoch],
        expected_controller_epoch_zk_version: int,
    ) -> dict[TopicPartition, MetadataStoreError | None]:
        """Create-if-absent each state znode (and its ``partitions`` / ``partitions/<p>`` parents).

        ``None`` means created; ``NodeExistsError`` or another error is per partition. Fenced.
        """
        ...

    def update_leader_and_isr(
        self,
        leader_and_isrs: Mapping[TopicPartition, LeaderAndIsr],
        controller_epoch: int,
        expected_controller_epoch_zk_version: int,
    ) -> UpdateLeaderAndIsrResult:
        """Compare-and-set each state znode on ``leader_and_isr.zk_version`` (spec §7.4). Fenced.

        BADVERSION on a partition's own write puts it in ``to_retry``; any other per-partition
        failure (e.g. ``NoNodeError``) is final and lands in ``finished``.
        """
        ...

    def get_log_configs(
        self, topics: Collection[str], broker_defaults: Mapping[str, str]
    ) -> tuple[dict[str, dict[str, str]], dict[str, MetadataStoreError]]:
        """Each topic's ``/config/topics/<t>`` merged over ``broker_defaults``, and per-topic failures.

        A topic without a config znode gets the defaults. Values are strings, as Kafka keeps them.
        """
        ...


class DeletionClient(Protocol):
    """What the topic-deletion manager needs from the controller (Kafka's ``DeletionClient``)."""

    def delete_topic(self, topic: str, expected_controller_epoch_zk_version: int) -> None:
        """Delete the topic znode recursively, its config and its deletion request. Fenced."""
        ...

    def delete_topic_deletions(
        self, topics: Collection[str], expected_controller_epoch_zk_version: int
    ) -> None:
        """Delete ``/admin/delete_topics/<t>`` for each topic. Fenced."""
        ...

    def mute_partition_modifications(self, topic: str) -> None:
        """Stop watching the topic znode, so its deletion does not come back as an event."""
        ...

    def send_metadata_update(self, partitions: Collection[TopicPartition]) -> None:
        """UpdateMetadata for these partitions to every live or shutting-down broker."""
        ...


ResponseCallback = Callable[[ControlResponse], None]


class BrokerChannel(Protocol):
    """The controller's outbound queues to brokers (Kafka's ``ControllerChannelManager``)."""

    def send_request(
        self, broker_id: int, request: ControlRequest, callback: ResponseCallback | None = None
    ) -> None:
        """Queue ``request`` for ``broker_id`` and return at once.

        Delivery is retried until it succeeds or the broker's queue is removed; requests to a broker
        without a queue are dropped with a warning. ``callback`` runs on a channel thread with the
        response and must only enqueue (house rule 5).
        """
        ...


class AuditSink(Protocol):
    """Where every attempted transition goes. Never blocks the controller on I/O and never raises."""

    def record(self, records: Sequence[AuditRecord]) -> None:
        """Accept records for durable storage, in order. Returns without waiting for the database."""
        ...


class Clock(Protocol):
    """Injected time (house rule 7): the core and controller never call ``time`` directly."""

    def time_ms(self) -> int:
        """Wall-clock milliseconds since the epoch (for znode timestamps and audit rows)."""
        ...

    def monotonic(self) -> float:
        """Seconds on a monotonic clock (for durations and deadlines)."""
        ...

    def sleep(self, seconds: float) -> None:
        """Block the calling thread (a fake clock advances instead)."""
        ...


class NullAuditSink:
    """An audit sink that drops everything: the default when auditing is off."""

    def record(self, records: Sequence[AuditRecord]) -> None:
        return None


class SystemClock:
    """The real clock."""

    def time_ms(self) -> int:
        import time

        return int(time.time() * 1000)

    def monotonic(self) -> float:
        import time

        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        import time

        time.sleep(seconds)
