"""The controller's entry points for other threads
(docs/controller-behaviour.md §8.7, §8.8, §8.11, §8.12, §8.13): admin requests,
controlled shutdown and AlterIsr from brokers, unclean-election enables and dynamic broker configs
from config changes.

Each validates its arguments on the caller's thread (a bad one raises ``InvalidArgumentError``
naming it, and nothing is queued), then only enqueues: the work happens on the event thread, and
the answer comes through ``callback``, called exactly once on that thread (or on the thread that
preempts the event). ``operation_id`` is the audit store's operation that caused the request; every
transition the request leads to is recorded with it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from kafka_controller.controller import events as ev
from kafka_controller.controller.event_manager import QueuedEvent
from kafka_controller.controller.services import ControllerServices
from kafka_controller.domain.errors import InvalidArgumentError
from kafka_controller.domain.values import LeaderAndIsr, TopicPartition


class ControllerApi:
    """The public entry points of ``KafkaController`` (it hands these bound methods out as its
    own): validate on the caller's thread, then enqueue."""

    def __init__(self, services: ControllerServices) -> None:
        self._s = services

    def elect_leaders(
        self,
        partitions: Collection[TopicPartition] | None,
        election_type: ev.ElectionType | str,
        callback: ev.ElectLeadersCallback,
        operation_id: str | None = None,
    ) -> QueuedEvent:
        """ElectLeaders (KIP-460). ``partitions`` None = every partition. UNCLEAN from here may
        really elect an out-of-sync replica (only the admin API can)."""
        etype = ev.ElectionType.parse(election_type)
        parts = None if partitions is None else _partitions_arg(partitions)
        return self._s.event_manager.put(
            ev.ReplicaLeaderElection(
                parts, etype, ev.ElectionTrigger.ADMIN_CLIENT_TRIGGERED, callback, operation_id
            )
        )

    def alter_partition_reassignments(
        self,
        reassignments: Mapping[TopicPartition, Sequence[int] | None],
        callback: ev.AlterReassignmentsCallback,
        operation_id: str | None = None,
    ) -> QueuedEvent:
        """AlterPartitionReassignments (KIP-455): a target replica list per partition, None cancels."""
        checked: dict[TopicPartition, tuple[int, ...] | None] = {}
        for tp, target in reassignments.items():
            _partitions_arg([tp])
            if target is not None:
                if isinstance(target, str | bytes) or not all(_is_int(r) for r in target):
                    raise InvalidArgumentError(
                        f"reassignment of {tp}: replicas must be broker ids, got {target!r}"
                    )
                checked[tp] = tuple(target)
            else:
                checked[tp] = None
        return self._s.event_manager.put(ev.ApiPartitionReassignment(checked, callback, operation_id))

    def list_partition_reassignments(
        self,
        partitions: Collection[TopicPartition] | None,
        callback: ev.ListReassignmentsCallback,
        operation_id: str | None = None,
    ) -> QueuedEvent:
        parts = None if partitions is None else _partitions_arg(partitions)
        return self._s.event_manager.put(ev.ListPartitionReassignments(parts, callback, operation_id))

    def describe_controller_context(self, callback: ev.DescribeControllerContextCallback) -> QueuedEvent:
        """DescribeControllerContext (not Kafka's): ``callback`` gets the whole context as the
        columnar document of ``core.context_description``, or NOT_CONTROLLER."""
        return self._s.event_manager.put(ev.DescribeControllerContext(callback))

    def controlled_shutdown(
        self,
        broker_id: int,
        broker_epoch: int,
        callback: ev.ControlledShutdownCallback,
        operation_id: str | None = None,
    ) -> QueuedEvent:
        """The broker asks to stop; ``callback`` gets the partitions it still leads (retry while
        non-empty), or the error (StaleBrokerEpochError, BrokerNotAvailableError, ControllerMovedError)."""
        if not _is_int(broker_id) or not _is_int(broker_epoch):
            raise InvalidArgumentError(
                f"controlled shutdown: broker id and epoch must be integers, got "
                f"{broker_id!r}, {broker_epoch!r}"
            )
        return self._s.event_manager.put(
            ev.ControlledShutdown(broker_id, broker_epoch, callback, operation_id)
        )

    def alter_isr(
        self,
        broker_id: int,
        broker_epoch: int,
        isrs: Mapping[TopicPartition, LeaderAndIsr],
        callback: ev.AlterIsrCallback,
        operation_id: str | None = None,
    ) -> QueuedEvent:
        """AlterIsr (KIP-497) from leader ``broker_id``: per partition its leader epoch, the new
        ISR and the zk version it last saw."""
        if not _is_int(broker_id) or not _is_int(broker_epoch):
            raise InvalidArgumentError(
                f"AlterIsr: broker id and epoch must be integers, got {broker_id!r}, {broker_epoch!r}"
            )
        for tp, lai in isrs.items():
            _partitions_arg([tp])
            if not isinstance(lai, LeaderAndIsr):
                raise InvalidArgumentError(f"AlterIsr for {tp}: expected a LeaderAndIsr, got {lai!r}")
        return self._s.event_manager.put(
            ev.AlterIsrReceived(broker_id, broker_epoch, dict(isrs), callback, operation_id)
        )

    def enable_default_unclean_leader_election(self) -> QueuedEvent:
        return self._s.event_manager.put(ev.UncleanLeaderElectionEnable())

    def update_dynamic_broker_configs(
        self, cluster_default: Mapping[str, str] | None, per_broker: Mapping[str, str] | None
    ) -> QueuedEvent:
        """``/config/brokers/<default>`` and ``/config/brokers/<this id>`` as just read (None: a level
        that could not be read, keep the last known). Every controller candidate follows them."""
        checked = [
            _config_arg(name, c)
            for name, c in (("cluster default", cluster_default), ("per-broker", per_broker))
        ]
        return self._s.event_manager.put(ev.DynamicBrokerConfigChange(checked[0], checked[1]))

    def enable_topic_unclean_leader_election(self, topic: str) -> QueuedEvent | None:
        """Called when a topic's config enables unclean election; acts only on the active controller."""
        if not isinstance(topic, str) or not topic:
            raise InvalidArgumentError(f"expected a topic name, got {topic!r}")
        if not self._s.is_active:
            return None
        return self._s.event_manager.put(ev.TopicUncleanLeaderElectionEnable(topic))


def _config_arg(level: str, config: Mapping[str, str] | None) -> dict[str, str] | None:
    if config is None:
        return None
    if not isinstance(config, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in config.items()
    ):
        raise InvalidArgumentError(f"{level} broker config must map strings to strings, got {config!r}")
    return dict(config)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _partitions_arg(partitions: Collection[TopicPartition]) -> list[TopicPartition]:
    if isinstance(partitions, str | bytes):
        raise InvalidArgumentError(f"expected a collection of TopicPartition, got the string {partitions!r}")
    out = list(dict.fromkeys(partitions))
    for tp in out:
        if not isinstance(tp, TopicPartition):
            raise InvalidArgumentError(f"expected a TopicPartition, got {tp!r}")
    return out
