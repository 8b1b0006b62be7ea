"""Controlled shutdown (docs/controller-behaviour.md §8.7, §2.3): move leadership off a broker
before it stops.

The broker asks, the controller answers with the partitions the broker *still* leads, and the
broker retries while that set is non-empty. Three different things happen to the broker's
partitions, and it matters which:

* led partitions get a ControlledShutdown election: the first live, in-ISR, not-shutting-down
  replica leads, and the ISR loses every shutting-down broker (no size-1 floor; a partition with
  no such replica keeps its leader and is reported back);
* followed partitions take the replica offline: StopReplica(delete=false) (twice, as in Kafka)
  and an ISR shrink that never empties the ISR;
* partitions with one replica, of topics being deleted, or without leadership are left alone.

All of it is three batched state-machine calls, whatever the number of partitions.
"""

from __future__ import annotations

from kafka_controller.controller.events import ControlledShutdownCallback
from kafka_controller.controller.resignation import ControllerResignation
from kafka_controller.controller.services import ControllerServices, log
from kafka_controller.core.strategies import ControlledShutdownPartitionLeaderElectionStrategy
from kafka_controller.domain.errors import (
    BrokerNotAvailableError,
    ControllerMovedError,
    IllegalControllerStateError,
    StaleBrokerEpochError,
)
from kafka_controller.domain.states import PartitionState, ReplicaState
from kafka_controller.domain.values import UNKNOWN_BROKER_EPOCH, PartitionAndReplica, TopicPartition
from kafka_controller.thread_cpu import CpuAccount


class ControlledShutdownHandling:
    """The ControlledShutdown event."""

    def __init__(self, services: ControllerServices, resignation: ControllerResignation) -> None:
        self._s = services
        self._resignation = resignation

    def process_controlled_shutdown(
        self, broker_id: int, broker_epoch: int, callback: ControlledShutdownCallback
    ) -> None:
        """Kafka wraps the work in a ``Try``: whatever happens, the caller gets an answer."""
        cpu = CpuAccount()
        try:
            result: set[TopicPartition] | Exception = self.do_controlled_shutdown(broker_id, broker_epoch)
        except Exception as e:
            result = e
        callback(result)
        log.info("CPU by thread while shutting down broker %d (s): %s", broker_id, cpu.summary())

    def do_controlled_shutdown(self, broker_id: int, broker_epoch: int) -> set[TopicPartition]:
        if not self._s.is_active:
            raise ControllerMovedError("Controller moved to another broker. Aborting controlled shutdown")
        ctx = self._s.controller_context
        log.info("Shutting down broker %d", broker_id)
        if broker_epoch != UNKNOWN_BROKER_EPOCH:
            cached = ctx.live_broker_epoch(broker_id)
            if cached is None:
                raise BrokerNotAvailableError(f"Broker id {broker_id} does not exist.")
            if broker_epoch < cached:
                raise StaleBrokerEpochError(
                    f"Received controlled shutdown request from an old broker epoch {broker_epoch} for "
                    f"broker {broker_id}. Current broker epoch is {cached}."
                )
        if not ctx.is_live_or_shutting_down(broker_id):
            raise BrokerNotAvailableError(f"Broker id {broker_id} does not exist.")
        ctx.shutting_down_broker_ids.add(broker_id)
        log.debug("All shutting down brokers: %s", sorted(ctx.shutting_down_broker_ids))
        log.debug("Live brokers: %s", sorted(ctx.live_broker_ids))

        led, followed = ctx.partitions_to_move_off(broker_id)
        self._s.partition_state_machine.handle_state_changes(
            led, PartitionState.ONLINE_PARTITION, ControlledShutdownPartitionLeaderElectionStrategy()
        )
        batch = self._s.broker_request_batch
        try:
            batch.new_batch()
            batch.add_stop_replica_requests((broker_id,), followed, False)  # one call, in order
            batch.send_requests_to_brokers(ctx.epoch)
        except IllegalControllerStateError as e:
            self._resignation.handle_illegal_state(e)
        self._s.replica_state_machine.handle_state_changes(
            [PartitionAndReplica(tp, broker_id) for tp in followed], ReplicaState.OFFLINE_REPLICA
        )
        still_led = ctx.partition_leaders_on_broker(broker_id)
        log.info(
            "Controlled shutdown of broker %d: %d led partitions moved or tried, %d followed, %d still led",
            broker_id,
            len(led),
            len(followed),
            len(still_led),
        )
        return still_led
