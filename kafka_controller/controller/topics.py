"""Topics come and go (docs/controller-behaviour.md §8.9, §8.10): creation and partition expansion
seen through the topic watches, deletion requests under ``/admin/delete_topics``, and the deletion client the
topic-deletion manager writes through.

New partitions are brought online in four batched state-machine calls (New, NewReplica, Online
with leader = first live replica, OnlineReplica), however many there are.
"""

from __future__ import annotations

from collections.abc import Collection

from kafka_controller.controller.failover import ControllerFailover
from kafka_controller.controller.services import ControllerServices, log
from kafka_controller.core.strategies import OfflinePartitionLeaderElectionStrategy
from kafka_controller.domain.errors import MetadataStoreError
from kafka_controller.domain.requests import Errors
from kafka_controller.domain.states import PartitionState, ReplicaState
from kafka_controller.domain.values import PartitionAndReplica, ReplicaAssignment, TopicPartition
from kafka_controller.ports import TopicIdReplicaAssignment


class TopicChanges:
    """TopicChange, PartitionModifications, TopicDeletion and StopReplica responses."""

    def __init__(self, services: ControllerServices, failover: ControllerFailover) -> None:
        self._s = services
        self._failover = failover

    def process_topic_change(self) -> None:
        if not self._s.is_active:
            return
        ctx = self._s.controller_context
        topics = self._s.store.watch_topics(self._s.watches.on_topics)  # re-arm and read
        new_topics = topics - ctx.all_topics
        deleted_topics = ctx.all_topics - topics
        ctx.set_all_topics(topics)
        reads = self._s.store.get_replica_assignment_and_topic_ids(
            new_topics, watch_handler=self._s.watches.on_topic_znode
        )
        added: list[TopicIdReplicaAssignment] = []
        for topic, read in reads.items():
            if isinstance(read, MetadataStoreError):
                log.error("Cannot load the assignment of new topic %s: %s", topic, read)
            else:
                added.append(read)
        for topic in deleted_topics:
            ctx.remove_topic(topic)
        self._failover.process_topic_ids(added)
        new_partitions: list[TopicPartition] = []
        for a in added:
            for tp, assignment in a.assignment.items():
                ctx.update_partition_full_replica_assignment(tp, assignment)
                new_partitions.append(tp)
        log.info(
            "New topics: %s, deleted topics: %s, %d new partitions",
            sorted(new_topics),
            sorted(deleted_topics),
            len(new_partitions),
        )
        if new_partitions:
            self.on_new_partition_creation(new_partitions)

    def on_new_partition_creation(self, partitions: Collection[TopicPartition]) -> None:
        log.info("New partition creation callback for %d partitions", len(partitions))
        ctx = self._s.controller_context
        psm, rsm = self._s.partition_state_machine, self._s.replica_state_machine
        tps = list(partitions)
        psm.handle_state_changes(tps, PartitionState.NEW_PARTITION)
        rsm.handle_state_changes(ctx.replicas_for_partition(tps), ReplicaState.NEW_REPLICA)
        psm.handle_state_changes(
            tps, PartitionState.ONLINE_PARTITION, OfflinePartitionLeaderElectionStrategy(False)
        )
        rsm.handle_state_changes(ctx.replicas_for_partition(tps), ReplicaState.ONLINE_REPLICA)

    def process_partition_modifications(self, topic: str) -> None:
        if not self._s.is_active:
            return
        ctx = self._s.controller_context
        read = self._s.store.get_replica_assignment_and_topic_ids(
            [topic], watch_handler=self._s.watches.on_topic_znode
        ).get(topic)
        if read is None:
            return  # the topic is gone; TopicChange handles that
        if isinstance(read, MetadataStoreError):
            log.error("Cannot read the assignment of topic %s: %s", topic, read)
            return
        to_add = {tp: a for tp, a in read.assignment.items() if not ctx.partition_replica_assignment(tp)}
        if self._s.topic_deletion_manager.is_topic_queued_up_for_deletion(topic):
            if to_add:
                log.warning(
                    "Skipping adding partitions %s for topic %s since it is currently being deleted",
                    sorted(tp.partition for tp in to_add),
                    topic,
                )
                self._restore_partition_replica_assignment(topic)
            else:
                log.info("Ignoring partition change during topic deletion as no new partitions are added")
        elif to_add:
            log.info("New partitions to be added %s", {str(tp): str(a) for tp, a in to_add.items()})
            for tp, assignment in to_add.items():
                ctx.update_partition_full_replica_assignment(tp, assignment)
            self.on_new_partition_creation(list(to_add))

    def _restore_partition_replica_assignment(self, topic: str) -> None:
        """Put the topic znode back to the partitions the controller knows (fenced).

        Kafka keeps those of the znode's partitions that have a ``partitions/<p>`` child; the
        controller creates that child with every partition it knows, so its own view is the same
        set without reading the children.
        """
        ctx = self._s.controller_context
        known: dict[TopicPartition, ReplicaAssignment] = ctx.partition_full_replica_assignment_for_topic(
            topic
        )
        log.info("Restoring the partition replica assignment for topic %s", topic)
        self._s.store.set_topic_assignment(topic, ctx.topic_ids.get(topic), known, ctx.epoch_zk_version)

    def process_topic_deletion(self) -> None:
        if not self._s.is_active:
            return
        ctx = self._s.controller_context
        to_delete = set(self._s.store.watch_topic_deletions(self._s.watches.on_topic_deletions))
        non_existent = to_delete - ctx.all_topics
        if non_existent:
            log.warning("Ignoring request to delete non-existing topics %s", sorted(non_existent))
            self._s.store.delete_topic_deletions(sorted(non_existent), ctx.epoch_zk_version)
        to_delete -= non_existent
        if not self._s.config.delete_topic_enable:
            if to_delete:
                log.info("Removing %s since delete topic is disabled", sorted(to_delete))
                self._s.store.delete_topic_deletions(sorted(to_delete), ctx.epoch_zk_version)
            return
        if not to_delete:
            return
        log.info("Starting topic deletion for topics %s", sorted(to_delete))
        reassigning = {tp.topic for tp in ctx.partitions_being_reassigned}
        for topic in sorted(to_delete & reassigning):
            self._s.topic_deletion_manager.mark_topic_ineligible_for_deletion(
                {topic}, "topic reassignment in progress"
            )
        self._s.topic_deletion_manager.enqueue_topics_for_deletion(to_delete)

    def process_topic_deletion_stop_replica_response_received(
        self, replica_id: int, request_error: Errors, partition_errors: dict[TopicPartition, Errors]
    ) -> None:
        if not self._s.is_active:
            return
        log.debug(
            "Delete topic callback invoked on StopReplica response received from broker %d: request error "
            "= %s, partition errors = %s",
            replica_id,
            request_error,
            partition_errors,
        )
        if request_error is not Errors.NONE:
            in_error = set(partition_errors)
        else:
            in_error = {tp for tp, e in partition_errors.items() if e is not Errors.NONE}
        tdm = self._s.topic_deletion_manager
        tdm.fail_replica_deletion([PartitionAndReplica(tp, replica_id) for tp in sorted(in_error)])
        if len(in_error) != len(partition_errors):
            deleted = sorted(partition_errors.keys() - in_error)
            tdm.complete_replica_deletion([PartitionAndReplica(tp, replica_id) for tp in deleted])
