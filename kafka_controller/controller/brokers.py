"""Broker changes (docs/controller-behaviour.md §8.5, §8.6): brokers joining, dying, bouncing,
changing endpoints, losing log dirs, and what their LeaderAndIsr answers say about offline replicas.

A bounce is detected by the broker epoch (the czxid of ``/brokers/ids/<id>``): the same id with
a greater epoch means the broker restarted while the controller was busy (KAFKA-7235), and it is
handled as a failure followed by a startup. Each handler scans the context once per event, never
once per partition.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence

from kafka_controller.controller.failover import ControllerFailover
from kafka_controller.controller.metadata_updates import UpdateMetadataSender
from kafka_controller.controller.reassignment_phases import ReassignmentPhases
from kafka_controller.controller.services import ControllerServices, log
from kafka_controller.domain.requests import Errors, LeaderAndIsrResponse, UpdateMetadataResponse
from kafka_controller.domain.states import PartitionState, ReplicaState
from kafka_controller.domain.values import PartitionAndReplica, TopicPartition


class BrokerChanges:
    """BrokerChange, BrokerModifications, LogDirEventNotification and broker responses."""

    def __init__(
        self,
        services: ControllerServices,
        metadata: UpdateMetadataSender,
        failover: ControllerFailover,
        phases: ReassignmentPhases,
    ) -> None:
        self._s = services
        self._metadata = metadata
        self._failover = failover
        self._phases = phases

    def process_broker_change(self) -> None:
        if not self._s.is_active:
            return
        ctx = self._s.controller_context
        self._s.store.watch_broker_ids(self._s.watches.on_broker_ids)  # re-arm before reading
        current = {b.id: (b, epoch) for b, epoch in self._s.store.get_all_brokers_and_epochs().items()}
        known = ctx.live_or_shutting_down_broker_ids
        new_ids = current.keys() - known
        dead_ids = known - current.keys()
        bounced_ids = {
            b for b in current.keys() & known if current[b][1] > _known_epoch(ctx.live_broker_epoch(b))
        }
        log.info(
            "Newly added brokers: %s, deleted brokers: %s, bounced brokers: %s, all live brokers: %s",
            sorted(new_ids),
            sorted(dead_ids),
            sorted(bounced_ids),
            sorted(current),
        )
        channels = self._s.channel_manager
        for b in new_ids:
            channels.add_broker(current[b][0])
        for b in bounced_ids:
            channels.remove_broker(b)
            channels.add_broker(current[b][0])
        for b in dead_ids:
            channels.remove_broker(b)
        if new_ids:
            ctx.add_live_brokers(self._failover.compatible_brokers(dict(current[b] for b in new_ids)))
            self.on_broker_startup(sorted(new_ids))
        if bounced_ids:
            ctx.remove_live_brokers(bounced_ids)
            self.on_broker_failure(sorted(bounced_ids))
            ctx.add_live_brokers(self._failover.compatible_brokers(dict(current[b] for b in bounced_ids)))
            self.on_broker_startup(sorted(bounced_ids))
        if dead_ids:
            ctx.remove_live_brokers(dead_ids)
            self.on_broker_failure(sorted(dead_ids))

    def on_broker_startup(self, new_brokers: Sequence[int]) -> None:
        """New (or bounced) brokers: metadata first, then their replicas, then elections."""
        log.info("New broker startup callback for %s", list(new_brokers))
        ctx = self._s.controller_context
        new_set = set(new_brokers)
        for b in new_brokers:
            ctx.replicas_on_offline_dirs.pop(b, None)
        existing = sorted(ctx.live_or_shutting_down_broker_ids - new_set)
        self._metadata.send_update_metadata_request(existing, ())
        self._metadata.send_update_metadata_request(list(new_brokers), ctx.partitions_with_leaders)
        replicas = ctx.replicas_on_brokers(new_set)
        self._s.replica_state_machine.handle_state_changes(replicas, ReplicaState.ONLINE_REPLICA)
        self._s.partition_state_machine.trigger_online_partition_state_change()
        self._phases.maybe_resume_reassignments(
            lambda _tp, assignment: any(r in new_set for r in assignment.target_replicas)
        )
        queued = ctx.topics_to_be_deleted
        deleting = {r.topic for r in replicas if r.topic in queued} if queued else set()
        if deleting:
            log.info(
                "Some replicas %s for topics scheduled for deletion are on the new broker", sorted(deleting)
            )
            self._s.topic_deletion_manager.resume_deletion_for_topics(deleting)
        self._s.register_broker_modifications_handlers(new_brokers)

    def on_broker_failure(self, dead_brokers: Sequence[int]) -> None:
        log.info("Broker failure callback for %s", list(dead_brokers))
        ctx = self._s.controller_context
        for b in dead_brokers:
            ctx.replicas_on_offline_dirs.pop(b, None)
        ctx.shutting_down_broker_ids.difference_update(dead_brokers)
        self.on_replicas_become_offline(ctx.replicas_on_brokers(set(dead_brokers)))
        self._s.unregister_broker_modifications_handlers(dead_brokers)

    def on_replicas_become_offline(self, replicas: Collection[PartitionAndReplica]) -> None:
        """docs/controller-behaviour.md §8.6 (Kafka 2.x ``onReplicasBecomeOffline``): every
        partition whose leader is offline is re-elected, not only the ones on the dead brokers; the
        replicas then go offline (ISR shrink)."""
        ctx = self._s.controller_context
        queued = ctx.topics_to_be_deleted
        deleting = [r for r in replicas if r.topic in queued]
        others = [r for r in replicas if r.topic not in queued] if deleting else list(replicas)
        with_offline_leader = sorted(ctx.partitions_with_offline_leader)
        psm = self._s.partition_state_machine
        psm.handle_state_changes(with_offline_leader, PartitionState.OFFLINE_PARTITION)
        psm.trigger_online_partition_state_change()
        self._s.replica_state_machine.handle_state_changes(others, ReplicaState.OFFLINE_REPLICA)
        if deleting:
            self._s.topic_deletion_manager.fail_replica_deletion(deleting)
        if not with_offline_leader:
            self._metadata.send_update_metadata_request(sorted(ctx.live_or_shutting_down_broker_ids), ())

    def process_broker_modification(self, broker_id: int) -> None:
        if not self._s.is_active:
            return
        ctx = self._s.controller_context
        old = ctx.live_or_shutting_down_broker(broker_id)
        if old is None:
            return  # gone (BrokerChange handles that): leave its watch unregistered
        self._s.store.watch_broker(broker_id, self._s.watches.on_broker_znode)  # re-arm
        new = self._s.store.get_broker(broker_id)
        if new is None:
            return
        if new.endpoints != old.endpoints or new.features != old.features:
            log.info("Updated broker %d: endpoints %s -> %s", broker_id, old.endpoints, new.endpoints)
            ctx.update_broker_metadata(old, new)
            self._metadata.send_update_metadata_request(sorted(ctx.live_or_shutting_down_broker_ids), ())

    def process_log_dir_event_notification(self) -> None:
        if not self._s.is_active:
            return
        sequence_numbers = self._s.store.watch_log_dir_event_notifications(
            self._s.watches.on_log_dir_event_notifications
        )
        try:
            broker_ids = self._s.store.get_broker_ids_from_log_dir_events(sequence_numbers)
            self.on_broker_log_dir_failure(broker_ids)
        finally:
            self._s.store.delete_log_dir_event_notifications(
                sequence_numbers, self._s.controller_context.epoch_zk_version
            )

    def on_broker_log_dir_failure(self, broker_ids: Iterable[int]) -> None:
        """Resend LeaderAndIsr to every replica of those brokers; they answer KAFKA_STORAGE_ERROR
        for replicas on failed dirs, which ``process_leader_and_isr_response_received`` handles."""
        ids = set(broker_ids)
        log.info("Handling log directory failure for brokers %s", sorted(ids))
        replicas = self._s.controller_context.replicas_on_brokers(ids)
        self._s.replica_state_machine.handle_state_changes(replicas, ReplicaState.ONLINE_REPLICA)

    def process_leader_and_isr_response_received(
        self, response: LeaderAndIsrResponse, broker_id: int
    ) -> None:
        if not self._s.is_active:
            return
        if response.error is not Errors.NONE:
            log.error("Received error %s in LeaderAndIsr response from broker %d", response.error, broker_id)
            return
        ctx = self._s.controller_context
        errors = response.partition_errors
        # A failover's responses carry 60,000 errors each (stale leader epochs): a C-level scan
        # for the one error that matters before any per-partition Python work.
        storage = Errors.KAFKA_STORAGE_ERROR
        offline = {tp for tp, e in errors.items() if e is storage} if storage in errors.values() else set()
        previous: set[TopicPartition] = ctx.replicas_on_offline_dirs.get(broker_id, set())
        # Replicas answered NONE are back online; only those already marked offline can change
        # (a failover's responses cover 100,000 partitions, almost never one marked offline).
        back = {tp for tp in previous if errors.get(tp) is Errors.NONE}
        current = (previous - back) | offline
        if current:
            ctx.replicas_on_offline_dirs[broker_id] = current
        else:  # no empty entries: the hot paths skip the per-replica check while the map is empty
            ctx.replicas_on_offline_dirs.pop(broker_id, None)
        new_offline = current - previous
        if new_offline:
            log.info("Mark replicas %s on broker %d as offline", sorted(new_offline), broker_id)
            self.on_replicas_become_offline(
                [PartitionAndReplica(tp, broker_id) for tp in sorted(new_offline)]
            )

    def process_update_metadata_response_received(
        self, response: UpdateMetadataResponse, broker_id: int
    ) -> None:
        if not self._s.is_active:
            return
        if response.error is Errors.STALE_BROKER_EPOCH:
            log.info("Received error %s in UpdateMetadata response from broker %d", response.error, broker_id)
        elif response.error is not Errors.NONE:
            log.error(
                "Received error %s in UpdateMetadata response from broker %d", response.error, broker_id
            )


def _known_epoch(epoch: int | None) -> int:
    return -1 if epoch is None else epoch
