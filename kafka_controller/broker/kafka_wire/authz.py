"""What Kafka 2.8's ``KafkaApis`` checks before each Kafka-protocol API, laid over the handlers.

``RequestAuthorization.wrap(apis)`` returns the same APIs, each behind the check Kafka makes
(``AuthHelper.authorize`` with the connection's principal and the client's IP, read from
``transport.server.current_connection()``):

=============================  ====================================  ===============================
API                            check                                 refused with
=============================  ====================================  ===============================
CreateTopics                   CREATE on CLUSTER, else on each topic  TOPIC_AUTHORIZATION_FAILED each
DeleteTopics                   DELETE on each topic                  TOPIC_AUTHORIZATION_FAILED each
CreatePartitions               ALTER on each topic                   TOPIC_AUTHORIZATION_FAILED each
DescribeConfigs                DESCRIBE_CONFIGS on topic / CLUSTER   TOPIC_/CLUSTER_... each resource
AlterConfigs, Incremental...   ALTER_CONFIGS on topic / CLUSTER      TOPIC_/CLUSTER_... each resource
ElectLeaders                   ALTER on CLUSTER                      CLUSTER_AUTHORIZATION_FAILED
AlterPartitionReassignments    ALTER on CLUSTER                      CLUSTER_AUTHORIZATION_FAILED
ListPartitionReassignments     DESCRIBE on CLUSTER                   CLUSTER_AUTHORIZATION_FAILED
Describe/AlterUserScram...     DESCRIBE / ALTER on CLUSTER           CLUSTER_AUTHORIZATION_FAILED
=============================  ====================================  ===============================

A per-item check splits the request as Kafka does: the refused items are answered with the error
and never reach the handler (nothing about them changes), the others are handled as before, and
the two answers are merged. Where Kafka answers a whole request before it looks at ACLs (this
broker is not the controller, or the request is malformed in a way the handler refuses whole),
the request goes to the handler unsplit. Metadata and DescribeCluster are checked in
``handler.KafkaProtocolHandler`` through ``allowed`` and ``operations``; the ACL APIs check
themselves (``acl_apis``). With no authorizer (``authorizer.class.name`` unset) nothing is wrapped.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from kio.schema.errors import ErrorCode as E
from kio.static.primitive import i16

from kafka_controller.broker.kafka_wire.error_responses import kio_error_response
from kafka_controller.broker.kafka_wire.header import RequestHeader
from kafka_controller.broker.kafka_wire.kio_api import KioApi, KioHandler
from kafka_controller.broker.kafka_wire.kio_build import topic_id_from_uuid
from kafka_controller.broker.kafka_wire.topic_checks import ApiException
from kafka_controller.broker.metadata_cache import MetadataCache
from kafka_controller.security.authorizer import (
    CLUSTER_NAME,
    SUPPORTED_OPERATIONS,
    AclOperation,
    Authorizer,
    ResourceType,
)
from kafka_controller.transport.connection import ANONYMOUS
from kafka_controller.transport.server import current_connection

CREATE_TOPICS, DELETE_TOPICS, CREATE_PARTITIONS = 19, 20, 37
DESCRIBE_CONFIGS, ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 32, 33, 44
ELECT_LEADERS, ALTER_PARTITION_REASSIGNMENTS, LIST_PARTITION_REASSIGNMENTS = 43, 45, 46
DESCRIBE_USER_SCRAM_CREDENTIALS, ALTER_USER_SCRAM_CREDENTIALS = 50, 51
#: Kafka's ``ConfigResource.Type`` codes whose ACLs live on CLUSTER (BROKER, BROKER_LOGGER) or a topic.
_TOPIC_CONFIG, _BROKER_CONFIG, _BROKER_LOGGER_CONFIG = 2, 4, 8
#: Kafka's default messages of the two errors (``Errors.java``).
TOPIC_AUTHORIZATION_FAILED_MESSAGE = "Topic authorization failed."
CLUSTER_AUTHORIZATION_FAILED_MESSAGE = "Cluster authorization failed."

#: An item's refusal, or None when it may go on.
Refusal = tuple[E, str | None] | None


def caller() -> tuple[str, str]:
    """The calling connection's principal and IP (``User:ANONYMOUS`` outside a connection)."""
    conn = current_connection()
    if conn is None:
        return ANONYMOUS, ""
    return conn.principal, conn.ip


