"""CreateTopics (19) v0-7, DeleteTopics (20) v0-6 and CreatePartitions (37) v0-3 on the ``kio``
extension point: decode into ``topic_admin`` values, answer with every version's own fields.

Kafka 2.8's handler rules live here (``KafkaApis``): only the active controller acts, others answer
NOT_CONTROLLER per topic; DeleteTopics names a topic by name (v0-5) or by name or id (v6), is
refused when ``delete.topic.enable`` is false (INVALID_REQUEST before v3, TOPIC_DELETION_DISABLED
after), and deletes only topics the metadata cache knows.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode as E

from kafka_controller.broker.kafka_wire.header import RequestHeader
from kafka_controller.broker.kafka_wire.kio_api import KioApi, response_schema
from kafka_controller.broker.kafka_wire.kio_build import (
    NO_THROTTLE,
    build,
    nested,
    timeout_ms,
    topic_id_from_uuid,
    topic_id_uuid,
)
from kafka_controller.broker.kafka_wire.log_configs import BrokerLevels, topic_config_entries
from kafka_controller.broker.kafka_wire.topic_admin import NewPartitions, NewTopic, Outcome, TopicAdmin

CREATE_TOPICS, DELETE_TOPICS, CREATE_PARTITIONS = 19, 20, 37


class TopicApis:
    def __init__(
        self,
        admin: TopicAdmin,
        delete_topic_enable: Callable[[], bool],
        broker_levels: Callable[[], BrokerLevels],
    ) -> None:
        self.admin = admin
        self.delete_topic_enable = delete_topic_enable
        self.broker_levels = broker_levels

    def apis(self) -> dict[int, KioApi]:
        return {
            CREATE_TOPICS: KioApi(CREATE_TOPICS, 0, 7, 5, self.create_topics),
            DELETE_TOPICS: KioApi(DELETE_TOPICS, 0, 6, 4, self.delete_topics),
            CREATE_PARTITIONS: KioApi(CREATE_PARTITIONS, 0, 3, 2, self.create_partitions),
        }

    # -- CreateTopics ------------------------------------------------------------------------------------
    def create_topics(self, header: RequestHeader, request: Any) -> Any:
        topics = [
            NewTopic(
                t.name,
                int(t.num_partitions),
                int(t.replication_factor),
                {int(a.partition_index): tuple(int(b) for b in a.broker_ids) for a in t.assignments},
                tuple((c.name, c.value) for c in t.configs),
            )
            for t in request.topics
        ]
        validate_only = bool(getattr(request, "validate_only", False))
        outcomes = self.admin.create_topics(topics, timeout_ms(request.timeout), validate_only)
        schema = response_schema(CREATE_TOPICS, header.api_version)
        levels = (
            self.broker_levels()
            if header.api_version >= 5 and any(o.configs is not None for o in outcomes)
            else None
        )
        results = tuple(self._created(schema, o, levels) for o in outcomes)
        return build(schema, throttle_time=NO_THROTTLE, topics=results)

    def _created(self, schema: type, o: Outcome, levels: BrokerLevels | None) -> Any:
        Result = nested(schema, "CreatableTopicResult")
        # Kafka's handleCreateTopicsResults: any error, REQUEST_TIMED_OUT included, resets the
        # partition count, replication factor and configs (v5+) to "unknown"; the topic id stays.
        ok = o.code == E.none and o.partitions is not None
        configs: tuple[Any, ...] = ()
        if ok and levels is not None and o.configs is not None:
            Config = nested(schema, "CreatableTopicConfigs")
            configs = tuple(
                Config(
                    name=e.name,
                    value=e.value,
                    read_only=e.read_only,
                    config_source=e.source,
                    is_sensitive=False,
                )
                for e in topic_config_entries(o.configs, levels)
            )
        partitions = o.partitions if ok and o.partitions else None
        return build(
            Result,
            name=o.name,
            topic_id=topic_id_uuid(o.topic_id),
            error_code=o.code,
            error_message=o.message,
            num_partitions=len(partitions) if partitions else -1,
            replication_factor=len(partitions[0]) if partitions else -1,
            configs=configs,
        )

    # -- DeleteTopics ------------------------------------------------------------------------------------
    def delete_topics(self, header: RequestHeader, request: Any) -> Any:
        v = header.api_version
        if v >= 6:
            asked = [(t.name, t.topic_id) for t in request.topics]
        else:
            asked = [(name, None) for name in request.topic_names]
        schema = response_schema(DELETE_TOPICS, v)
        Result = nested(schema, "DeletableTopicResult")

        def answer(rows: list[tuple[str | None, uuid.UUID | None, E, str | None]]) -> Any:
            results = tuple(
                build(Result, name=n, topic_id=tid, error_code=code, error_message=msg)
                for n, tid, code, msg in rows
            )
            return build(schema, throttle_time=NO_THROTTLE, responses=results)

        if not self.admin.is_controller():
            return answer([(n, tid, E.not_controller, None) for n, tid in asked])
        if not self.delete_topic_enable():
            code = E.invalid_request if v < 3 else E.topic_deletion_disabled
            return answer([(n, tid, code, None) for n, tid in asked])
        if any(n is not None and tid is not None for n, tid in asked):
            message = "Topic name and topic ID can not both be specified."
            return answer([(n, tid, E.invalid_request, message) for n, tid in asked])
        names_by_id = self.admin.cache.topic_names_by_id()
        rows: list[tuple[str | None, uuid.UUID | None, E, str | None]] = []
        to_delete: list[str] = []
        for name, tid in asked:
            if tid is not None:
                name = names_by_id.get(topic_id_from_uuid(tid))
                if name is None:
                    rows.append((None, tid, E.unknown_topic_id, None))
                    continue
            if name is None or not self.admin.cache.contains_topic(name):
                rows.append((name, tid, E.unknown_topic_or_partition, None))
                continue
            rows.append((name, tid, E.none, None))
            to_delete.append(name)
        if to_delete:
            done = self.admin.delete_topics(list(dict.fromkeys(to_delete)), timeout_ms(request.timeout))
            rows = [
                (n, tid, *done[n]) if code == E.none and n is not None else (n, tid, code, m)
                for n, tid, code, m in rows
            ]
        return answer(rows)

    # -- CreatePartitions --------------------------------------------------------------------------------
    def create_partitions(self, header: RequestHeader, request: Any) -> Any:
        topics = [
            NewPartitions(
                t.name,
                int(t.count),
                None
                if t.assignments is None
                else [tuple(int(b) for b in a.broker_ids) for a in t.assignments],
            )
            for t in request.topics
        ]
        results = self.admin.create_partitions(
            topics, timeout_ms(request.timeout), bool(request.validate_only)
        )
        schema = response_schema(CREATE_PARTITIONS, header.api_version)
        Result = nested(schema, "CreatePartitionsTopicResult")
        return build(
            schema,
            throttle_time=NO_THROTTLE,
            results=tuple(
                Result(name=name, error_code=code, error_message=message)
                for name, (code, message) in results.items()
            ),
        )
