"""The read that starts a round of partition-state writes (ISR removal, leader election): Kafka's
batched read, or, for the first round of deviation 16, the states the context already caches."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kafka_controller.domain.errors import ControllerMovedError
from kafka_controller.domain.values import LeaderIsrAndControllerEpoch, TopicPartition
from kafka_controller.ports import PartitionStateRead, PartitionStateStore


def read_partition_states(
    store: PartitionStateStore,
    partitions: Sequence[TopicPartition],
    cached: Mapping[TopicPartition, LeaderIsrAndControllerEpoch] | None,
) -> Mapping[TopicPartition, PartitionStateRead] | Exception:
    """``cached`` when given, else one batched read; a failed read is returned (it is final for
    every partition of the round), except ``ControllerMovedError``, which makes the controller resign."""
    if cached is not None:
        return cached
    try:
        return store.get_partition_states(partitions)
    except ControllerMovedError:
        raise
    except Exception as e:
        return e
