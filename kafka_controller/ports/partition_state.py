"""The part of the metadata store the state machines use: batched partition-state reads and
fenced conditional writes, and topic configs (the subset of Kafka's ``KafkaZkClient`` that
docs/controller-behaviour.md §3, §4 use)."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from kafka_controller.domain.errors import MetadataStoreError
from kafka_controller.domain.values import (
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    TopicPartition,
)

__all__ = ["PartitionStateRead", "PartitionStateStore", "UpdateLeaderAndIsrResult"]

#: One partition's read of its state znode: the decoded value (its ``leader_and_isr.zk_version`` is
#: the znode's data version), ``None`` when the znode is missing or empty, or the per-znode error
#: (including ``ZNodeDecodeError`` for corrupt data).
PartitionStateRead = LeaderIsrAndControllerEpoch | None | MetadataStoreError


@dataclass(slots=True)
class UpdateLeaderAndIsrResult:
    """Kafka's ``UpdateLeaderAndIsrResult`` (docs/controller-behaviour.md §7.4).

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
        """Compare-and-set each state znode on ``leader_and_isr.zk_version``
        (docs/controller-behaviour.md §7.4). Fenced.

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
