"""The full metadata store: all of Kafka's ``KafkaZkClient`` that the 2.8 controller and the admin
tools use (docs/controller-behaviour.md §7, §8), with its result and event types."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Protocol, runtime_checkable

from kafka_controller.domain.errors import MetadataStoreError
from kafka_controller.domain.values import (
    Broker,
    ReplicaAssignment,
    TopicPartition,
)
from kafka_controller.ports.partition_state import PartitionStateRead, PartitionStateStore

__all__ = [
    "FeatureZNode",
    "MetadataStore",
    "SessionEvent",
    "SessionListener",
    "TopicIdReplicaAssignment",
    "WatchHandler",
    "ZNodeEvent",
    "ZNodeEventType",
]

# -- The full metadata store: result and event types ----------------------------------------------
#
# Everything below extends ``PartitionStateStore`` with what Kafka's ``KafkaZkClient`` offers the
# 2.8 controller and the admin tools (docs/controller-behaviour.md §7, §8). The implementations live in
# ``kafka_controller.zk`` (real ZooKeeper through kazoo) and ``kafka_controller.dryrun``
# (the in-memory fake); one contract suite holds both to this page.


class SessionEvent(Enum):
    """What a session-state listener is told. Listeners only enqueue (docs/rules.md, callbacks only enqueue).

    * ``CONNECTED``: (re)connected. After ``SUSPENDED`` it is the same session (ephemerals kept);
      after ``EXPIRED`` it is a **new** session: re-register ephemerals and watches (Kafka's
      ``afterInitializingSession``).
    * ``SUSPENDED``: disconnected; the session may still be alive. Writes fail fast with
      ``StoreUnavailableError`` until ``CONNECTED``.
    * ``EXPIRED``: the session expired: its ephemerals and watches are gone (Kafka's
      ``beforeInitializingSession``). A new session follows on its own.
    * ``LOST``: closed or authentication failed; no new session follows.
    """

    CONNECTED = "connected"
    SUSPENDED = "suspended"
    EXPIRED = "expired"
    LOST = "lost"


class ZNodeEventType(Enum):
    CREATED = "created"
    DELETED = "deleted"
    DATA_CHANGED = "data_changed"
    CHILDREN_CHANGED = "children_changed"


@dataclass(frozen=True, slots=True)
class ZNodeEvent:
    """A fired watch: ``path`` is relative to the store's chroot."""

    type: ZNodeEventType
    path: str


#: A watch handler. Runs on a store thread and must only enqueue (docs/rules.md, callbacks only enqueue).
WatchHandler = Callable[[ZNodeEvent], None]
SessionListener = Callable[[SessionEvent], None]


@dataclass(frozen=True, slots=True)
class TopicIdReplicaAssignment:
    """Kafka's ``TopicIdReplicaAssignment``: a topic znode decoded (versions 1-3).

    ``topic_id`` is None when the znode has none (written before 2.8); ``zk_version`` is the topic
    znode's data version.
    """

    topic: str
    topic_id: str | None
    assignment: Mapping[TopicPartition, ReplicaAssignment]
    zk_version: int = 0


@dataclass(frozen=True, slots=True)
class FeatureZNode:
    """``/feature`` (KIP-584): ``status`` 1 = enabled, 0 = disabled; finalized
    ``{feature: (min_version_level, max_version_level)}``."""

    status: int = 1
    features: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    version: int = 1

    @property
    def enabled(self) -> bool:
        return self.status == 1


