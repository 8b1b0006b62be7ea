"""``ZkMetadataStore``: the metadata-store port over any ``ZkBackend`` (docs/controller-behaviour.md §7).

Kafka's ``KafkaZkClient`` is one class of some 150 methods over one ``ZooKeeperClient``. Here the
same methods, under the same names, are answered by five objects built in the constructor, each
receiving what it uses:

* ``StoreCore`` (``store_base``): the backend, the batcher, the watch registry, session listeners
  and the read/write helpers every concern shares;
* ``ClusterZNodes`` (``store_cluster``): controller election and epoch, broker registrations,
  cluster id, ``/feature``, the top-level paths;
* ``TopicZNodes`` (``store_topics``): topic znodes, topic ids, entity configs and their change
  notifications;
* ``PartitionStateZNodes`` (``store_partitions``): the partition states, the hot path of a
  failover; it also receives the ``TopicZNodes`` whose assignment reads it overlaps;
* ``AdminZNodes`` (``store_admin``): reassignment, preferred election, topic deletions, ISR-change
  and log-dir event notifications.

This class only forwards, so a reader looks a method up in the one collaborator its section names.
The kazoo store (``kazoo_backend.KazooMetadataStore``) and the in-memory fake
(``kafka_controller.dryrun.memory_store.InMemoryMetadataStore``) are this class over their backends, so the
contract suite tests one piece of logic twice.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence

from kafka_controller.domain.errors import MetadataStoreError
from kafka_controller.domain.values import (
    Broker,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    TopicPartition,
)
from kafka_controller.ports import (
    Clock,
    FeatureZNode,
    PartitionStateRead,
    SessionListener,
    TopicIdReplicaAssignment,
    UpdateLeaderAndIsrResult,
    WatchHandler,
)
from kafka_controller.zk import paths as P
from kafka_controller.zk.backend import DataRead, ZkBackend
from kafka_controller.zk.batching import DEFAULT_MAX_BATCH_BYTES, DEFAULT_MAX_BATCH_OPS, Batcher
from kafka_controller.zk.store_admin import AdminZNodes
from kafka_controller.zk.store_base import StoreCore
from kafka_controller.zk.store_cluster import ClusterZNodes
from kafka_controller.zk.store_partitions import PartitionStateZNodes
from kafka_controller.zk.store_topics import Assignment, TopicZNodes


class ZkMetadataStore:
    """Kafka 2.8's ``KafkaZkClient`` for the controller and admin tools, over a ``ZkBackend``.

    Error contract (every method): ``ControllerMovedError`` = fenced, resign;
    ``StoreUnavailableError`` = not connected, nothing was attempted or the call was cut short;
    any other ``MetadataStoreError`` is about the znode it names.
    """

    def __init__(
        self,
        backend: ZkBackend,
        *,
        clock: Clock | None = None,
        max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
        max_batch_ops: int = DEFAULT_MAX_BATCH_OPS,
    ) -> None:
        core = StoreCore(backend, clock=clock, max_batch_bytes=max_batch_bytes, max_batch_ops=max_batch_ops)
        self._core = core
        self._backend = backend
        self._watches = core.watches
        self._cluster = ClusterZNodes(core)
        self._topics = TopicZNodes(core)
        self._partitions = PartitionStateZNodes(core, self._topics)
        self._admin = AdminZNodes(core)

    @property
    def batcher(self) -> Batcher:
        """The batcher every fenced write goes through (its counters show how many multis went out)."""
        return self._core.batcher

    # -- session, batching and raw reads (``StoreCore``) -------------------------------------------

    def add_session_listener(self, listener: SessionListener) -> None:
        self._core.add_session_listener(listener)

    def remove_session_listener(self, listener: SessionListener) -> None:
        self._core.remove_session_listener(listener)

    @property
    def session_id(self) -> int:
        return self._core.session_id

    @property
    def connected(self) -> bool:
        return self._core.connected

    def close(self) -> None:
        self._core.close()

    def path_exists(self, path: str) -> bool:
        return self._core.path_exists(path)

    def read_raw(self, paths: Sequence[str]) -> list[DataRead]:
        return self._core.read_raw(paths)

    def watch_children(self, path: str, handler: WatchHandler) -> list[str]:
        return self._core.watch_children(path, handler)

    def watch_node(self, path: str, handler: WatchHandler) -> bool:
        return self._core.watch_node(path, handler)

    def unwatch(self, path: str) -> None:
        self._core.unwatch(path)

    # -- controller, brokers, cluster id, ``/feature`` (``ClusterZNodes``) -------------------------

    def get_controller_id(self) -> int | None:
        return self._cluster.get_controller_id()

    def get_controller_epoch(self) -> tuple[int, int] | None:
        return self._cluster.get_controller_epoch()

    def register_controller_and_increment_controller_epoch(self, broker_id: int) -> tuple[int, int]:
        return self._cluster.register_controller_and_increment_controller_epoch(broker_id)

    def delete_controller(self, expected_controller_epoch_zk_version: int) -> None:
        self._cluster.delete_controller(expected_controller_epoch_zk_version)

    def register_broker(self, broker: Broker, *, jmx_port: int = -1) -> int:
        return self._cluster.register_broker(broker, jmx_port=jmx_port)

    def update_broker_info(self, broker: Broker, *, jmx_port: int = -1) -> None:
        self._cluster.update_broker_info(broker, jmx_port=jmx_port)

    def get_sorted_broker_list(self) -> list[int]:
        return self._cluster.get_sorted_broker_list()

    def get_broker(self, broker_id: int) -> Broker | None:
        return self._cluster.get_broker(broker_id)

    def get_all_brokers_and_epochs(self) -> dict[Broker, int]:
        return self._cluster.get_all_brokers_and_epochs()

    def generate_broker_sequence_id(self) -> int:
        return self._cluster.generate_broker_sequence_id()

    def get_cluster_id(self) -> str | None:
        return self._cluster.get_cluster_id()

    def create_or_get_cluster_id(self, proposed_cluster_id: str) -> str:
        return self._cluster.create_or_get_cluster_id(proposed_cluster_id)

    def get_feature_znode(self) -> tuple[FeatureZNode, int] | None:
        return self._cluster.get_feature_znode()

    def create_feature_znode(self, feature: FeatureZNode) -> None:
        self._cluster.create_feature_znode(feature)

    def update_feature_znode(self, feature: FeatureZNode) -> int:
        return self._cluster.update_feature_znode(feature)

    def create_top_level_paths(self) -> None:
        self._cluster.create_top_level_paths()

    # -- topics and configs (``TopicZNodes``) ------------------------------------------------------

    def get_all_topics(self) -> set[str]:
        return self._topics.get_all_topics()

    def topic_exists(self, topic: str) -> bool:
        return self._topics.topic_exists(topic)

    def get_replica_assignment_and_topic_ids(
        self, topics: Collection[str], *, watch_handler: WatchHandler | None = None
    ) -> dict[str, TopicIdReplicaAssignment | MetadataStoreError]:
        return self._topics.get_replica_assignment_and_topic_ids(topics, watch_handler=watch_handler)

    def create_topic(
        self,
        topic: str,
        assignment: Assignment,
        config: Mapping[str, str] | None = None,
        topic_id: str | None = None,
    ) -> None:
        self._topics.create_topic(topic, assignment, config, topic_id)

    def set_topic_assignment(
        self,
        topic: str,
        topic_id: str | None,
        assignment: Assignment,
        expected_controller_epoch_zk_version: int,
    ) -> None:
        self._topics.set_topic_assignment(topic, topic_id, assignment, expected_controller_epoch_zk_version)

    def set_topic_ids(
        self, assignments: Sequence[TopicIdReplicaAssignment], expected_controller_epoch_zk_version: int
    ) -> dict[str, MetadataStoreError | None]:
        return self._topics.set_topic_ids(assignments, expected_controller_epoch_zk_version)

    def delete_topic_recursively(self, topic: str, expected_controller_epoch_zk_version: int) -> None:
        self._topics.delete_topic_recursively(topic, expected_controller_epoch_zk_version)

    def delete_recursively(self, roots: Sequence[str], expected_controller_epoch_zk_version: int) -> None:
        self._topics.delete_recursively(roots, expected_controller_epoch_zk_version)

    def get_entity_config(self, entity_type: str, name: str) -> dict[str, str]:
        return self._topics.get_entity_config(entity_type, name)

    def get_topic_config(self, topic: str) -> dict[str, str]:
        return self._topics.get_topic_config(topic)

    def get_entity_names(self, entity_type: str) -> list[str]:
        return self._topics.get_entity_names(entity_type)

    def get_entity_configs(
        self, entities: Sequence[tuple[str, str]]
    ) -> dict[tuple[str, str], dict[str, str] | MetadataStoreError]:
        return self._topics.get_entity_configs(entities)

    def set_or_create_entity_config(self, entity_type: str, name: str, config: Mapping[str, str]) -> None:
        self._topics.set_or_create_entity_config(entity_type, name, config)

    def create_config_change_notification(self, entity_path: str) -> str:
        return self._topics.create_config_change_notification(entity_path)

    def get_config_change_entity_paths(
        self, notifications: Sequence[str]
    ) -> list[str | MetadataStoreError | None]:
        return self._topics.get_config_change_entity_paths(notifications)

    def change_topic_config(self, topic: str, config: Mapping[str, str]) -> None:
        self._topics.change_topic_config(topic, config)

    def delete_topic_configs(
        self, topics: Collection[str], expected_controller_epoch_zk_version: int
    ) -> None:
        self._topics.delete_topic_configs(topics, expected_controller_epoch_zk_version)

    # -- partition states (``PartitionStateZNodes``) -----------------------------------------------

    def get_partition_states(
        self, partitions: Sequence[TopicPartition]
    ) -> dict[TopicPartition, PartitionStateRead]:
        return self._partitions.get_partition_states(partitions)

    def get_replica_assignments_and_partition_states(
        self, topics: Collection[str], *, watch_handler: WatchHandler | None = None
    ) -> tuple[
        dict[str, TopicIdReplicaAssignment | MetadataStoreError], dict[TopicPartition, PartitionStateRead]
    ]:
        return self._partitions.get_replica_assignments_and_partition_states(
            topics, watch_handler=watch_handler
        )

    def create_partition_states(
        self,
        states: Mapping[TopicPartition, LeaderIsrAndControllerEpoch],
        expected_controller_epoch_zk_version: int,
    ) -> dict[TopicPartition, MetadataStoreError | None]:
        return self._partitions.create_partition_states(states, expected_controller_epoch_zk_version)

    def update_leader_and_isr(
        self,
        leader_and_isrs: Mapping[TopicPartition, LeaderAndIsr],
        controller_epoch: int,
        expected_controller_epoch_zk_version: int,
    ) -> UpdateLeaderAndIsrResult:
        return self._partitions.update_leader_and_isr(
            leader_and_isrs, controller_epoch, expected_controller_epoch_zk_version
        )

    def get_log_configs(
        self, topics: Collection[str], broker_defaults: Mapping[str, str]
    ) -> tuple[dict[str, dict[str, str]], dict[str, MetadataStoreError]]:
        return self._partitions.get_log_configs(topics, broker_defaults)

    # -- admin znodes and notifications (``AdminZNodes``) ------------------------------------------

    def get_partition_reassignment(self) -> dict[TopicPartition, tuple[int, ...]]:
        return self._admin.get_partition_reassignment()

    def reassign_partitions_in_progress(self) -> bool:
        return self._admin.reassign_partitions_in_progress()

    def create_partition_reassignment(self, reassignment: Mapping[TopicPartition, Iterable[int]]) -> None:
        self._admin.create_partition_reassignment(reassignment)

    def set_or_create_partition_reassignment(
        self, reassignment: Mapping[TopicPartition, Iterable[int]], expected_controller_epoch_zk_version: int
    ) -> None:
        self._admin.set_or_create_partition_reassignment(reassignment, expected_controller_epoch_zk_version)

    def delete_partition_reassignment(self, expected_controller_epoch_zk_version: int) -> None:
        self._admin.delete_partition_reassignment(expected_controller_epoch_zk_version)

    def create_preferred_replica_election(self, partitions: Iterable[TopicPartition]) -> None:
        self._admin.create_preferred_replica_election(partitions)

    def get_preferred_replica_election(self) -> set[TopicPartition]:
        return self._admin.get_preferred_replica_election()

    def delete_preferred_replica_election(self, expected_controller_epoch_zk_version: int) -> None:
        self._admin.delete_preferred_replica_election(expected_controller_epoch_zk_version)

    def create_delete_topic_path(self, topic: str) -> None:
        self._admin.create_delete_topic_path(topic)

    def get_topic_deletions(self) -> list[str]:
        return self._admin.get_topic_deletions()

    def is_topic_marked_for_deletion(self, topic: str) -> bool:
        return self._admin.is_topic_marked_for_deletion(topic)

    def delete_topic_deletions(
        self, topics: Collection[str], expected_controller_epoch_zk_version: int
    ) -> None:
        self._admin.delete_topic_deletions(topics, expected_controller_epoch_zk_version)

    def propagate_isr_changes(self, partitions: Iterable[TopicPartition]) -> str:
        return self._admin.propagate_isr_changes(partitions)

    def get_all_isr_change_notifications(self) -> list[str]:
        return self._admin.get_all_isr_change_notifications()

    def get_partitions_from_isr_change_notifications(
        self, sequence_numbers: Iterable[str]
    ) -> list[TopicPartition]:
        return self._admin.get_partitions_from_isr_change_notifications(sequence_numbers)

    def delete_isr_change_notifications(
        self, sequence_numbers: Collection[str] | None, expected_controller_epoch_zk_version: int
    ) -> None:
        self._admin.delete_isr_change_notifications(sequence_numbers, expected_controller_epoch_zk_version)

    def propagate_log_dir_event(self, broker_id: int) -> str:
        return self._admin.propagate_log_dir_event(broker_id)

    def get_all_log_dir_event_notifications(self) -> list[str]:
        return self._admin.get_all_log_dir_event_notifications()

    def get_broker_ids_from_log_dir_events(self, sequence_numbers: Iterable[str]) -> list[int]:
        return self._admin.get_broker_ids_from_log_dir_events(sequence_numbers)

    def delete_log_dir_event_notifications(
        self, sequence_numbers: Collection[str] | None, expected_controller_epoch_zk_version: int
    ) -> None:
        self._admin.delete_log_dir_event_notifications(sequence_numbers, expected_controller_epoch_zk_version)

    # -- watches on Kafka's paths (the handlers' znodes) -------------------------------------------

    def watch_broker_ids(self, handler: WatchHandler) -> list[int]:
        return sorted(int(c) for c in self._core.watch_children(P.BROKER_IDS_PATH, handler) if c.isdigit())

    def watch_topics(self, handler: WatchHandler) -> set[str]:
        return set(self._core.watch_children(P.BROKER_TOPICS_PATH, handler))

    def watch_topic_deletions(self, handler: WatchHandler) -> list[str]:
        return self._core.watch_children(P.DELETE_TOPICS_PATH, handler)

    def watch_isr_change_notifications(self, handler: WatchHandler) -> list[str]:
        children = self._core.watch_children(P.ISR_CHANGE_NOTIFICATION_PATH, handler)
        return [P.sequence_number(c, P.ISR_CHANGE_NOTIFICATION_PREFIX) for c in children]

    def watch_log_dir_event_notifications(self, handler: WatchHandler) -> list[str]:
        children = self._core.watch_children(P.LOG_DIR_EVENT_NOTIFICATION_PATH, handler)
        return [P.sequence_number(c, P.LOG_DIR_EVENT_NOTIFICATION_PREFIX) for c in children]

    def watch_controller(self, handler: WatchHandler) -> bool:
        return self._core.watch_node(P.CONTROLLER_PATH, handler)

    def watch_partition_reassignment(self, handler: WatchHandler) -> bool:
        return self._core.watch_node(P.REASSIGN_PARTITIONS_PATH, handler)

    def watch_preferred_replica_election(self, handler: WatchHandler) -> bool:
        return self._core.watch_node(P.PREFERRED_REPLICA_ELECTION_PATH, handler)

    def watch_topic(self, topic: str, handler: WatchHandler) -> bool:
        return self._core.watch_node(P.topic_path(topic), handler)

    def watch_broker(self, broker_id: int, handler: WatchHandler) -> bool:
        return self._core.watch_node(P.broker_id_path(broker_id), handler)
