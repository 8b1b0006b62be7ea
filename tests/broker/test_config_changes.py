"""The broker's /config/changes listener (spec §8.13) on the in-memory store."""

from __future__ import annotations

import threading

from kafka_controller.broker.config_changes import TopicConfigChangeListener
from kafka_controller.testing.memory_store import InMemoryMetadataStore
from kafka_controller.testing.zk_harness import wait_for


def _listener(store: InMemoryMetadataStore) -> tuple[TopicConfigChangeListener, list[str]]:
    enabled: list[str] = []
    lock = threading.Lock()

    def submit(task: object) -> None:
        with lock:  # the broker runs tasks on one thread; keep that here
            task()  # type: ignore[operator]

    listener = TopicConfigChangeListener(store, submit, enabled.append)
    listener.start()
    return listener, enabled


def test_enabling_unclean_election_in_a_topic_config_notifies_the_controller() -> None:
    store = InMemoryMetadataStore()
    listener, enabled = _listener(store)
    store.change_topic_config("t", {"retention.ms": "1000"})
    store.change_topic_config("t", {"unclean.leader.election.enable": "TRUE"})
    wait_for(lambda: enabled == ["t"], timeout=10.0, message="the listener to report topic t")
    listener.process()  # nothing new: nothing reported twice
    assert enabled == ["t"]


def test_notifications_present_at_start_are_taken_as_seen() -> None:
    store = InMemoryMetadataStore()
    store.change_topic_config("old", {"unclean.leader.election.enable": "true"})
    listener, enabled = _listener(store)
    listener.process()
    assert enabled == []
    store.change_topic_config("new", {"unclean.leader.election.enable": "false"})
    listener.process()
    assert enabled == []
