"""Following the dynamic broker configs at runtime (``dynamic_config`` says which keys and why).

Two ways in, both on the event thread: ``DynamicBrokerConfigChange`` events, which the broker's
``/config/changes`` listener enqueues with the two levels it read, and failover, which reads both
levels (one batched read) before anything else looks at the config, so that a controller elected
while the auto rebalance is paused stays paused, and its first elections use the dynamic unclean
default. The static config stays as given; the effective one is always recomputed from it.
"""

from __future__ import annotations

from collections.abc import Mapping

from kafka_controller.controller.config import KafkaConfig
from kafka_controller.controller.dynamic_config import (
    BROKER_CONFIG_TYPE,
    CLUSTER_DEFAULT,
    DEFAULT_BROKER_ENTITY,
    PER_BROKER,
    config_transition,
    effective_broker_config,
)
from kafka_controller.controller.events import UncleanLeaderElectionEnable
from kafka_controller.controller.replica_election import AUTO_REBALANCE_FIRST_DELAY_S, ReplicaElections
from kafka_controller.controller.services import ControllerServices, log
from kafka_controller.controller.state_machines import StateMachineFactory
from kafka_controller.domain.errors import MetadataStoreError


class DynamicBrokerConfigs:
    """The effective config = static (``--config``) + cluster default + this broker's."""

    def __init__(
        self,
        services: ControllerServices,
        static_config: KafkaConfig,
        state_machines: StateMachineFactory,
        elections: ReplicaElections,
    ) -> None:
        self._s = services
        #: The config the broker was started with; ``services.config`` is the effective one.
        self.static_config = static_config
        self._state_machines = state_machines
        self._elections = elections
        #: The last read of each level (replaced, never mutated).
        self._dynamic_default: Mapping[str, str] = {}
        self._dynamic_per_broker: Mapping[str, str] = {}

    def load_dynamic_broker_configs(self) -> None:
        """Failover: read both levels and apply them (no side effects: failover builds the state
        machines and schedules the auto rebalance from the result)."""
        default, per_broker = self.read_dynamic_broker_configs()
        self.apply_dynamic_broker_configs(default, per_broker, failover=True)

    def read_dynamic_broker_configs(self) -> tuple[dict[str, str] | None, dict[str, str] | None]:
        """``/config/brokers/<default>`` and ``/config/brokers/<this id>`` in one batched read; a
        level that cannot be read (corrupt) is None: its last known value is kept."""
        keys = [(BROKER_CONFIG_TYPE, DEFAULT_BROKER_ENTITY), (BROKER_CONFIG_TYPE, str(self._s.controller_id))]
        reads = self._s.store.get_entity_configs(keys)
        out: list[dict[str, str] | None] = []
        for key in keys:
            read = reads.get(key, {})
            if isinstance(read, MetadataStoreError):
                log.error("Keeping the last known dynamic broker config %s/%s: %s", *key, read)
                out.append(None)
            else:
                out.append(read)
        return out[0], out[1]

    def process_dynamic_broker_config_change(
        self, cluster_default: Mapping[str, str] | None, per_broker: Mapping[str, str] | None
    ) -> None:
        self.apply_dynamic_broker_configs(cluster_default, per_broker, failover=False)

    def apply_dynamic_broker_configs(
        self,
        cluster_default: Mapping[str, str] | None,
        per_broker: Mapping[str, str] | None,
        *,
        failover: bool,
    ) -> None:
        if cluster_default is not None:
            self._dynamic_default = dict(cluster_default)
        if per_broker is not None:
            self._dynamic_per_broker = dict(per_broker)
        effective = effective_broker_config(
            self.static_config, self._dynamic_default, self._dynamic_per_broker
        )
        for what, reason in sorted(effective.ignored.items()):
            log.warning("Ignoring dynamic broker config %s: %s", what, reason)
        old, new = self._s.config, effective.config
        self._s.config = new
        if new != old:
            log.info(
                "Controller %d follows the dynamic broker configs: %s",
                self._s.controller_id,
                effective.describe(),
            )
        if failover:  # failover goes on to build the state machines and schedule from ``config``
            if any(s in (CLUSTER_DEFAULT, PER_BROKER) for s in effective.sources.values()):
                self._record(effective.describe())  # under the new epoch, even if already followed
            return
        if new == old:
            return
        change = config_transition(old, new)
        if self._s.is_active:
            self._record(effective.describe())
        if change.unclean_changed:
            # the partition state machine merges topic configs over it
            self._state_machines.build_state_machines()
        if change.unclean_enabled:
            self._s.enqueue(UncleanLeaderElectionEnable())  # Kafka's enableDefaultUncleanLeaderElection
        if change.rebalance_resumed and self._s.is_active and not self._s.is_auto_leader_rebalance_scheduled:
            # Not scheduled in this epoch (off when it began): start it as failover would have.
            self._elections.schedule_auto_leader_rebalance_task(AUTO_REBALANCE_FIRST_DELAY_S)

    def _record(self, detail: str) -> None:
        self._s.audit.record_controller_event("dynamic_config", self._s.clock.time_ms(), 0.0, detail)
