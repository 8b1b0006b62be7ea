"""``/config/changes`` notifications for the settings the controller acts on
(docs/controller-behaviour.md §8.13).

Kafka's brokers follow ``/config/changes`` (``DynamicConfigManager``). Two kinds of entity matter
to the controller:

* ``topics/<t>``: when a topic's overrides turn ``unclean.leader.election.enable`` on, the broker
  that is the active controller enqueues ``TopicUncleanLeaderElectionEnable(topic)`` so that
  offline partitions of that topic are elected at once (KAFKA-6835). Other topic keys need no
  action: the controller re-reads topic configs whenever it elects.
* ``brokers/<default>`` and ``brokers/<this broker id>`` (Kafka's ``BrokerConfigHandler``; other
  brokers' entities are theirs): both levels are handed to this broker's controller candidate,
  which recomputes its effective config (``kafka_controller.controller.dynamic_config``: which keys
  are followed, with what precedence, and the ``auto.leader.rebalance.enable`` deviation).
* ``users/<sanitized name>`` (Kafka's ``UserConfigHandler`` feeding its ``CredentialProvider``):
  the user's config is read and handed to ``on_user_config`` (the broker's SCRAM credential
  cache), so a user added or changed on any broker is accepted by every broker without a restart;
  ``load_users`` reads every user once when the watch is armed (a change made before then has no
  notification left to see).

The watch callback only hands work to the broker's task thread; there the new notifications and
then every entity they name are read, each in one batched read. Notifications whose processing
failed (ZooKeeper unavailable) are not marked seen, so the next notification retries them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from kafka_controller.controller.dynamic_config import BROKER_CONFIG_TYPE, DEFAULT_BROKER_ENTITY
from kafka_controller.domain.config_keys import UNCLEAN_LEADER_ELECTION_ENABLE
from kafka_controller.domain.errors import KafkaControllerError, MetadataStoreError
from kafka_controller.ports import MetadataStore, ZNodeEvent

log = logging.getLogger(__name__)

CONFIG_CHANGES_PATH = "/config/changes"
TOPIC_CONFIG_TYPE = "topics"
USER_CONFIG_TYPE = "users"

#: ``(cluster default, this broker's)`` configs as read; None for a level that could not be read.
BrokerConfigCallback = Callable[[Mapping[str, str] | None, Mapping[str, str] | None], object]


class ConfigChangeListener:
    """Watches ``/config/changes``. For each new notification naming a topic whose config now
    enables unclean election, calls ``on_unclean_enabled(topic)``; when notifications name the
    cluster-default or this broker's dynamic config, calls ``on_broker_config(default, own)`` once.
    Notifications present at start are taken as seen: the controller reads topic configs when it
    elects, and ``start`` reads both broker levels once."""

    def __init__(
        self,
        store: MetadataStore,
        submit: Callable[[Callable[[], None]], None],
        on_unclean_enabled: Callable[[str], object],
        *,
        broker_id: int | None = None,
        on_broker_config: BrokerConfigCallback | None = None,
        on_topic_config: Callable[[str, dict[str, str]], object] | None = None,
        on_user_config: Callable[[str, dict[str, str]], object] | None = None,
        load_users: Callable[[], object] | None = None,
    ) -> None:
        self._on_user_config = on_user_config
        self._load_users = load_users
        self._store = store
        self._on_topic_config = on_topic_config  # every changed topic's config (min ISR metrics)
        self._submit = submit
        self._on_unclean_enabled = on_unclean_enabled
        self._on_broker_config = on_broker_config
        self._broker_entities: tuple[tuple[str, str], ...] = (
            ((BROKER_CONFIG_TYPE, DEFAULT_BROKER_ENTITY), (BROKER_CONFIG_TYPE, str(broker_id)))
            if broker_id is not None and on_broker_config is not None
            else ()
        )
        self._seen: set[str] = set()

    def start(self) -> None:
        self._seen = set(self._store.watch_children(CONFIG_CHANGES_PATH, self._on_watch))
        if self._broker_entities:
            # Kafka's DynamicBrokerConfig.initialize: a change made before the watch was armed
            # has no notification left to see, so read both levels once now.
            self._submit(self.sync_broker_configs)
        if self._load_users is not None:
            self._submit(self.sync_users)

    def sync_users(self) -> None:
        """Read every user's config once (Kafka's start-up pass over ``/config/users``)."""
        if self._load_users is None:
            return
        try:
            self._load_users()
        except KafkaControllerError as e:
            log.warning("Could not read the users' SCRAM credentials: %s", e)

    def sync_broker_configs(self) -> None:
        """Read both broker levels (one batched read) and hand them over."""
        try:
            self._hand_over(self._store.get_entity_configs(self._broker_entities))
        except KafkaControllerError as e:
            log.warning("Could not read the dynamic broker configs: %s", e)

    def stop(self) -> None:
        self._store.unwatch(CONFIG_CHANGES_PATH)

    def _on_watch(self, _event: ZNodeEvent) -> None:
        self._submit(self.process)  # callbacks only hand work over

    def process(self) -> None:
        """Re-arm the watch, read the new notifications and the entities they name (one batched
        read each) and act on them."""
        try:
            children = self._store.watch_children(CONFIG_CHANGES_PATH, self._on_watch)
            new = sorted(set(children) - self._seen)
            if new:
                self._act(new)
            self._seen = set(children)
        except KafkaControllerError as e:
            log.warning("Could not process config change notifications: %s", e)

    def _act(self, notifications: list[str]) -> None:
        topics: set[str] = set()
        users: set[str] = set()
        brokers_changed = False
        paths = self._store.get_config_change_entity_paths(notifications)
        for name, entity in zip(notifications, paths, strict=True):
            if isinstance(entity, str):
                entity_type, _, entity_name = entity.partition("/")
                if entity_type == TOPIC_CONFIG_TYPE and entity_name:
                    topics.add(entity_name)
                elif entity_type == USER_CONFIG_TYPE and entity_name and "/" not in entity_name:
                    if self._on_user_config is not None:  # users/<u>/clients/<c>: quotas, not ours
                        users.add(entity_name)
                elif (entity_type, entity_name) in self._broker_entities:
                    brokers_changed = True
            elif entity is not None:
                log.warning("Ignoring config change notification %s: %s", name, entity)
        wanted = [(TOPIC_CONFIG_TYPE, t) for t in sorted(topics)]
        wanted += [(USER_CONFIG_TYPE, u) for u in sorted(users)]
        if brokers_changed:
            wanted += self._broker_entities
        if not wanted:
            return
        configs = self._store.get_entity_configs(wanted)
        for topic in sorted(topics):
            config = configs[(TOPIC_CONFIG_TYPE, topic)]
            if isinstance(config, MetadataStoreError):
                log.warning("Cannot read the config of topic %s: %s", topic, config)
                continue
            if self._on_topic_config is not None:
                self._on_topic_config(topic, config)
            if config.get(UNCLEAN_LEADER_ELECTION_ENABLE, "").strip().lower() == "true":
                log.info("Unclean leader election enabled for topic %s", topic)
                self._on_unclean_enabled(topic)
        for user in sorted(users):
            config = configs[(USER_CONFIG_TYPE, user)]
            if isinstance(config, MetadataStoreError):
                log.warning("Cannot read the config of user %s: %s", user, config)
            elif self._on_user_config is not None:
                self._on_user_config(user, config)
        if brokers_changed:
            self._hand_over(configs)

    def _hand_over(self, configs: Mapping[tuple[str, str], dict[str, str] | MetadataStoreError]) -> None:
        levels: list[dict[str, str] | None] = []
        for key in self._broker_entities:
            config = configs[key]
            if isinstance(config, MetadataStoreError):
                log.warning("Cannot read dynamic broker config %s/%s: %s", *key, config)
                levels.append(None)
            else:
                levels.append(config)
        if self._on_broker_config is not None:
            self._on_broker_config(levels[0], levels[1])


#: The name this listener had when it followed topics only.
TopicConfigChangeListener = ConfigChangeListener
