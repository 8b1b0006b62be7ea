"""The controller's outbound queues to brokers (Kafka's ``ControllerChannelManager``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from kafka_controller.domain.requests import ControlRequest, ControlResponse

__all__ = ["BrokerChannel", "ResponseCallback"]

ResponseCallback = Callable[[ControlResponse], None]


class BrokerChannel(Protocol):
    """The controller's outbound queues to brokers (Kafka's ``ControllerChannelManager``)."""

    def send_request(
        self, broker_id: int, request: ControlRequest, callback: ResponseCallback | None = None
    ) -> None:
        """Queue ``request`` for ``broker_id`` and return at once.

        Delivery is retried until it succeeds or the broker's queue is removed; requests to a broker
        without a queue are dropped with a warning. ``callback`` runs on a channel thread with the
        response and must only enqueue (docs/rules.md, callbacks only enqueue).
        """
        ...
