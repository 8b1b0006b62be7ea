"""The live-broker part of ``ControllerContext``: which brokers are live or shutting down, their
epochs, and whether a replica is online (Kafka's ``ControllerContext`` broker methods)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from kafka_controller.domain.values import Broker, TopicPartition

__all__ = ["ContextBrokers"]


class ContextBrokers:
    """Broker methods of ``ControllerContext``, which holds the fields declared here."""

    shutting_down_broker_ids: set[int]
    replicas_on_offline_dirs: dict[int, set[TopicPartition]]
    _live_brokers: dict[int, Broker]
    _live_broker_epochs: dict[int, int]

    @property
    def live_broker_ids(self) -> set[int]:
        return self._live_broker_epochs.keys() - self.shutting_down_broker_ids

    @property
    def live_or_shutting_down_broker_ids(self) -> set[int]:
        return set(self._live_broker_epochs)

    @property
    def live_or_shutting_down_brokers(self) -> list[Broker]:
        return list(self._live_brokers.values())

    @property
    def live_broker_id_and_epochs(self) -> dict[int, int]:
        return dict(self._live_broker_epochs)

    def live_broker_epoch(self, broker_id: int) -> int | None:
        return self._live_broker_epochs.get(broker_id)

    def live_or_shutting_down_broker(self, broker_id: int) -> Broker | None:
        return self._live_brokers.get(broker_id)

    def is_live_or_shutting_down(self, broker_id: int) -> bool:
        return broker_id in self._live_broker_epochs

    def set_live_brokers(self, broker_and_epochs: Mapping[Broker, int]) -> None:
        self.clear_live_brokers()
        self.add_live_brokers(broker_and_epochs)

    def add_live_brokers(self, broker_and_epochs: Mapping[Broker, int]) -> None:
        for broker, epoch in broker_and_epochs.items():
            self._live_brokers[broker.id] = broker
            self._live_broker_epochs[broker.id] = epoch

    def remove_live_brokers(self, broker_ids: Iterable[int]) -> None:
        for b in broker_ids:
            self._live_brokers.pop(b, None)
            self._live_broker_epochs.pop(b, None)

    def update_broker_metadata(self, old: Broker, new: Broker) -> None:
        self._live_brokers[new.id] = new

    def clear_live_brokers(self) -> None:
        self._live_brokers.clear()
        self._live_broker_epochs.clear()

    def is_replica_online(
        self, broker_id: int, tp: TopicPartition, include_shutting_down_brokers: bool = False
    ) -> bool:
        if include_shutting_down_brokers:
            alive = broker_id in self._live_broker_epochs
        else:
            alive = broker_id in self._live_broker_epochs and broker_id not in self.shutting_down_broker_ids
        if not alive:
            return False
        offline = self.replicas_on_offline_dirs.get(broker_id)
        return offline is None or tp not in offline
