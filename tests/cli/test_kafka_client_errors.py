"""kafka-python's errors become one line with Kafka's error name, never a request's repr."""

from __future__ import annotations

import kafka.errors as errors

from kafka_controller.broker.kafka_admin import DESCRIBED_LIMIT, describe_kafka_error
from kafka_controller.cli.kafka_client import describe_error

_REFUSED = (
    "Request 'CreatePartitionsRequest_v1(topic_partitions=[CreatePartitionsTopic(name='events', "
    "count=3, assignments=None)], timeout_ms=30000, validate_only=False)' failed with response "
    "'CreatePartitionsResponse_v1(throttle_time_ms=0, results=[CreatePartitionsTopicResult("
    "name='events', error_code=37, error_message='Topic currently has 4 partitions, which is "
    "higher than the requested 3.')])'."
)


def test_a_refused_request_is_kafkas_name_and_the_brokers_message() -> None:
    line = describe_error(errors.InvalidPartitionsError(_REFUSED))
    assert (
        line == "INVALID_PARTITIONS: Topic currently has 4 partitions, which is higher than the requested 3."
    )


def test_a_refusal_without_a_message_gets_kafkas_description() -> None:
    line = describe_error(
        errors.PolicyViolationError("Request 'X_v0(a=1)' failed with response 'Y_v0(error_message=None)'.")
    )
    assert line == f"POLICY_VIOLATION: {errors.PolicyViolationError.description}"
    assert describe_error(errors.UnknownTopicOrPartitionError()).startswith("UNKNOWN_TOPIC_OR_PARTITION: ")


def test_the_admin_path_describes_errors_alike() -> None:
    """elect and reassign go through ``broker.kafka_admin``: the same one line."""
    assert describe_kafka_error(errors.InvalidPartitionsError(_REFUSED)).startswith(
        "INVALID_PARTITIONS: Topic"
    )


def test_client_side_errors_keep_their_class_name_on_one_bounded_line() -> None:
    assert (
        describe_error(errors.KafkaTimeoutError("Timeout after 100ms"))
        == "KafkaTimeoutError: Timeout after 100ms"
    )
    line = describe_error(errors.KafkaConnectionError("socket\ndisconnected " + "x" * 2000))
    assert "\n" not in line and len(line) <= len("KafkaConnectionError: ") + DESCRIBED_LIMIT
