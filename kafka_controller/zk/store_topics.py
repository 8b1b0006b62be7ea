"""Topics: assignments and topic ids, creation (admin), fenced assignment writes, recursive
deletion, topic configs and config-change notifications
(docs/controller-behaviour.md §7.1, §7.3, §8.3, §8.9, §8.10)."""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence

from kafka_controller.domain.errors import (
    InvalidArgumentError,
    MetadataStoreError,
    NodeExistsError,
    StoreUnavailableError,
)
from kafka_controller.domain.values import ReplicaAssignment, TopicPartition
from kafka_controller.ports import TopicIdReplicaAssignment, WatchHandler
from kafka_controller.zk import paths as P
from kafka_controller.zk.admin_codecs import (
    decode_config_change_notification,
    decode_entity_config,
    encode_config_change_notification,
    encode_entity_config,
)
from kafka_controller.zk.backend import (
    CREATE,
    NODEEXISTS,
    NONODE,
    OK,
    PERSISTENT,
    PERSISTENT_SEQUENTIAL,
    SET_DATA,
    DataRead,
    error_for_code,
)
from kafka_controller.zk.codecs import decode_topic, encode_topic, is_topic_id, validate_replicas
from kafka_controller.zk.store_base import StoreCore
from kafka_controller.zk.watches import NODE

Assignment = Mapping[int, ReplicaAssignment] | Mapping[TopicPartition, ReplicaAssignment]