class RequestAuthorization:
    """``authorizer`` None: every check passes (Kafka without ``authorizer.class.name``)."""

    def __init__(
        self,
        authorizer: Authorizer | None,
        cache: MetadataCache,
        is_controller: Callable[[], bool] = lambda: True,
    ) -> None:
        self.authorizer = authorizer
        self.cache = cache
        self.is_controller = is_controller

    @property
    def enabled(self) -> bool:
        return self.authorizer is not None

    def allowed(self, operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
        if self.authorizer is None:
            return True
        principal, host = caller()
        return self.authorizer.authorize(principal, host, operation, resource_type, name)

    def operations(self, resource_type: ResourceType, name: str) -> int:
        """The authorized-operations bitfield of the caller on a resource (all supported bits
        without an authorizer, as Kafka's ``AuthHelper`` reports when none is configured)."""
        if self.authorizer is None:
            return sum(1 << c for c in SUPPORTED_OPERATIONS.get(resource_type, ()))
        principal, host = caller()
        return self.authorizer.authorized_operations(principal, host, resource_type, name)

    def cluster_operations(self) -> int:
        """Metadata's / DescribeCluster's cluster bitfield: 0 without DESCRIBE on CLUSTER."""
        if not self.allowed(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
            return 0
        return self.operations(ResourceType.CLUSTER, CLUSTER_NAME)

    def cluster(self, operation: AclOperation) -> bool:
        return self.allowed(operation, ResourceType.CLUSTER, CLUSTER_NAME)

    # -- wrapping the APIs -------------------------------------------------------------------------
    def wrap(self, apis: dict[int, KioApi]) -> dict[int, KioApi]:
        if self.authorizer is None:
            return apis
        checks: dict[int, Callable[[KioHandler], KioHandler]] = {
            CREATE_TOPICS: self._create_topics,
            DELETE_TOPICS: self._delete_topics,
            CREATE_PARTITIONS: lambda h: self._split(
                h,
                CREATE_PARTITIONS,
                "topics",
                "results",
                lambda t: self._topic(AclOperation.ALTER, t.name, "The topic authorization is failed."),
            ),
            DESCRIBE_CONFIGS: lambda h: self._configs(
                h, DESCRIBE_CONFIGS, "results", AclOperation.DESCRIBE_CONFIGS
            ),
            ALTER_CONFIGS: lambda h: self._configs(h, ALTER_CONFIGS, "responses", AclOperation.ALTER_CONFIGS),
            INCREMENTAL_ALTER_CONFIGS: lambda h: self._configs(
                h, INCREMENTAL_ALTER_CONFIGS, "responses", AclOperation.ALTER_CONFIGS
            ),
            ELECT_LEADERS: lambda h: self._whole(h, AclOperation.ALTER),
            ALTER_PARTITION_REASSIGNMENTS: lambda h: self._whole(h, AclOperation.ALTER),
            LIST_PARTITION_REASSIGNMENTS: lambda h: self._whole(h, AclOperation.DESCRIBE),
            DESCRIBE_USER_SCRAM_CREDENTIALS: lambda h: self._whole(h, AclOperation.DESCRIBE),
            ALTER_USER_SCRAM_CREDENTIALS: lambda h: self._whole(h, AclOperation.ALTER),
        }
        out = dict(apis)
        for key, check in checks.items():
            api = apis.get(key)
            if api is not None:
                out[key] = dataclasses.replace(api, handle=check(api.handle))
        return out

    def _topic(
        self, operation: AclOperation, name: str | None, message: str = TOPIC_AUTHORIZATION_FAILED_MESSAGE
    ) -> Refusal:
        if name is not None and not self.allowed(operation, ResourceType.TOPIC, name):
            return E.topic_authorization_failed, message
        return None

    def _whole(self, inner: KioHandler, operation: AclOperation) -> KioHandler:
        """A cluster-level check: refused, the API's error response with CLUSTER_AUTHORIZATION_FAILED."""

        def handle(header: RequestHeader, request: Any) -> Any:
            if not self.cluster(operation):
                raise ApiException(E.cluster_authorization_failed, CLUSTER_AUTHORIZATION_FAILED_MESSAGE)
            return inner(header, request)

        return handle

    def _create_topics(self, inner: KioHandler) -> KioHandler:
        split = self._split(
            inner,
            CREATE_TOPICS,
            "topics",
            "topics",
            lambda t: self._topic(AclOperation.CREATE, t.name, "Authorization failed."),
            passthrough=lambda r: (
                not self.is_controller()
                or self.cluster(AclOperation.CREATE)
                or len({t.name for t in r.topics}) != len(r.topics)  # duplicates: INVALID_REQUEST first
            ),
        )

        def handle(header: RequestHeader, request: Any) -> Any:
            """Kafka also hides a created topic's configs from a caller without DESCRIBE_CONFIGS on it
            (v5+: ``topic_config_error_code`` TOPIC_AUTHORIZATION_FAILED, no configs)."""
            response = split(header, request)
            if header.api_version < 5:
                return response
            topics = tuple(
                dataclasses.replace(
                    t, topic_config_error_code=i16(E.topic_authorization_failed.value), configs=()
                )
                if t.error_code == E.none
                and not self.allowed(AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, t.name)
                else t
                for t in response.topics
            )
            return dataclasses.replace(response, topics=topics)

        return handle

    def _delete_topics(self, inner: KioHandler) -> KioHandler:
        def name_of(t: Any) -> str | None:
            if isinstance(t, str):
                return t
            if t.name is not None:
                return str(t.name)
            return self.cache.topic_names_by_id().get(topic_id_from_uuid(t.topic_id)) if t.topic_id else None

        def refuse(t: Any) -> Refusal:
            name = name_of(t)
            by_id = name is not None and not isinstance(t, str) and t.name is None
            if by_id and self._topic(AclOperation.DESCRIBE, name) is not None:  # by id: DESCRIBE first
                return E.topic_authorization_failed, TOPIC_AUTHORIZATION_FAILED_MESSAGE
            return self._topic(AclOperation.DELETE, name)

        def passthrough(r: Any) -> bool:
            if not self.is_controller():
                return True
            return any(t.name is not None and t.topic_id is not None for t in getattr(r, "topics", ()) or ())

        def handle(header: RequestHeader, request: Any) -> Any:
            field = "topics" if header.api_version >= 6 else "topic_names"
            return self._split(inner, DELETE_TOPICS, field, "responses", refuse, passthrough=passthrough)(
                header, request
            )

        return handle

    def _configs(self, inner: KioHandler, key: int, answers: str, operation: AclOperation) -> KioHandler:
        def refuse(r: Any) -> Refusal:
            rt = int(r.resource_type)
            if rt == _TOPIC_CONFIG:
                return self._topic(operation, r.resource_name)
            if rt in (_BROKER_CONFIG, _BROKER_LOGGER_CONFIG) and not self.cluster(operation):
                return E.cluster_authorization_failed, CLUSTER_AUTHORIZATION_FAILED_MESSAGE
            return None

        return self._split(inner, key, "resources", answers, refuse)

    @staticmethod
    def _split(
        inner: KioHandler,
        key: int,
        asked: str,
        answers: str,
        refuse: Callable[[Any], Refusal],
        *,
        passthrough: Callable[[Any], bool] = lambda _r: False,
    ) -> KioHandler:
        """Refused items answered with their error, the rest handled by ``inner``, merged."""

        def handle(header: RequestHeader, request: Any) -> Any:
            if passthrough(request):
                return inner(header, request)
            items: Sequence[Any] = getattr(request, asked) or ()
            kept: list[Any] = []
            refused: dict[tuple[E, str | None], list[Any]] = {}
            for item in items:
                why = refuse(item)
                if why is None:
                    kept.append(item)
                else:
                    refused.setdefault(why, []).append(item)
            if not refused:
                return inner(header, request)
            v = header.api_version
            if kept:
                response = inner(header, dataclasses.replace(request, **{asked: tuple(kept)}))
            else:
                response = kio_error_response(key, v, dataclasses.replace(request, **{asked: ()}), E.none)
            extra: list[Any] = []
            for (code, message), its in refused.items():
                error = kio_error_response(
                    key, v, dataclasses.replace(request, **{asked: tuple(its)}), code, message
                )
                extra.extend(getattr(error, answers))
            return dataclasses.replace(
                response, **{answers: tuple(getattr(response, answers)) + tuple(extra)}
            )

        return handle


__all__ = ["RequestAuthorization", "caller"]
