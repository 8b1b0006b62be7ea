"""What the topic-deletion manager needs from the controller (Kafka's ``DeletionClient``)."""

from __future__ import annotations

from collections.abc import Collection
from typing import Protocol

from kafka_controller.domain.values import (
    TopicPartition,
)

__all__ = ["DeletionClient"]


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
