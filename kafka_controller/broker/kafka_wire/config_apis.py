"""DescribeConfigs (32) v0-4, AlterConfigs (33) v0-2 and IncrementalAlterConfigs (44) v0-1, for topic
and broker entities, as Kafka 2.8's brokers answer them (``ConfigHelper``, ``ZkAdminManager``).

Any broker answers for a topic the metadata cache knows (else UNKNOWN_TOPIC_OR_PARTITION). A broker
entity is either the cluster default (name ``""``) or this broker's id; another id is
INVALID_REQUEST, as in Kafka (clients send a broker's configs to that broker). Writes go where
Kafka's ``AdminZkClient`` puts them: ``/config/topics/<t>`` or ``/config/brokers/<id|<default>>``,
then a ``/config/changes`` notification that the brokers follow (``config_changes``). AlterConfigs
replaces an entity's whole config; IncrementalAlterConfigs applies SET/DELETE/APPEND/SUBTRACT to
what ZooKeeper holds. A broker key Kafka knows but cannot change at run time is refused
("Cannot update these configs dynamically"); keys it does not know (throttle rates) pass.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kio.schema.errors import ErrorCode as E

from kafka_controller.broker.kafka_wire.header import RequestHeader
from kafka_controller.broker.kafka_wire.kio_api import KioApi, response_schema
from kafka_controller.broker.kafka_wire.kio_build import NO_THROTTLE, build, nested
from kafka_controller.broker.kafka_wire.log_configs import (
    DYNAMIC_BROKER_KEYS,
    LIST_CONFIGS,
    TOPIC_CONFIG_DEFS,
    BrokerLevels,
    ConfigEntry,
    broker_config_entries,
    default_broker_config_entries,
    select,
    topic_config_entries,
)
from kafka_controller.broker.kafka_wire.topic_checks import ApiException, check_topic_configs
from kafka_controller.broker.metadata_cache import MetadataCache
from kafka_controller.controller.config import KNOWN_KEYS, KafkaConfig
from kafka_controller.controller.dynamic_config import BROKER_CONFIG_TYPE, DEFAULT_BROKER_ENTITY
from kafka_controller.domain.errors import InvalidArgumentError, KafkaControllerError
from kafka_controller.ports import MetadataStore
from kafka_controller.zk.paths import validate_topic_name

log = logging.getLogger(__name__)

DESCRIBE_CONFIGS, ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 32, 33, 44
TOPIC, BROKER = 2, 4
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
_TYPE_NAMES = {TOPIC: "TOPIC", BROKER: "BROKER", 8: "BROKER_LOGGER"}
_SYNONYM_TOPIC_KEY = {d.broker_synonym: k for k, d in TOPIC_CONFIG_DEFS.items() if d.broker_synonym}

#: ``compute(current) -> new``: an entity's new config from what ZooKeeper holds.
Change = Callable[[dict[str, str]], dict[str, str]]


class ConfigApis:
    def __init__(
        self,
        store: MetadataStore,
        cache: MetadataCache,
        broker_id: int,
        static: Callable[[], Mapping[str, str]],
    ) -> None:
        self.store = store
        self.cache = cache
        self.broker_id = broker_id
        self.static = static

    def apis(self) -> dict[int, KioApi]:
        return {
            DESCRIBE_CONFIGS: KioApi(DESCRIBE_CONFIGS, 0, 4, 4, self.describe_configs),
            ALTER_CONFIGS: KioApi(ALTER_CONFIGS, 0, 2, 2, self.alter_configs),
            INCREMENTAL_ALTER_CONFIGS: KioApi(
                INCREMENTAL_ALTER_CONFIGS, 0, 1, 1, self.incremental_alter_configs
            ),
        }

    # -- reads -------------------------------------------------------------------------------------------
    def _read(self, entities: Sequence[tuple[str, str]]) -> dict[tuple[str, str], dict[str, str]]:
        out = {}
        for key, value in self.store.get_entity_configs(entities).items():
            if isinstance(value, Exception):
                raise ApiException(E.unknown_server_error, f"cannot read /config/{key[0]}/{key[1]}: {value}")
            out[key] = value
        return out

    def broker_levels(
        self, extra: Sequence[tuple[str, str]] = ()
    ) -> tuple[BrokerLevels, dict[tuple[str, str], dict[str, str]]]:
        default, own = (BROKER_CONFIG_TYPE, DEFAULT_BROKER_ENTITY), (BROKER_CONFIG_TYPE, str(self.broker_id))
        read = self._read([default, own, *extra])
        return BrokerLevels(read[own], read[default], dict(self.static())), read

    def _broker_entity(self, name: str | None, *, describing: bool) -> str:
        """``<default>`` or this broker's id, from a resource name (Kafka's ``getBrokerId``)."""
        if not name:
            return DEFAULT_BROKER_ENTITY
        try:
            broker_id = int(name)
        except ValueError:
            raise ApiException(
                E.invalid_request, f"Broker id must be an integer, but it is: {name}"
            ) from None
        if broker_id != self.broker_id:
            also = " or empty string" if describing else ""
            raise ApiException(
                E.invalid_request,
                f"Unexpected broker id, expected {self.broker_id}{also}, but received {name}",
            )
        return str(broker_id)

    # -- DescribeConfigs ---------------------------------------------------------------------------------
    def describe_configs(self, header: RequestHeader, request: Any) -> Any:
        v = header.api_version
        schema = response_schema(DESCRIBE_CONFIGS, v)
        Result, Entry = (
            nested(schema, "DescribeConfigsResult"),
            nested(schema, "DescribeConfigsResourceResult"),
        )
        Synonym = nested(schema, "DescribeConfigsSynonym") if v >= 1 else None
        synonyms_wanted = bool(getattr(request, "include_synonyms", False))
        results = []
        for r in request.resources:
            try:
                entries = select(self._describe(int(r.resource_type), r.resource_name), r.configuration_keys)
                code, message = E.none, None
            except ApiException as e:
                entries, code, message = [], e.code, e.message
            except KafkaControllerError as e:
                entries, code, message = [], E.unknown_server_error, str(e)

            def entry(e: ConfigEntry) -> Any:
                synonyms = (
                    tuple(Synonym(name=n, value=val, source=src) for n, val, src in e.synonyms)
                    if Synonym is not None and synonyms_wanted
                    else ()
                )
                return build(
                    Entry,
                    name=e.name,
                    value=e.value,
                    read_only=e.read_only,
                    is_default=e.is_default,
                    config_source=e.source,
                    is_sensitive=e.is_sensitive,
                    synonyms=synonyms,
                    config_type=e.type,
                    documentation=None,
                )

            results.append(
                Result(
                    error_code=code,
                    error_message=message,
                    resource_type=r.resource_type,
                    resource_name=r.resource_name,
                    configs=tuple(entry(e) for e in entries),
                )
            )
        return build(schema, throttle_time=NO_THROTTLE, results=tuple(results))

    def _describe(self, resource_type: int, name: str) -> list[ConfigEntry]:
        if resource_type == TOPIC:
            try:
                validate_topic_name(name)
            except InvalidArgumentError as e:
                raise ApiException(E.invalid_topic_exception, str(e)) from None
            if not self.cache.contains_topic(name):
                raise ApiException(E.unknown_topic_or_partition, None)
            key = ("topics", name)
            levels, read = self.broker_levels([key])
            return topic_config_entries(read[key], levels)
        if resource_type == BROKER:
            entity = self._broker_entity(name, describing=True)
            levels, _ = self.broker_levels()
            if entity == DEFAULT_BROKER_ENTITY:
                return default_broker_config_entries(levels.cluster_default)
            return broker_config_entries(levels)
        raise ApiException(
            E.invalid_request, f"Unsupported resource type: {_TYPE_NAMES.get(resource_type, 'UNKNOWN')}"
        )

    # -- AlterConfigs / IncrementalAlterConfigs ----------------------------------------------------------
    def alter_configs(self, header: RequestHeader, request: Any) -> Any:
        return self._alter_all(header, request, ALTER_CONFIGS, self._replace)

    def incremental_alter_configs(self, header: RequestHeader, request: Any) -> Any:
        return self._alter_all(header, request, INCREMENTAL_ALTER_CONFIGS, self._incremental)

    def _alter_all(
        self, header: RequestHeader, request: Any, key: int, change_of: Callable[[int, Any], Change]
    ) -> Any:
        schema = response_schema(key, header.api_version)
        Response = nested(schema, "AlterConfigsResourceResponse")
        responses = []
        for r in request.resources:
            try:
                self._alter(
                    int(r.resource_type),
                    r.resource_name,
                    change_of(int(r.resource_type), r),
                    bool(request.validate_only),
                )
                code, message = E.none, None
            except ApiException as e:
                code, message = e.code, e.message
            except KafkaControllerError as e:
                log.warning("Altering the configs of %s failed: %s", r.resource_name, e)
                code, message = E.unknown_server_error, str(e)
            responses.append(
                Response(
                    error_code=code,
                    error_message=message,
                    resource_type=r.resource_type,
                    resource_name=r.resource_name,
                )
            )
        return build(schema, throttle_time=NO_THROTTLE, responses=tuple(responses))

    @staticmethod
    def _replace(_resource_type: int, r: Any) -> Change:
        nulls = [c.name for c in r.configs if c.value is None]
        if nulls:
            raise ApiException(E.invalid_request, f"Null value not supported for : {','.join(nulls)}")
        given = {c.name: c.value for c in r.configs}
        return lambda _current: dict(given)

    @staticmethod
    def _incremental(resource_type: int, r: Any) -> Change:
        dupes = sorted(n for n, c in Counter(c.name for c in r.configs).items() if c > 1)
        if dupes:
            raise ApiException(E.invalid_request, f"Error due to duplicate config keys : {','.join(dupes)}")
        nulls = [
            f"{_OPS.get(int(c.config_operation), c.config_operation)}:{c.name}"
            for c in r.configs
            if c.value is None and int(c.config_operation) != DELETE
        ]
        if nulls:
            raise ApiException(E.invalid_request, f"Null value not supported for : {','.join(nulls)}")
        ops = [(int(c.config_operation), c.name, c.value) for c in r.configs]
        lists = LIST_CONFIGS if resource_type == TOPIC else frozenset({"log.cleanup.policy"})

        def apply(current: dict[str, str]) -> dict[str, str]:
            new = dict(current)
            for op, name, value in ops:
                if op == SET:
                    new[name] = value
                elif op == DELETE:
                    new.pop(name, None)
                elif op in (APPEND, SUBTRACT):
                    verb = "append" if op == APPEND else "subtract"
                    if resource_type == TOPIC and name not in TOPIC_CONFIG_DEFS:
                        raise ApiException(E.invalid_config, f"Unknown topic config name: {name}")
                    if name not in lists:
                        raise ApiException(
                            E.invalid_request, f"Config value {verb} is not allowed for config key: {name}"
                        )
                    # Kafka's prepareIncrementalConfigs: both start from the config's default
                    # list when the entity does not set it, and SUBTRACT is Scala's multiset
                    # ``diff`` (each item given removes one occurrence).
                    old = [x for x in new.get(name, _list_default(resource_type, name)).split(",") if x]
                    items = value.split(",")
                    new[name] = ",".join(old + items if op == APPEND else _multiset_diff(old, items))
                else:
                    raise ApiException(
                        E.invalid_request, f"Unknown config operation {op} for config key: {name}"
                    )
            return new

        return apply

    def _alter(self, resource_type: int, name: str, change: Change, validate_only: bool) -> None:
        if resource_type == TOPIC:
            if not self.cache.contains_topic(name):
                raise ApiException(E.unknown_topic_or_partition, f"The topic '{name}' does not exist.")
            current = self._read([("topics", name)])[("topics", name)]
            new = change(current)
            try:
                check_topic_configs(new, code=E.invalid_request)
            except ApiException as e:
                if e.code != E.invalid_request:
                    raise
                where = f"Invalid config value for resource ConfigResource(type=TOPIC, name='{name}'): "
                raise ApiException(e.code, where + (e.message or "")) from None
            if not validate_only:
                self.store.change_topic_config(name, new)
            return
        if resource_type == BROKER:
            entity = self._broker_entity(name, describing=False)
            key = (BROKER_CONFIG_TYPE, entity)
            new = change(self._read([key])[key])
            self._validate_broker(new, name)
            if not validate_only:
                self.store.set_or_create_entity_config(BROKER_CONFIG_TYPE, entity, new)
                self.store.create_config_change_notification(f"{BROKER_CONFIG_TYPE}/{entity}")
            return
        raise ApiException(
            E.invalid_request,
            "AlterConfigs is only supported for topics and brokers, but resource type is "
            f"{_TYPE_NAMES.get(resource_type, 'UNKNOWN')}",
        )

    def _validate_broker(self, config: Mapping[str, str], name: str) -> None:
        """Kafka's ``DynamicBrokerConfig.validate``: no known static-only key, every value parses."""
        where = f"Invalid config value for resource ConfigResource(type=BROKER, name='{name}'): "
        static_only = sorted(k for k in config if k in KNOWN_KEYS and k not in DYNAMIC_BROKER_KEYS)
        if static_only:
            raise ApiException(
                E.invalid_request,
                f"{where}Cannot update these configs dynamically: Set({', '.join(static_only)})",
            )
        for k, value in config.items():
            try:
                if k in KNOWN_KEYS:
                    KafkaConfig.of(self.broker_id, {k: value})
                elif k in _SYNONYM_TOPIC_KEY:
                    check_topic_configs({_SYNONYM_TOPIC_KEY[k]: value})
            except (InvalidArgumentError, ApiException) as e:
                raise ApiException(E.invalid_request, f"{where}{e}") from None


_OPS = {SET: "SET", DELETE: "DELETE", APPEND: "APPEND", SUBTRACT: "SUBTRACT"}


def _list_default(resource_type: int, name: str) -> str:
    """A list config's default: the topic config's (``LogConfig``), or for a broker the topic
    config it is the synonym of (``log.cleanup.policy`` -> ``cleanup.policy``'s ``delete``)."""
    key = name if resource_type == TOPIC else _SYNONYM_TOPIC_KEY.get(name, name)
    d = TOPIC_CONFIG_DEFS.get(key)
    return d.default if d is not None else ""


def _multiset_diff(old: list[str], items: list[str]) -> list[str]:
    left = Counter(items)
    out = []
    for x in old:
        if left[x] > 0:
            left[x] -= 1
        else:
            out.append(x)
    return out
