"""Kafka's ``sendUpdateMetadataRequest``: the one request every concern sends after changing what
brokers must know, through the controller's own batch."""

from __future__ import annotations

from collections.abc import Collection, Iterable

from kafka_controller.controller.resignation import ControllerResignation
from kafka_controller.controller.services import ControllerServices
from kafka_controller.domain.errors import IllegalControllerStateError
from kafka_controller.domain.values import TopicPartition


class UpdateMetadataSender:
    """Sends UpdateMetadata through ``services.broker_request_batch``; a batch that cannot be sent
    is an illegal state, handed to the resignation (Kafka's ``handleIllegalState``)."""

    def __init__(self, services: ControllerServices, resignation: ControllerResignation) -> None:
        self._s = services
        self._resignation = resignation

    def send_update_metadata_request(
        self, brokers: Iterable[int], partitions: Collection[TopicPartition]
    ) -> None:
        """Kafka's ``sendUpdateMetadataRequest``: one batch, one send; a broken batch resigns."""
        batch = self._s.broker_request_batch
        try:
            batch.new_batch()
            batch.add_update_metadata_request_for_brokers(brokers, partitions)
            batch.send_requests_to_brokers(self._s.controller_context.epoch)
        except IllegalControllerStateError as e:
            self._resignation.handle_illegal_state(e)
