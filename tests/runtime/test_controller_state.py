"""ControllerState: Kafka 2.8's byte values and timer names (ControllerState.scala)."""

from __future__ import annotations

from kafka_controller.controller.controller_state import TIMED_STATES, ControllerState

KAFKA_2_8 = [
    "Idle",
    "ControllerChange",
    "BrokerChange",
    "TopicChange",
    "TopicDeletion",
    "AlterPartitionReassignment",
    "AutoLeaderBalance",
    "ManualLeaderBalance",
    "ControlledShutdown",
    "IsrChange",
    "LeaderAndIsrResponseReceived",
    "LogDirChange",
    "ControllerShutdown",
    "UncleanLeaderElectionEnable",
    "TopicUncleanLeaderElectionEnable",
    "ListPartitionReassignment",
    "UpdateMetadataResponseReceived",
    "UpdateFeatures",
]


def test_values_follow_kafkas_declaration_order() -> None:
    assert [(s.value, s.kafka_name) for s in ControllerState] == list(enumerate(KAFKA_2_8))


def test_timer_names_with_kafkas_two_historical_exceptions() -> None:
    names = {s.kafka_name: s.rate_and_time_metric_name for s in ControllerState}
    assert names["BrokerChange"] == "LeaderElectionRateAndTimeMs"
    assert names["AlterPartitionReassignment"] == "PartitionReassignmentRateAndTimeMs"
    assert names["Idle"] is None and names["UpdateMetadataResponseReceived"] is None
    others = set(KAFKA_2_8) - {
        "BrokerChange",
        "AlterPartitionReassignment",
        "Idle",
        "UpdateMetadataResponseReceived",
    }
    assert all(names[n] == f"{n}RateAndTimeMs" for n in others)
    assert len(TIMED_STATES) == len(KAFKA_2_8) - 2
