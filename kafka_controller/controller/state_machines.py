"""Building the state machines, the request batches and the topic-deletion manager from the
current config: at construction, on every failover, and when a broker default they read changes
(the unclean-election default). They are replaced as a whole in ``ControllerServices``."""

from __future__ import annotations

import logging
from collections.abc import Collection

from kafka_controller.controller import events as ev
from kafka_controller.controller.event_manager import ControllerEvent
from kafka_controller.controller.metadata_updates import UpdateMetadataSender
from kafka_controller.controller.services import ControllerServices, topic_path
from kafka_controller.core import events as core_events
from kafka_controller.core.partition_state_machine import PartitionStateMachine
from kafka_controller.core.replica_state_machine import ReplicaStateMachine
from kafka_controller.core.request_batch import ControllerBrokerRequestBatch
from kafka_controller.core.topic_deletion_manager import TopicDeletionManager
from kafka_controller.domain.config_keys import UNCLEAN_LEADER_ELECTION_ENABLE
from kafka_controller.domain.values import TopicPartition

log = logging.getLogger("kafka_controller.controller")


class StateMachineFactory:
    """Kafka builds these once in ``KafkaController``'s constructor; here they are rebuilt from the
    effective config when it changes, so the factory keeps what they are built from."""

    def __init__(
        self,
        services: ControllerServices,
        metadata: UpdateMetadataSender,
        inter_broker_listener_name: str | None,
    ) -> None:
        self._s = services
        self._deletion_client = ControllerDeletionClient(services, metadata)
        self._listener = inter_broker_listener_name

    def build_state_machines(self) -> None:
        """Fresh batches, state machines and deletion manager (at construction, on every
        failover, and when a broker default they read changes)."""
        s = self._s
        ctx, store, cid = s.controller_context, s.store, s.controller_id
        ibp = s.config.inter_broker_protocol_version

        def batch() -> ControllerBrokerRequestBatch:
            return ControllerBrokerRequestBatch(
                cid,
                ctx,
                s.channel_manager,
                self.event_sink,
                ibp=ibp,
                inter_broker_listener_name=self._listener,
            )

        audit = s.audit if s.audit.enabled else None
        s.broker_request_batch = batch()
        rsm_batch = batch()
        # Every departure from Kafka's call sequence on (core.*): cached-state writes, offline
        # leaders left to the election, writes started early.
        s.partition_state_machine = psm = PartitionStateMachine(
            cid,
            ctx,
            store,
            batch(),
            broker_config=self._log_config_defaults(),
            audit=audit,
            write_on_cached_zk_version=True,
        )
        s.replica_state_machine = rsm = ReplicaStateMachine(
            cid,
            ctx,
            store,
            rsm_batch,
            audit=audit,
            write_on_cached_zk_version=True,
            leave_offline_leaders_to_election=True,
            prewrite_isr_removal=True,
            on_left_to_election=psm.start_election_prewrite,
        )
        s.topic_deletion_manager = TopicDeletionManager(
            cid, ctx, rsm, psm, self._deletion_client, delete_topic_enable=s.config.delete_topic_enable
        )

    def _log_config_defaults(self) -> dict[str, str]:
        """Kafka's ``config.originals()`` with the broker's unclean default spelled out."""
        config = self._s.config
        defaults = config.originals()
        defaults[UNCLEAN_LEADER_ELECTION_ENABLE] = str(config.unclean_leader_election_enable).lower()
        return defaults

    def event_sink(self, event: object) -> None:
        """Response callbacks of the batches (channel threads): wrap and enqueue, nothing else."""
        enqueue = self._s.enqueue
        if isinstance(event, core_events.LeaderAndIsrResponseNotice):
            enqueue(ev.LeaderAndIsrResponseReceived(event.response, event.broker_id))
        elif isinstance(event, core_events.UpdateMetadataResponseNotice):
            enqueue(ev.UpdateMetadataResponseReceived(event.response, event.broker_id))
        elif isinstance(event, core_events.TopicDeletionStopReplicaResponseNotice):
            enqueue(
                ev.TopicDeletionStopReplicaResponseReceived(
                    event.broker_id, event.error, dict(event.partition_errors)
                )
            )
        elif isinstance(event, ControllerEvent):
            enqueue(event)
        else:
            log.warning("Dropping unexpected event %r from a broker response", event)


class ControllerDeletionClient:
    """Kafka's ``ControllerDeletionClient``: the topic-deletion manager's writes, all fenced."""

    def __init__(self, services: ControllerServices, metadata: UpdateMetadataSender) -> None:
        self._s = services
        self._store = services.store
        self._metadata = metadata

    def delete_topic(self, topic: str, expected_controller_epoch_zk_version: int) -> None:
        self._store.delete_topic_recursively(topic, expected_controller_epoch_zk_version)
        self._store.delete_topic_configs([topic], expected_controller_epoch_zk_version)
        self._store.delete_topic_deletions([topic], expected_controller_epoch_zk_version)

    def delete_topic_deletions(
        self, topics: Collection[str], expected_controller_epoch_zk_version: int
    ) -> None:
        self._store.delete_topic_deletions(list(topics), expected_controller_epoch_zk_version)

    def mute_partition_modifications(self, topic: str) -> None:
        self._store.unwatch(topic_path(topic))

    def send_metadata_update(self, partitions: Collection[TopicPartition]) -> None:
        ctx = self._s.controller_context
        self._metadata.send_update_metadata_request(sorted(ctx.live_or_shutting_down_broker_ids), partitions)