class TopicZNodes:
    """``/brokers/topics`` and ``/config/*``. It receives the shared ``StoreCore`` and keeps
    nothing else."""

    def __init__(self, core: StoreCore) -> None:
        self._core = core

    def get_all_topics(self) -> set[str]:
        """Children of ``/brokers/topics`` (Kafka's ``getAllTopicsInCluster``)."""
        return set(self._core.children(P.BROKER_TOPICS_PATH))

    def topic_exists(self, topic: str) -> bool:
        return self._core.backend.exists(P.topic_path(topic)) is not None

    def get_replica_assignment_and_topic_ids(
        self, topics: Collection[str], *, watch_handler: WatchHandler | None = None
    ) -> dict[str, TopicIdReplicaAssignment | MetadataStoreError]:
        """Batched read of topic znodes (versions 1-3). Missing topics are left out; a corrupt one
        maps to its ``ZNodeDecodeError``. With ``watch_handler``, a data watch is armed on every
        topic read (Kafka's partition-modification handlers) in the same batched request."""
        return dict(self.decoded_topics(topics, watch_handler))

    def decoded_topics(
        self, topics: Collection[str], watch_handler: WatchHandler | None
    ) -> Iterator[tuple[str, TopicIdReplicaAssignment | MetadataStoreError]]:
        """``get_replica_assignment_and_topic_ids``' items: the znodes are read (and the watches
        armed) at once, each topic decoded only as it is taken, so a caller can act on the first
        topics while the rest are still to be decoded."""
        names = list(dict.fromkeys(topics))
        paths = [P.topic_path(t) for t in names]
        w = self._core.watches
        if watch_handler is not None:
            for path in paths:
                w.set_handler(path, NODE, watch_handler)
        try:
            reads = self._core.backend.get_data_many(paths, w.node_dispatch if watch_handler else None)
        except StoreUnavailableError:
            if watch_handler is not None:
                w.arm_failed(paths, NODE)
            raise
        if watch_handler is not None:
            for path, (code, _, stat) in zip(paths, reads, strict=True):
                w.remember(path, stat if code == OK else None)
        return _decode_topics(names, paths, reads)

    def create_topic(
        self,
        topic: str,
        assignment: Assignment,
        config: Mapping[str, str] | None = None,
        topic_id: str | None = None,
    ) -> None:
        """Admin topic creation (Kafka's ``createTopicWithAssignment``), not fenced.

        Validates everything first (name, contiguous partitions from 0, replica lists of equal
        non-zero size without negatives or duplicates, string configs). Then one atomic multi writes
        the config and the topic znode, so a failure writes nothing. ``NodeExistsError`` on the topic
        path when it exists or is marked for deletion (the admin layer's TOPIC_ALREADY_EXISTS)."""
        P.validate_topic_name(topic)
        normalized = _validate_assignment(topic, assignment)
        if topic_id is not None and not is_topic_id(topic_id):
            raise InvalidArgumentError(f"topic id {topic_id!r} is not a Kafka Uuid")
        config_data = encode_entity_config(dict(config or {}))
        topic_path = P.topic_path(topic)
        for other in self.get_all_topics():
            if other != topic and other.replace(".", "_") == topic.replace(".", "_"):
                raise InvalidArgumentError(f"topic {topic!r} collides with existing topic {other!r}")
        config_path = P.topic_config_path(topic)
        config_read, deletion_read = self._core.read_many([config_path, P.delete_topic_path(topic)])
        if deletion_read[0] == OK:
            raise NodeExistsError(topic_path)
        config_op = (
            (SET_DATA, config_path, config_data, -1)
            if config_read[0] == OK
            else (CREATE, config_path, config_data, PERSISTENT)
        )
        self._core.ensure_paths([P.BROKER_TOPICS_PATH, P.config_entity_type_path(P.CONFIG_TYPE_TOPIC)])
        topic_op = (CREATE, topic_path, encode_topic(normalized, topic_id), PERSISTENT)
        outcome = self._core.backend.multi([[config_op, topic_op]])[0]
        if not outcome.ok and outcome.failed_index == 0 and outcome.error_code == NODEEXISTS:
            # a config znode appeared since we looked: overwrite it instead, still atomically
            outcome = self._core.backend.multi([[(SET_DATA, config_path, config_data, -1), topic_op]])[0]
        if not outcome.ok:
            raise error_for_code(outcome.error_code, (config_path, topic_path)[outcome.failed_index])

    def set_topic_assignment(
        self,
        topic: str,
        topic_id: str | None,
        assignment: Assignment,
        expected_controller_epoch_zk_version: int,
    ) -> None:
        """Overwrite the topic znode (any version), fenced. ``NoNodeError`` if the topic is gone."""
        data = encode_topic(assignment, topic_id)
        self._core.run_one((SET_DATA, P.topic_path(topic), data, -1), expected_controller_epoch_zk_version)

    def set_topic_ids(
        self, assignments: Sequence[TopicIdReplicaAssignment], expected_controller_epoch_zk_version: int
    ) -> dict[str, MetadataStoreError | None]:
        """Write each topic znode with its id (Kafka's ``setTopicIds``), fenced and batched;
        per topic ``None`` = written."""
        ops = [
            (SET_DATA, P.topic_path(a.topic), encode_topic(a.assignment, a.topic_id), -1) for a in assignments
        ]
        result = self._core.run(ops, expected_controller_epoch_zk_version)
        return {a.topic: result.error(i, ops[i][1]) for i, a in enumerate(assignments)}

    def delete_topic_recursively(self, topic: str, expected_controller_epoch_zk_version: int) -> None:
        """Delete ``/brokers/topics/<t>`` and everything under it, fenced (Kafka's
        ``deleteTopicZNode``)."""
        self.delete_recursively([P.topic_path(topic)], expected_controller_epoch_zk_version)

    def delete_recursively(self, roots: Sequence[str], expected_controller_epoch_zk_version: int) -> None:
        """Delete each root and its subtree, fenced and batched: the tree is listed one level per
        batched read, then deleted deepest level first (a missing znode counts as deleted)."""
        levels: list[list[str]] = []
        frontier = list(dict.fromkeys(roots))
        while frontier:
            levels.append(frontier)
            reads = self._core.backend.get_children_many(frontier)
            frontier = [
                f"{parent}/{c}"
                for parent, (code, kids) in zip(frontier, reads, strict=True)
                if kids
                for c in kids
            ]
        for level in reversed(levels):
            self._core.delete_all(level, expected_controller_epoch_zk_version)

    # -- configs -------------------------------------------------------------------------------------

    def get_entity_config(self, entity_type: str, name: str) -> dict[str, str]:
        """``/config/<type>/<name>`` overrides; {} when absent. Corrupt data raises."""
        path = P.config_entity_path(entity_type, name)
        read = self._core.read(path)
        return {} if read is None else decode_entity_config(read[0], path)

    def get_topic_config(self, topic: str) -> dict[str, str]:
        return self.get_entity_config(P.CONFIG_TYPE_TOPIC, topic)

    def get_entity_names(self, entity_type: str) -> list[str]:
        """Kafka's ``getAllEntitiesWithConfig``: the children of ``/config/<type>``, sorted (as
        stored: user names sanitized)."""
        return self._core.children(P.config_entity_type_path(entity_type))

    def get_entity_configs(
        self, entities: Sequence[tuple[str, str]]
    ) -> dict[tuple[str, str], dict[str, str] | MetadataStoreError]:
        """Kafka's ``getEntityConfigs`` over several entity types, one batched read: {} for an
        absent znode, the per-znode error (e.g. ``ZNodeDecodeError``) for a failed one."""
        keys = list(dict.fromkeys(entities))
        reads = self._core.decode_many(
            [P.config_entity_path(t, n) for t, n in keys],
            lambda data, _stat, path: decode_entity_config(data, path),
        )
        return {key: {} if read is None else read for key, read in zip(keys, reads, strict=True)}

    def set_or_create_entity_config(self, entity_type: str, name: str, config: Mapping[str, str]) -> None:
        """Set-or-create ``/config/<type>/<name>`` (any version), not fenced."""
        path = P.config_entity_path(entity_type, name)
        data = encode_entity_config(dict(config))
        try:
            self._core.backend.set_data(path, data, -1)
        except MetadataStoreError as e:
            if e.code != "NONODE":
                raise
            self._core.ensure_paths([P.config_entity_type_path(entity_type)])
            self._core.backend.create(path, data, PERSISTENT)

    def create_config_change_notification(self, entity_path: str) -> str:
        """Sequential ``/config/changes/config_change_<seq>``; returns the created path."""
        data = encode_config_change_notification(entity_path)
        self._core.ensure_paths([P.CONFIG_CHANGES_PATH])
        return self._core.backend.create(
            f"{P.CONFIG_CHANGES_PATH}/{P.CONFIG_CHANGE_PREFIX}", data, PERSISTENT_SEQUENTIAL
        )[0]

    def get_config_change_entity_paths(
        self, notifications: Sequence[str]
    ) -> list[str | MetadataStoreError | None]:
        """Entity paths (``topics/<t>``) of ``/config/changes/<name>`` notifications, one batched
        read; None for a notification already purged, the decode error for a corrupt one."""
        paths = [f"{P.CONFIG_CHANGES_PATH}/{n}" for n in notifications]
        return self._core.decode_many(
            paths, lambda data, _stat, path: decode_config_change_notification(data, path)
        )

    def change_topic_config(self, topic: str, config: Mapping[str, str]) -> None:
        """Kafka's ``AdminZkClient.changeTopicConfig``: write the overrides, then notify brokers."""
        P.validate_topic_name(topic)
        self.set_or_create_entity_config(P.CONFIG_TYPE_TOPIC, topic, config)
        self.create_config_change_notification(f"{P.CONFIG_TYPE_TOPIC}/{topic}")

    def delete_topic_configs(
        self, topics: Collection[str], expected_controller_epoch_zk_version: int
    ) -> None:
        """Delete ``/config/topics/<t>`` for each topic, fenced and batched; missing is fine."""
        self._core.delete_all([P.topic_config_path(t) for t in topics], expected_controller_epoch_zk_version)


