"""What a broker answers when handling a decoded request fails unexpectedly: Kafka's
``AbstractRequest.getErrorResponse``, one per API.

Kafka's ``KafkaApis.handle`` catches whatever a handler throws and answers the request with that
API's error response (``RequestHandlerHelper.handleError``), so a client learns UNKNOWN_SERVER_ERROR
for each topic, resource or partition it asked about, or at the top level where the response has
no per-item errors; the connection stays open. Only a request that cannot be parsed closes it.
As ``ApiError.fromThrowable`` does for an unexpected exception, the message is left out (nothing
of the server's internals leaks), except DescribeConfigs, whose error response carries the
error's generic text. A handler that raises ``topic_checks.ApiException`` (Kafka's ``ApiException``,
say an authorization failure) is answered the same way with that error's code and message.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode as E
from kio.static.primitive import i32, i64Timedelta

from kafka_controller.broker.kafka_wire import api_versions as av
from kafka_controller.broker.kafka_wire import describe_cluster as dc
from kafka_controller.broker.kafka_wire import metadata as md
from kafka_controller.broker.kafka_wire.kio_api import response_schema
from kafka_controller.broker.kafka_wire.kio_build import NO_THROTTLE, build, nested

_NO_LIFETIME = i64Timedelta.parse(datetime.timedelta(0))
#: Kafka's ``Errors.UNKNOWN_SERVER_ERROR.message()``.
UNKNOWN_SERVER_ERROR_MESSAGE = "The server experienced an unexpected error when processing the request."

CREATE_TOPICS, DELETE_TOPICS, CREATE_PARTITIONS = 19, 20, 37
DESCRIBE_CONFIGS, ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 32, 33, 44
ELECT_LEADERS, ALTER_PARTITION_REASSIGNMENTS, LIST_PARTITION_REASSIGNMENTS = 43, 45, 46
SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
DESCRIBE_USER_SCRAM_CREDENTIALS, ALTER_USER_SCRAM_CREDENTIALS = 50, 51


def _create_topics(v: int, request: Any, code: E, message: str | None) -> Any:
    schema = response_schema(CREATE_TOPICS, v)
    Result = nested(schema, "CreatableTopicResult")
    topics = tuple(
        build(
            Result,
            name=t.name,
            topic_id=None,
            error_code=code,
            error_message=message,
            num_partitions=-1,
            replication_factor=-1,
            configs=(),
        )
        for t in request.topics
    )
    return build(schema, throttle_time=NO_THROTTLE, topics=topics)


def _delete_topics(v: int, request: Any, code: E, message: str | None) -> Any:
    schema = response_schema(DELETE_TOPICS, v)
    Result = nested(schema, "DeletableTopicResult")
    asked = (
        [(t.name, t.topic_id) for t in request.topics] if v >= 6 else [(n, None) for n in request.topic_names]
    )
    responses = tuple(
        build(Result, name=name, topic_id=tid, error_code=code, error_message=message) for name, tid in asked
    )
    return build(schema, throttle_time=NO_THROTTLE, responses=responses)


def _create_partitions(v: int, request: Any, code: E, message: str | None) -> Any:
    schema = response_schema(CREATE_PARTITIONS, v)
    Result = nested(schema, "CreatePartitionsTopicResult")
    results = tuple(Result(name=t.name, error_code=code, error_message=message) for t in request.topics)
    return build(schema, throttle_time=NO_THROTTLE, results=results)


def _describe_configs(v: int, request: Any, code: E, message: str | None) -> Any:
    schema = response_schema(DESCRIBE_CONFIGS, v)
    Result = nested(schema, "DescribeConfigsResult")
    results = tuple(
        Result(
            error_code=code,
            error_message=message or UNKNOWN_SERVER_ERROR_MESSAGE,
            resource_type=r.resource_type,
            resource_name=r.resource_name,
            configs=(),
        )
        for r in request.resources
    )
    return build(schema, throttle_time=NO_THROTTLE, results=results)


def _alter_configs(api_key: int) -> Callable[[int, Any, E, str | None], Any]:
    def answer(v: int, request: Any, code: E, message: str | None) -> Any:
        schema = response_schema(api_key, v)
        Response = nested(schema, "AlterConfigsResourceResponse")
        responses = tuple(
            Response(
                error_code=code,
                error_message=message,
                resource_type=r.resource_type,
                resource_name=r.resource_name,
            )
            for r in request.resources
        )
        return build(schema, throttle_time=NO_THROTTLE, responses=responses)

    return answer


def _elect_leaders(v: int, request: Any, code: E, message: str | None) -> Any:
    schema = response_schema(ELECT_LEADERS, v)
    Topic, Partition = nested(schema, "ReplicaElectionResult"), nested(schema, "PartitionResult")
    results = tuple(
        Topic(
            topic=t.topic,
            partition_result=tuple(
                Partition(partition_id=p, error_code=code, error_message=message) for p in t.partitions
            ),
        )
        for t in request.topic_partitions or ()
    )
    return build(schema, throttle_time=NO_THROTTLE, error_code=code, replica_election_results=results)


def _alter_reassignments(v: int, request: Any, code: E, message: str | None) -> Any:
    schema = response_schema(ALTER_PARTITION_REASSIGNMENTS, v)
    Topic, Partition = (
        nested(schema, "ReassignableTopicResponse"),
        nested(schema, "ReassignablePartitionResponse"),
    )
    responses = tuple(
        Topic(
            name=t.name,
            partitions=tuple(
                Partition(partition_index=p.partition_index, error_code=code, error_message=message)
                for p in t.partitions
            ),
        )
        for t in request.topics
    )
    return schema(throttle_time=NO_THROTTLE, error_code=code, error_message=message, responses=responses)


def _list_reassignments(v: int, request: Any, code: E, message: str | None) -> Any:
    schema = response_schema(LIST_PARTITION_REASSIGNMENTS, v)
    Topic, Partition = (
        nested(schema, "OngoingTopicReassignment"),
        nested(schema, "OngoingPartitionReassignment"),
    )
    topics = tuple(
        Topic(
            name=t.name, partitions=tuple(Partition(partition_index=i32(int(p))) for p in t.partition_indexes)
        )
        for t in request.topics or ()
    )
    return schema(throttle_time=NO_THROTTLE, error_code=code, error_message=message, topics=topics)


def _sasl_handshake(v: int, request: Any, code: E, message: str | None) -> Any:
    return response_schema(SASL_HANDSHAKE, v)(error_code=code, mechanisms=())


def _sasl_authenticate(v: int, request: Any, code: E, message: str | None) -> Any:
    schema = response_schema(SASL_AUTHENTICATE, v)
    return build(
        schema, error_code=code, error_message=message, auth_bytes=b"", session_lifetime=_NO_LIFETIME
    )


def _describe_scram(v: int, request: Any, code: E, message: str | None) -> Any:
    schema = response_schema(DESCRIBE_USER_SCRAM_CREDENTIALS, v)
    return schema(throttle_time=NO_THROTTLE, error_code=code, error_message=message, results=())


def _alter_scram(v: int, request: Any, code: E, message: str | None) -> Any:
    schema = response_schema(ALTER_USER_SCRAM_CREDENTIALS, v)
    Result = nested(schema, "AlterUserScramCredentialsResult")
    users = sorted({d.name for d in request.deletions} | {u.name for u in request.upsertions})
    results = tuple(Result(user=u, error_code=code, error_message=message) for u in users)
    return schema(throttle_time=NO_THROTTLE, results=results)


_KIO: dict[int, Callable[[int, Any, E, str | None], Any]] = {
    CREATE_TOPICS: _create_topics,
    DELETE_TOPICS: _delete_topics,
    CREATE_PARTITIONS: _create_partitions,
    DESCRIBE_CONFIGS: _describe_configs,
    ALTER_CONFIGS: _alter_configs(ALTER_CONFIGS),
    INCREMENTAL_ALTER_CONFIGS: _alter_configs(INCREMENTAL_ALTER_CONFIGS),
    ELECT_LEADERS: _elect_leaders,
    ALTER_PARTITION_REASSIGNMENTS: _alter_reassignments,
    LIST_PARTITION_REASSIGNMENTS: _list_reassignments,
    SASL_HANDSHAKE: _sasl_handshake,
    SASL_AUTHENTICATE: _sasl_authenticate,
    DESCRIBE_USER_SCRAM_CREDENTIALS: _describe_scram,
    ALTER_USER_SCRAM_CREDENTIALS: _alter_scram,
}


def kio_error_response(
    api_key: int, version: int, request: Any, code: E = E.unknown_server_error, message: str | None = None
) -> Any:
    """The ``kio`` response entity answering ``request`` with ``code`` (and ``message``, where the
    API carries one) everywhere Kafka puts it; None for an API without one (the caller then closes
    the connection)."""
    builder = _KIO.get(api_key)
    return None if builder is None else builder(version, request, code, message)


def metadata_error_response(request: md.MetadataRequest, code: int) -> md.MetadataResponse:
    """``MetadataRequest.getErrorResponse``: no brokers, no controller, each topic asked with ``code``."""
    topics = tuple(
        md.MetadataTopic(code, t.name if t.name is not None else "", topic_id=t.topic_id)
        for t in request.topics or ()
    )
    return md.MetadataResponse((), None, -1, topics)


def api_versions_error_response(code: int) -> av.ApiVersionsResponse:
    return av.ApiVersionsResponse(code, ())


def describe_cluster_error_response(code: int) -> dc.DescribeClusterResponse:
    return dc.DescribeClusterResponse(code, None, "", -1, ())
