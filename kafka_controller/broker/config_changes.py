"""Topic config change notifications, for the one setting the controller acts on (spec §8.13).

Kafka's brokers follow ``/config/changes`` (``DynamicConfigManager``); when a topic's overrides turn
``unclean.leader.election.enable`` on, the broker that is the active controller enqueues
``TopicUncleanLeaderElectionEnable(topic)`` so that offline partitions of that topic are elected at
once, without waiting for a controller change (KAFKA-6835). Other config keys need no broker action
here: the controller re-reads topic configs from ZooKeeper whenever it elects.

The watch callback only hands work to the broker's task thread; reading the notifications happens
there, batched.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from kafka_controller.domain.errors import KafkaControllerError
from kafka_controller.ports import MetadataStore, ZNodeEvent

log = logging.getLogger(__name__)

CONFIG_CHANGES_PATH = "/config/changes"
TOPIC_ENTITY_PREFIX = "topics/"
UNCLEAN_LEADER_ELECTION_ENABLE = "unclean.leader.election.enable"


class TopicConfigChangeListener:
    """Watches ``/config/changes``; for each new notification naming a topic whose config now
    enables unclean election, calls ``on_unclean_enabled(topic)``. Notifications present at start
    are taken as seen: the controller's start-up election already reads every topic's config."""

    def __init__(
        self,
        store: MetadataStore,
        submit: Callable[[Callable[[], None]], None],
        on_unclean_enabled: Callable[[str], object],
    ) -> None:
        self._store = store
        self._submit = submit
        self._on_unclean_enabled = on_unclean_enabled
        self._seen: set[str] = set()

    def start(self) -> None:
        self._seen = set(self._store.watch_children(CONFIG_CHANGES_PATH, self._on_watch))

    def stop(self) -> None:
        self._store.unwatch(CONFIG_CHANGES_PATH)

    def _on_watch(self, _event: ZNodeEvent) -> None:
        self._submit(self.process)  # callbacks only hand work over

    def process(self) -> None:
        """Re-arm the watch, read the new notifications (one batched read) and act on them."""
        try:
            children = self._store.watch_children(CONFIG_CHANGES_PATH, self._on_watch)
            new = sorted(set(children) - self._seen)
            self._seen = set(children)
            if not new:
                return
            topics: set[str] = set()
            for name, entity in zip(new, self._store.get_config_change_entity_paths(new), strict=True):
                if isinstance(entity, str):
                    if entity.startswith(TOPIC_ENTITY_PREFIX):
                        topics.add(entity[len(TOPIC_ENTITY_PREFIX) :])
                elif entity is not None:
                    log.warning("Ignoring config change notification %s: %s", name, entity)
            for topic in sorted(topics):
                value = self._store.get_topic_config(topic).get(UNCLEAN_LEADER_ELECTION_ENABLE, "")
                if value.strip().lower() == "true":
                    log.info("Unclean leader election enabled for topic %s", topic)
                    self._on_unclean_enabled(topic)
        except KafkaControllerError as e:
            log.warning("Could not process config change notifications: %s", e)