@runtime_checkable
class MetadataStore(PartitionStateStore, Protocol):
    """All of Kafka's ``KafkaZkClient`` that the 2.8 controller and the admin tools use
    (docs/controller-behaviour.md §7, §8).

    Error contract, every method: ``ControllerMovedError`` = fenced, resign (only fenced methods
    raise it); ``StoreUnavailableError`` = not connected (raised at once, never a hang), or the
    session was lost mid-call; ``NoNodeError``/``NodeExistsError``/``BadVersionError``/
    ``ZNodeDecodeError`` are about the znode they name; ``InvalidArgumentError`` = bad input, and
    nothing was written. "Fenced" means the write happens only while ``/controller_epoch`` still
    has ``expected_controller_epoch_zk_version`` (``MATCH_ANY_VERSION`` = -1 disables the check).
    """

    # -- controller (docs/controller-behaviour.md §7.2) ------------------------------------------------
    def register_controller_and_increment_controller_epoch(self, broker_id: int) -> tuple[int, int]:
        """Create ephemeral ``/controller`` and bump ``/controller_epoch`` in one multi (not fenced).
        Returns ``(epoch, epoch_zk_version)``; ``ControllerMovedError`` if another broker won."""
        ...

    def get_controller_id(self) -> int | None:
        """Broker id in ``/controller``, or None."""
        ...

    def get_controller_epoch(self) -> tuple[int, int] | None:
        """``(epoch, epoch_zk_version)``, or None when ``/controller_epoch`` is absent."""
        ...

    def delete_controller(self, expected_controller_epoch_zk_version: int) -> None:
        """Delete ``/controller`` (forces re-election). Fenced; missing is fine."""
        ...

    # -- brokers -------------------------------------------------------------------------------
    def register_broker(self, broker: Broker, *, jmx_port: int = -1) -> int:
        """Create-if-absent ephemeral ``/brokers/ids/<id>`` (v5 JSON); returns the broker epoch
        (czxid). ``NodeExistsError`` if another session holds it. Not fenced."""
        ...

    def update_broker_info(self, broker: Broker, *, jmx_port: int = -1) -> None:
        """Overwrite this broker's registration (any version). Not fenced."""
        ...

    def get_broker(self, broker_id: int) -> Broker | None: ...

    def get_sorted_broker_list(self) -> list[int]: ...

    def get_all_brokers_and_epochs(self) -> dict[Broker, int]:
        """Every registered broker with its epoch (czxid); undecodable registrations left out."""
        ...

    def generate_broker_sequence_id(self) -> int:
        """Bump ``/brokers/seqid``; returns its new data version (1, 2, ...). Not fenced."""
        ...

    # -- topics --------------------------------------------------------------------------------
    def get_all_topics(self) -> set[str]: ...

    def topic_exists(self, topic: str) -> bool: ...

    def get_replica_assignment_and_topic_ids(
        self, topics: Collection[str], *, watch_handler: WatchHandler | None = None
    ) -> dict[str, TopicIdReplicaAssignment | MetadataStoreError]:
        """Batched read of topic znodes (v1-3); missing topics left out, corrupt ones map to their
        error. ``watch_handler`` arms a data watch on each topic znode in the same request."""
        ...

    def get_replica_assignments_and_partition_states(
        self, topics: Collection[str], *, watch_handler: WatchHandler | None = None
    ) -> tuple[
        dict[str, TopicIdReplicaAssignment | MetadataStoreError], dict[TopicPartition, PartitionStateRead]
    ]:
        """``get_replica_assignment_and_topic_ids``, and ``get_partition_states`` of the partitions
        of every topic it decoded; the store may read the states while it decodes later topics."""
        ...

    def create_topic(
        self,
        topic: str,
        assignment: Mapping[int, ReplicaAssignment] | Mapping[TopicPartition, ReplicaAssignment],
        config: Mapping[str, str] | None = None,
        topic_id: str | None = None,
    ) -> None:
        """Admin create (not fenced): config and topic znode in one atomic multi.
        ``NodeExistsError`` (topic path) when it exists or is marked for deletion."""
        ...

    def set_topic_assignment(
        self,
        topic: str,
        topic_id: str | None,
        assignment: Mapping[int, ReplicaAssignment] | Mapping[TopicPartition, ReplicaAssignment],
        expected_controller_epoch_zk_version: int,
    ) -> None:
        """Overwrite the topic znode (v3). Fenced; ``NoNodeError`` if the topic is gone."""
        ...

    def set_topic_ids(
        self, assignments: Sequence[TopicIdReplicaAssignment], expected_controller_epoch_zk_version: int
    ) -> dict[str, MetadataStoreError | None]:
        """Write topic ids into topic znodes, batched. Fenced; per topic None = written."""
        ...

    def delete_topic_recursively(self, topic: str, expected_controller_epoch_zk_version: int) -> None:
        """Delete ``/brokers/topics/<t>`` and its subtree, batched. Fenced; missing is fine."""
        ...

    def get_topic_config(self, topic: str) -> dict[str, str]:
        """``/config/topics/<t>`` overrides; {} when absent."""
        ...

    def change_topic_config(self, topic: str, config: Mapping[str, str]) -> None:
        """Set-or-create the overrides, then a config-change notification (admin, not fenced)."""
        ...

    def get_entity_configs(
        self, entities: Sequence[tuple[str, str]]
    ) -> dict[tuple[str, str], dict[str, str] | MetadataStoreError]:
        """``/config/<type>/<name>`` of each ``(type, name)`` (``("brokers", "<default>")``), one
        batched read: {} when absent, the per-znode error (``ZNodeDecodeError`` when corrupt)
        otherwise. ``StoreUnavailableError`` if the read could not be made. Not fenced."""
        ...

    def set_or_create_entity_config(self, entity_type: str, name: str, config: Mapping[str, str]) -> None:
        """Replace ``/config/<type>/<name>`` (creating it); notify separately. Not fenced."""
        ...

    def create_config_change_notification(self, entity_path: str) -> str:
        """Sequential ``/config/changes/config_change_<seq>``; returns its path. Not fenced."""
        ...

    def get_config_change_entity_paths(
        self, notifications: Sequence[str]
    ) -> list[str | MetadataStoreError | None]:
        """Entity paths (``topics/<t>``) of the named ``/config/changes`` children, one batched read:
        None when already purged, a ``ZNodeDecodeError`` when corrupt. Best effort, not fenced."""
        ...

    def delete_topic_configs(
        self, topics: Collection[str], expected_controller_epoch_zk_version: int
    ) -> None:
        """Fenced, batched; missing is fine."""
        ...

    # -- admin znodes ---------------------------------------------------------------------------
    def get_partition_reassignment(self) -> dict[TopicPartition, tuple[int, ...]]:
        """Legacy reassignment request ({} when absent); strict decode (``ZNodeDecodeError``)."""
        ...

    def reassign_partitions_in_progress(self) -> bool: ...

    def create_partition_reassignment(self, reassignment: Mapping[TopicPartition, Iterable[int]]) -> None:
        """Admin create (not fenced); ``NodeExistsError`` if one is pending."""
        ...

    def set_or_create_partition_reassignment(
        self, reassignment: Mapping[TopicPartition, Iterable[int]], expected_controller_epoch_zk_version: int
    ) -> None:
        """Fenced set (any version), else fenced create."""
        ...

    def delete_partition_reassignment(self, expected_controller_epoch_zk_version: int) -> None:
        """Fenced; missing is fine."""
        ...

    def create_preferred_replica_election(self, partitions: Iterable[TopicPartition]) -> None:
        """Admin create (not fenced); ``NodeExistsError`` if one is pending."""
        ...

    def get_preferred_replica_election(self) -> set[TopicPartition]: ...

    def delete_preferred_replica_election(self, expected_controller_epoch_zk_version: int) -> None:
        """Fenced; missing is fine."""
        ...

    def create_delete_topic_path(self, topic: str) -> None:
        """Mark for deletion (admin, not fenced), atomically with a check that the topic exists:
        ``NoNodeError`` (topic path) if not, ``NodeExistsError`` if already marked."""
        ...

    def get_topic_deletions(self) -> list[str]: ...

    def is_topic_marked_for_deletion(self, topic: str) -> bool: ...

    def delete_topic_deletions(
        self, topics: Collection[str], expected_controller_epoch_zk_version: int
    ) -> None:
        """Fenced, batched; missing is fine."""
        ...

    # -- notifications ---------------------------------------------------------------------------
    def propagate_isr_changes(self, partitions: Iterable[TopicPartition]) -> str:
        """Sequential ISR-change notification (literal payload); returns its path. Not fenced."""
        ...

    def get_all_isr_change_notifications(self) -> list[str]:
        """Sequence numbers, in order."""
        ...

    def get_partitions_from_isr_change_notifications(
        self, sequence_numbers: Iterable[str]
    ) -> list[TopicPartition]: ...

    def delete_isr_change_notifications(
        self, sequence_numbers: Collection[str] | None, expected_controller_epoch_zk_version: int
    ) -> None:
        """Fenced, batched; None = all; missing is fine."""
        ...

    def propagate_log_dir_event(self, broker_id: int) -> str: ...

    def get_all_log_dir_event_notifications(self) -> list[str]: ...

    def get_broker_ids_from_log_dir_events(self, sequence_numbers: Iterable[str]) -> list[int]: ...

    def delete_log_dir_event_notifications(
        self, sequence_numbers: Collection[str] | None, expected_controller_epoch_zk_version: int
    ) -> None: ...

    # -- cluster-wide ------------------------------------------------------------------------------
    def get_cluster_id(self) -> str | None: ...

    def create_or_get_cluster_id(self, proposed_cluster_id: str) -> str:
        """Create-if-absent ``/cluster/id``; returns the stored id. Not fenced."""
        ...

    def get_feature_znode(self) -> tuple[FeatureZNode, int] | None:
        """``(feature, zk_version)`` or None."""
        ...

    def create_feature_znode(self, feature: FeatureZNode) -> None:
        """Not fenced (as Kafka); ``NodeExistsError`` if present."""
        ...

    def update_feature_znode(self, feature: FeatureZNode) -> int:
        """Overwrite (any version, not fenced); returns the new zk version."""
        ...

    def create_top_level_paths(self) -> None:
        """Create-if-absent Kafka's persistent top-level paths."""
        ...

    # -- watches and session -------------------------------------------------------------------------
    def watch_children(self, path: str, handler: WatchHandler) -> list[str]:
        """Handler for ``path``'s children plus a one-shot child watch; returns the children."""
        ...

    def watch_node(self, path: str, handler: WatchHandler) -> bool:
        """Handler for ``path`` plus a one-shot exists/data watch; returns whether it exists."""
        ...

    def unwatch(self, path: str) -> None:
        """Drop ``path``'s handlers; a watch still armed then fires into nothing."""
        ...

    def watch_broker_ids(self, handler: WatchHandler) -> list[int]: ...

    def watch_topics(self, handler: WatchHandler) -> set[str]: ...

    def watch_topic_deletions(self, handler: WatchHandler) -> list[str]: ...

    def watch_isr_change_notifications(self, handler: WatchHandler) -> list[str]: ...

    def watch_log_dir_event_notifications(self, handler: WatchHandler) -> list[str]: ...

    def watch_controller(self, handler: WatchHandler) -> bool: ...

    def watch_partition_reassignment(self, handler: WatchHandler) -> bool: ...

    def watch_preferred_replica_election(self, handler: WatchHandler) -> bool: ...

    def watch_topic(self, topic: str, handler: WatchHandler) -> bool: ...

    def watch_broker(self, broker_id: int, handler: WatchHandler) -> bool: ...

    def add_session_listener(self, listener: SessionListener) -> None:
        """``listener(SessionEvent)`` on every session transition; it must only enqueue."""
        ...

    def remove_session_listener(self, listener: SessionListener) -> None: ...

    @property
    def session_id(self) -> int: ...

    @property
    def connected(self) -> bool: ...

    def close(self) -> None:
        """End the session (its ephemerals go)."""
        ...
