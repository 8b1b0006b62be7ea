"""The admin APIs a broker answers through ``kio``: topics (``topic_apis``) and configs (``config_apis``),
and the topic auto-creation a Metadata request may ask for.

``admin_apis(server)`` reads what it needs from the broker lazily (the controller candidate and the
ZooKeeper session exist only later in start-up than the listener), so ``BrokerServer`` builds its
``KafkaProtocolHandler`` with one call.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from kafka_controller.broker.kafka_wire.config_apis import ConfigApis
from kafka_controller.broker.kafka_wire.kio_api import KioApi
from kafka_controller.broker.kafka_wire.scram_apis import ScramApis
from kafka_controller.broker.kafka_wire.topic_admin import TopicAdmin
from kafka_controller.broker.kafka_wire.topic_apis import TopicApis
from kafka_controller.broker.metadata_cache import MetadataCache
from kafka_controller.ports import MetadataStore


class _Broker(Protocol):
    store: MetadataStore | None
    metadata_cache: MetadataCache
    controller: Any
    config: Any  # BrokerConfig: .broker_id, .kafka (KafkaConfig)


def admin_apis(broker: _Broker) -> dict[int, KioApi]:
    """CreateTopics, DeleteTopics, CreatePartitions, DescribeConfigs, AlterConfigs,
    IncrementalAlterConfigs, SaslHandshake/SaslAuthenticate (after authentication) and
    Describe/AlterUserScramCredentials of ``broker``."""
    assert broker.store is not None
    kafka = broker.config.kafka

    def is_controller() -> bool:
        controller = broker.controller
        return controller is not None and bool(controller.is_active)

    configs = ConfigApis(broker.store, broker.metadata_cache, broker.config.broker_id, kafka.originals)
    topics = TopicApis(
        _topic_admin(broker, is_controller),
        lambda: bool(kafka.delete_topic_enable),
        lambda: configs.broker_levels()[0],
    )
    scram = ScramApis(broker.store, is_controller)  # type: ignore[arg-type]
    return {**topics.apis(), **configs.apis(), **scram.apis()}


def _topic_admin(broker: _Broker, is_controller: Callable[[], bool]) -> TopicAdmin:
    assert broker.store is not None
    kafka = broker.config.kafka
    return TopicAdmin(
        broker.store,
        broker.metadata_cache,
        is_controller,
        default_partitions=int(kafka.num_partitions),
        default_replication_factor=int(kafka.default_replication_factor),
    )


def auto_create_topics(broker: _Broker) -> Callable[[Sequence[str]], Mapping[str, int]] | None:
    """``KafkaProtocolHandler``'s ``auto_create``: None when ``auto.create.topics.enable`` is false;
    otherwise Kafka's auto-creation on this broker (any broker writes, as in ZooKeeper mode)."""
    if not broker.config.kafka.auto_create_topics_enable:
        return None
    admin = _topic_admin(broker, lambda: True)

    def create(names: Sequence[str]) -> Mapping[str, int]:
        return {name: int(code) for name, code in admin.auto_create(names).items()}

    return create
