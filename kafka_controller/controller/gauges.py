"""The controller's gauges and its unclean-election meter (docs/controller-behaviour.md §8.15): Kafka's
``KafkaController.updateMetrics`` and the gauges it registers, refreshed after every event and
read by Kafka's short names."""

from __future__ import annotations

from kafka_controller.controller.auditing import AUDIT_HELD_RECORDS, AUDIT_HOLD_MS
from kafka_controller.controller.metrics import (
    EVENT_QUEUE_SIZE,
    KAFKA_CONTROLLER_GAUGES,
    UNCLEAN_LEADER_ELECTIONS_PER_SEC,
    Meter,
    MetricsRegistry,
)
from kafka_controller.controller.services import ControllerServices
from kafka_controller.domain.errors import InvalidArgumentError
from kafka_controller.domain.states import ReplicaState

__all__ = ["GAUGE_NAMES", "ControllerGauges"]

#: Kafka's short gauge name (``OfflinePartitionsCount``) -> the full registered name.
GAUGE_NAMES = {name.rsplit("=", 1)[1]: name for name in KAFKA_CONTROLLER_GAUGES}
_NAME = GAUGE_NAMES
#: Gauges Kafka 2.8 does not have (README, "Deviations" 9): labelled as such in their help text.
KAFKA_3_1 = frozenset({"ActiveBrokerCount", "FencedBrokerCount"})


class ControllerGauges:
    """Registers and refreshes the gauges."""

    def __init__(self, services: ControllerServices, metrics: MetricsRegistry) -> None:
        self._s = services
        self.metrics = metrics
        self._metric_values: dict[str, float] = dict.fromkeys(_NAME, 0.0)
        self._unclean_meter: Meter = metrics.meter(
            UNCLEAN_LEADER_ELECTIONS_PER_SEC, "Unclean leader elections"
        )
        self._unclean_seen = 0
        self._register_metrics()

    def _register_metrics(self) -> None:
        reg = self.metrics
        values = self._metric_values
        for short, full in _NAME.items():
            if short == "ControllerState":
                reg.gauge(full, lambda: float(self._s.event_manager.state.value), "State being processed")
            else:
                help_text = f"{short} (Kafka 3.1+, KIP-748; not in 2.8)" if short in KAFKA_3_1 else short
                reg.gauge(full, lambda s=short: values[s], help_text)  # type: ignore[misc]
        reg.gauge(EVENT_QUEUE_SIZE, lambda: float(self._s.event_manager.queue_size), "Events waiting")
        audit = self._s.audit
        reg.gauge(AUDIT_HELD_RECORDS, lambda: float(audit.held_records()), "Audit records held by the event")
        reg.gauge(AUDIT_HOLD_MS, lambda: float(audit.hold_ms()), "Age of the oldest held audit record (ms)")

    def update_metrics(self) -> None:
        """Refresh the cached gauge values (0 when not the controller) and the unclean meter."""
        ctx = self._s.controller_context
        stats = ctx.stats.unclean_leader_elections
        if stats > self._unclean_seen:
            self._unclean_meter.mark(stats - self._unclean_seen)
        self._unclean_seen = stats
        v = self._metric_values
        if not self._s.is_active:
            for k in v:
                v[k] = 0.0
            return
        queued = ctx.topics_to_be_deleted
        states = ctx.replica_states
        to_delete = ineligible = 0
        for topic in queued:
            for r in ctx.replicas_for_topic(topic):
                state = states.get(r)
                to_delete += state is not ReplicaState.REPLICA_DELETION_SUCCESSFUL
                ineligible += state is ReplicaState.REPLICA_DELETION_INELIGIBLE
        v["ActiveControllerCount"] = 1.0
        v["OfflinePartitionsCount"] = float(ctx.offline_partition_count)
        v["PreferredReplicaImbalanceCount"] = float(ctx.preferred_replica_imbalance_count)
        v["GlobalTopicCount"] = float(len(ctx.all_topics))
        v["GlobalPartitionCount"] = float(ctx.partition_with_leaders_count)
        v["TopicsToDeleteCount"] = float(len(queued))
        v["ReplicasToDeleteCount"] = float(to_delete)
        v["TopicsIneligibleToDeleteCount"] = float(len(ctx.topics_ineligible_for_deletion))
        v["ReplicasIneligibleToDeleteCount"] = float(ineligible)
        v["ActiveBrokerCount"] = float(len(ctx.live_broker_ids))
        v["FencedBrokerCount"] = 0.0

    def metric(self, short_name: str) -> float:
        """A gauge's current value by Kafka's short name (``OfflinePartitionsCount``)."""
        full = _NAME.get(short_name)
        if full is None:
            raise InvalidArgumentError(
                f"unknown controller metric {short_name!r} (known: {', '.join(sorted(_NAME))})"
            )
        gauge = self.metrics.get(full)
        if not callable(gauge):
            raise InvalidArgumentError(f"metric {short_name!r} is not a gauge")
        return float(gauge())
