"""The controller's states with Kafka 2.8's byte values and rate-and-time metric names
(docs/controller-behaviour.md §8.1; Kafka's ``ControllerState.scala``).

The ``ControllerState`` gauge reports ``value`` of the state whose event is being processed, and
each state but Idle and UpdateMetadataResponseReceived has a ``<Name>RateAndTimeMs`` timer. Two
names are historical and kept by Kafka for compatibility: BrokerChange times into
``LeaderElectionRateAndTimeMs`` and AlterPartitionReassignment into
``PartitionReassignmentRateAndTimeMs`` (Kafka ``ControllerState.scala``). Renaming a member here
would rename a public metric.
"""

from __future__ import annotations

from enum import Enum


class ControllerState(Enum):
    IDLE = 0
    CONTROLLER_CHANGE = 1
    BROKER_CHANGE = 2
    TOPIC_CHANGE = 3
    TOPIC_DELETION = 4
    ALTER_PARTITION_REASSIGNMENT = 5
    AUTO_LEADER_BALANCE = 6
    MANUAL_LEADER_BALANCE = 7
    CONTROLLED_SHUTDOWN = 8
    ISR_CHANGE = 9
    LEADER_AND_ISR_RESPONSE_RECEIVED = 10
    LOG_DIR_CHANGE = 11
    CONTROLLER_SHUTDOWN = 12
    UNCLEAN_LEADER_ELECTION_ENABLE = 13
    TOPIC_UNCLEAN_LEADER_ELECTION_ENABLE = 14
    LIST_PARTITION_REASSIGNMENT = 15
    UPDATE_METADATA_RESPONSE_RECEIVED = 16
    UPDATE_FEATURES = 17

    @property
    def kafka_name(self) -> str:
        """Kafka's case-object name, e.g. ``BrokerChange``."""
        return "".join(word.capitalize() for word in self.name.split("_"))

    @property
    def rate_and_time_metric_name(self) -> str | None:
        """The timer's MBean ``name=`` value, or ``None`` for states without a timer."""
        if self in _NO_TIMER:
            return None
        return _RENAMED_TIMERS.get(self, f"{self.kafka_name}RateAndTimeMs")

    def __str__(self) -> str:
        return self.kafka_name


_NO_TIMER = frozenset({ControllerState.IDLE, ControllerState.UPDATE_METADATA_RESPONSE_RECEIVED})
_RENAMED_TIMERS = {
    ControllerState.BROKER_CHANGE: "LeaderElectionRateAndTimeMs",
    ControllerState.ALTER_PARTITION_REASSIGNMENT: "PartitionReassignmentRateAndTimeMs",
}

#: The states that have a rate-and-time timer, in value order.
TIMED_STATES: tuple[ControllerState, ...] = tuple(
    s for s in ControllerState if s.rate_and_time_metric_name is not None
)
