"""ISR changes (docs/controller-behaviour.md §8.12): AlterIsr from partition leaders
(IBP >= 2.7-IV2, the default), and the older ``/isr_change_notification`` path that brokers on
earlier IBPs still use.

AlterIsr is checked in Kafka 2.8's order: NOT_CONTROLLER, then the broker epoch (unknown or not
equal: STALE_BROKER_EPOCH), then per partition: unknown (UNKNOWN_TOPIC_OR_PARTITION), an older
leader epoch (FENCED_LEADER_EPOCH), the same leader/epoch/ISR as cached (answered with the cached
state, no write: that makes retries idempotent), else one conditional write for all partitions
(a BADVERSION is INVALID_UPDATE_VERSION). Successful updates may complete a reassignment.
"""

from __future__ import annotations

from collections.abc import Mapping

from kafka_controller.controller.events import AlterIsrCallback
from kafka_controller.controller.metadata_updates import UpdateMetadataSender
from kafka_controller.controller.reassignment_phases import ReassignmentPhases
from kafka_controller.controller.services import ControllerServices, log
from kafka_controller.domain.errors import ControllerMovedError
from kafka_controller.domain.requests import Errors
from kafka_controller.domain.values import LeaderAndIsr, TopicPartition


class IsrChanges:
    """AlterIsrReceived, IsrChangeNotification."""

    def __init__(
        self, services: ControllerServices, metadata: UpdateMetadataSender, phases: ReassignmentPhases
    ) -> None:
        self._s = services
        self._metadata = metadata
        self._phases = phases

    def process_alter_isr(
        self,
        broker_id: int,
        broker_epoch: int,
        isrs: Mapping[TopicPartition, LeaderAndIsr],
        callback: AlterIsrCallback,
    ) -> None:
        if not self._s.is_active:
            callback(Errors.NOT_CONTROLLER)
            return
        ctx = self._s.controller_context
        cached_epoch = ctx.live_broker_epoch(broker_id)
        if cached_epoch is None:
            log.info("Ignoring AlterIsr due to unknown broker %d", broker_id)
            callback(Errors.STALE_BROKER_EPOCH)
            return
        if cached_epoch != broker_epoch:
            log.info("Ignoring AlterIsr due to stale broker epoch %d for broker %d", broker_epoch, broker_id)
            callback(Errors.STALE_BROKER_EPOCH)
            return

        responses: dict[TopicPartition, LeaderAndIsr | Errors] = {}
        try:
            to_write: dict[TopicPartition, LeaderAndIsr] = {}
            for tp, requested in isrs.items():
                # Kafka builds the new state from the request: the sender leads, at its epoch.
                wanted = LeaderAndIsr(
                    broker_id, requested.leader_epoch, tuple(requested.isr), requested.zk_version
                )
                info = ctx.partition_leadership_info(tp)
                if info is None:
                    responses[tp] = Errors.UNKNOWN_TOPIC_OR_PARTITION
                    continue
                current = info.leader_and_isr
                if wanted.leader_epoch < current.leader_epoch:
                    responses[tp] = Errors.FENCED_LEADER_EPOCH
                elif wanted.equals_ignore_zk(current):
                    responses[tp] = current
                else:
                    to_write[tp] = wanted
            succeeded: list[TopicPartition] = []
            if to_write:
                result = self._s.store.update_leader_and_isr(to_write, ctx.epoch, ctx.epoch_zk_version)
                for tp, outcome in result.finished.items():
                    if isinstance(outcome, LeaderAndIsr):
                        responses[tp] = outcome
                        succeeded.append(tp)
                    else:
                        log.error("Failed to update ISR for partition %s: %s", tp, outcome)
                        responses[tp] = Errors.UNKNOWN_SERVER_ERROR
                for tp in result.to_retry:
                    log.info("Failed to update ISR to %s for partition %s, bad ZK version.", to_write[tp], tp)
                    responses[tp] = Errors.INVALID_UPDATE_VERSION
            self._s.update_leader_and_isr_cache(succeeded)
            self._metadata.send_update_metadata_request(
                sorted(ctx.live_or_shutting_down_broker_ids), list(isrs)
            )
        except ControllerMovedError:
            # Kafka answers UNKNOWN_SERVER_ERROR and carries on; a fenced controller should step
            # down instead, so the leader hears NOT_CONTROLLER and ``process`` resigns.
            callback(Errors.NOT_CONTROLLER)
            raise
        except Exception:
            log.exception("Error when processing AlterIsr for partitions %s", sorted(isrs))
            callback(Errors.UNKNOWN_SERVER_ERROR)
            return
        callback(responses)
        self._phases.maybe_complete_reassignments(  # batched: one state read, one phase B for all
            tp for tp, response in responses.items() if isinstance(response, LeaderAndIsr)
        )

    def process_isr_change_notification(self) -> None:
        """Pre-AlterIsr brokers wrote the ISR themselves: refresh the cache, tell every broker,
        and complete reassignments the change may finish; then delete what was processed."""
        if not self._s.is_active:
            return
        ctx = self._s.controller_context
        sequence_numbers = self._s.store.watch_isr_change_notifications(
            self._s.watches.on_isr_change_notifications
        )
        try:
            partitions = self._s.store.get_partitions_from_isr_change_notifications(sequence_numbers)
            if partitions:
                self._s.update_leader_and_isr_cache(partitions)
                self._metadata.send_update_metadata_request(
                    sorted(ctx.live_or_shutting_down_broker_ids), set(partitions)
                )
                self._phases.maybe_complete_reassignments(partitions)
        finally:
            self._s.store.delete_isr_change_notifications(sequence_numbers, ctx.epoch_zk_version)
