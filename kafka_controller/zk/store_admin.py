"""Admin znodes and notifications: reassignment, preferred election, topic deletions, ISR-change
and log-dir event notifications (docs/controller-behaviour.md §7.1, §7.3, §8.8, §8.9, §8.11, §8.12).

Admin-side creates are not fenced (admin tools have no epoch); the controller's deletes and sets
are. Notification children are read in one batched request and deleted in fenced batches.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable, Mapping

from kafka_controller.domain.errors import MetadataStoreError, NoNodeError
from kafka_controller.domain.values import TopicPartition
from kafka_controller.zk import paths as P
from kafka_controller.zk.admin_codecs import (
    decode_isr_change_notification,
    decode_log_dir_event,
    decode_preferred_replica_election,
    decode_reassignment,
    encode_isr_change_notification,
    encode_log_dir_event,
    encode_preferred_replica_election,
    encode_reassignment,
)
from kafka_controller.zk.backend import (
    CHECK,
    CREATE,
    PERSISTENT,
    PERSISTENT_SEQUENTIAL,
    SET_DATA,
    error_for_code,
)
from kafka_controller.zk.store_base import StoreCore

log = logging.getLogger(__name__)


class AdminZNodes:
    """``/admin/*``, ``/isr_change_notification``, ``/log_dir_event_notification``. It receives the
    shared ``StoreCore`` and keeps nothing else."""

    def __init__(self, core: StoreCore) -> None:
        self._core = core

    # -- /admin/reassign_partitions ----------------------------------------------------------------

    def get_partition_reassignment(self) -> dict[TopicPartition, tuple[int, ...]]:
        """The legacy reassignment request; {} when absent. Decoded strictly: corrupt data or
        unknown fields raise ``ZNodeDecodeError`` (the controller logs it and treats it as empty)."""
        read = self._core.read(P.REASSIGN_PARTITIONS_PATH)
        return {} if read is None else decode_reassignment(read[0], P.REASSIGN_PARTITIONS_PATH)

    def reassign_partitions_in_progress(self) -> bool:
        return self._core.backend.exists(P.REASSIGN_PARTITIONS_PATH) is not None

    def create_partition_reassignment(self, reassignment: Mapping[TopicPartition, Iterable[int]]) -> None:
        """Admin (legacy tool) create, not fenced; ``NodeExistsError`` if one is in progress."""
        data = encode_reassignment(reassignment)
        self._core.ensure_paths([P.ADMIN_PATH])
        self._core.backend.create(P.REASSIGN_PARTITIONS_PATH, data, PERSISTENT)

    def set_or_create_partition_reassignment(
        self, reassignment: Mapping[TopicPartition, Iterable[int]], expected_controller_epoch_zk_version: int
    ) -> None:
        """Controller's rewrite of the znode (set any version, else create). Fenced."""
        data = encode_reassignment(reassignment)
        try:
            self._core.run_one(
                (SET_DATA, P.REASSIGN_PARTITIONS_PATH, data, -1), expected_controller_epoch_zk_version
            )
        except NoNodeError:
            self._core.run_one(
                (CREATE, P.REASSIGN_PARTITIONS_PATH, data, PERSISTENT), expected_controller_epoch_zk_version
            )

    def delete_partition_reassignment(self, expected_controller_epoch_zk_version: int) -> None:
        """Fenced delete; missing is fine."""
        self._core.delete_all([P.REASSIGN_PARTITIONS_PATH], expected_controller_epoch_zk_version)

    # -- /admin/preferred_replica_election -----------------------------------------------------------

    def create_preferred_replica_election(self, partitions: Iterable[TopicPartition]) -> None:
        """Admin create, not fenced; ``NodeExistsError`` if an election is already pending."""
        data = encode_preferred_replica_election(partitions)
        self._core.ensure_paths([P.ADMIN_PATH])
        self._core.backend.create(P.PREFERRED_REPLICA_ELECTION_PATH, data, PERSISTENT)

    def get_preferred_replica_election(self) -> set[TopicPartition]:
        """Partitions awaiting a preferred election; empty when absent. Corrupt data raises."""
        read = self._core.read(P.PREFERRED_REPLICA_ELECTION_PATH)
        return set() if read is None else decode_preferred_replica_election(read[0])

    def delete_preferred_replica_election(self, expected_controller_epoch_zk_version: int) -> None:
        """Fenced delete; missing is fine."""
        self._core.delete_all([P.PREFERRED_REPLICA_ELECTION_PATH], expected_controller_epoch_zk_version)

    # -- /admin/delete_topics ---------------------------------------------------------------------------

    def create_delete_topic_path(self, topic: str) -> None:
        """Mark a topic for deletion (admin, not fenced), atomically checking that it exists:
        ``NoNodeError`` on the topic path when it does not (UNKNOWN_TOPIC_OR_PARTITION),
        ``NodeExistsError`` when already marked (TopicAlreadyMarkedForDeletion)."""
        P.validate_topic_name(topic)
        ops = [(CHECK, P.topic_path(topic), None, -1), (CREATE, P.delete_topic_path(topic), None, PERSISTENT)]
        outcome = self._core.backend.multi([ops])[0]
        if not outcome.ok:
            raise error_for_code(outcome.error_code, ops[outcome.failed_index][1])

    def get_topic_deletions(self) -> list[str]:
        """Topics queued for deletion (children of ``/admin/delete_topics``)."""
        return self._core.children(P.DELETE_TOPICS_PATH)

    def is_topic_marked_for_deletion(self, topic: str) -> bool:
        return self._core.backend.exists(P.delete_topic_path(topic)) is not None

    def delete_topic_deletions(
        self, topics: Collection[str], expected_controller_epoch_zk_version: int
    ) -> None:
        """Delete ``/admin/delete_topics/<t>`` for each topic, fenced and batched."""
        self._core.delete_all([P.delete_topic_path(t) for t in topics], expected_controller_epoch_zk_version)

    # -- ISR-change notifications ------------------------------------------------------------------------

    def propagate_isr_changes(self, partitions: Iterable[TopicPartition]) -> str:
        """Broker side (pre-AlterIsr): a sequential notification with the literal Kafka payload;
        returns its path. Not fenced."""
        data = encode_isr_change_notification(partitions)
        prefix = f"{P.ISR_CHANGE_NOTIFICATION_PATH}/{P.ISR_CHANGE_NOTIFICATION_PREFIX}"
        return self._core.backend.create(prefix, data, PERSISTENT_SEQUENTIAL)[0]

    def get_all_isr_change_notifications(self) -> list[str]:
        """Sequence numbers of the pending notifications, in order."""
        prefix = P.ISR_CHANGE_NOTIFICATION_PREFIX
        return [P.sequence_number(c, prefix) for c in self._core.children(P.ISR_CHANGE_NOTIFICATION_PATH)]

    def get_partitions_from_isr_change_notifications(
        self, sequence_numbers: Iterable[str]
    ) -> list[TopicPartition]:
        """Partitions named by those notifications (batched read; duplicates kept, as Kafka).
        Vanished notifications are skipped; a corrupt one is logged and skipped."""
        paths = [P.isr_change_notification_path(s) for s in sequence_numbers]
        out: list[TopicPartition] = []
        for read in self._core.decode_many(
            paths, lambda data, _s, path: decode_isr_change_notification(data, path)
        ):
            if isinstance(read, MetadataStoreError):
                log.warning("skipping ISR change notification: %s", read)
            elif read:
                out.extend(read)
        return out

    def delete_isr_change_notifications(
        self, sequence_numbers: Collection[str] | None, expected_controller_epoch_zk_version: int
    ) -> None:
        """Delete those notifications (all of them for None), fenced and batched."""
        seqs = self.get_all_isr_change_notifications() if sequence_numbers is None else sequence_numbers
        self._core.delete_all(
            [P.isr_change_notification_path(s) for s in seqs], expected_controller_epoch_zk_version
        )

    # -- log-dir event notifications ------------------------------------------------------------------------

    def propagate_log_dir_event(self, broker_id: int) -> str:
        """Broker side: a sequential LogDirFailure notification; returns its path. Not fenced."""
        prefix = f"{P.LOG_DIR_EVENT_NOTIFICATION_PATH}/{P.LOG_DIR_EVENT_NOTIFICATION_PREFIX}"
        return self._core.backend.create(prefix, encode_log_dir_event(broker_id), PERSISTENT_SEQUENTIAL)[0]

    def get_all_log_dir_event_notifications(self) -> list[str]:
        prefix = P.LOG_DIR_EVENT_NOTIFICATION_PREFIX
        return [P.sequence_number(c, prefix) for c in self._core.children(P.LOG_DIR_EVENT_NOTIFICATION_PATH)]

    def get_broker_ids_from_log_dir_events(self, sequence_numbers: Iterable[str]) -> list[int]:
        """Broker ids named by those notifications; vanished or corrupt ones are skipped."""
        paths = [P.log_dir_event_notification_path(s) for s in sequence_numbers]
        out: list[int] = []
        for read in self._core.decode_many(paths, lambda data, _s, path: decode_log_dir_event(data, path)):
            if isinstance(read, MetadataStoreError):
                log.warning("skipping log dir event notification: %s", read)
            elif read is not None:
                out.append(read)
        return out

    def delete_log_dir_event_notifications(
        self, sequence_numbers: Collection[str] | None, expected_controller_epoch_zk_version: int
    ) -> None:
        """Delete those notifications (all of them for None), fenced and batched."""
        seqs = self.get_all_log_dir_event_notifications() if sequence_numbers is None else sequence_numbers
        paths = [P.log_dir_event_notification_path(s) for s in seqs]
        self._core.delete_all(paths, expected_controller_epoch_zk_version)