def _validate_assignment(topic: str, assignment: Assignment) -> dict[int, ReplicaAssignment]:
    """Kafka's ``validateReplicaAssignment``; returns ``{partition: assignment}``."""
    if not assignment:
        raise InvalidArgumentError(f"topic {topic!r}: the replica assignment is empty")
    out: dict[int, ReplicaAssignment] = {}
    for key, ra in assignment.items():
        p = key if isinstance(key, int) else key[1]
        if not isinstance(key, int) and key[0] != topic:
            raise InvalidArgumentError(f"topic {topic!r}: assignment names another topic's partition {key}")
        if not isinstance(ra, ReplicaAssignment):
            ra = ReplicaAssignment.of(ra)
        replicas = validate_replicas(ra.replicas, f"topic {topic!r} partition {p}")
        if not replicas:
            raise InvalidArgumentError(f"topic {topic!r} partition {p}: the replica list is empty")
        out[p] = ra
    if sorted(out) != list(range(len(out))):
        raise InvalidArgumentError(
            f"topic {topic!r}: partitions must be 0..{len(out) - 1}, got {sorted(out)}"
        )
    sizes = {len(ra.replicas) for ra in out.values()}
    if len(sizes) > 1:
        raise InvalidArgumentError(
            f"topic {topic!r}: partitions have different replication factors {sorted(sizes)}"
        )
    return out


def _decode_topics(
    names: Sequence[str], paths: Sequence[str], reads: Sequence[DataRead]
) -> Iterator[tuple[str, TopicIdReplicaAssignment | MetadataStoreError]]:
    """Missing topics left out, a failed read or an undecodable znode as its error."""
    for topic, path, (code, data, stat) in zip(names, paths, reads, strict=True):
        if code == NONODE:
            continue
        if code != OK or stat is None:
            yield topic, error_for_code(code, path)
            continue
        try:
            topic_id, assignment = decode_topic(topic, data, path)
        except MetadataStoreError as e:
            yield topic, e
            continue
        yield topic, TopicIdReplicaAssignment(topic, topic_id, assignment, stat.version)
