"""Watches dropped by a disconnection are re-armed on reconnection and fire only for what changed
meanwhile, with the event type the Java client would have delivered."""

from __future__ import annotations

import queue

from kafka_controller.ports import SessionEvent, ZNodeEvent, ZNodeEventType
from kafka_controller.testing.memory_store import InMemoryMetadataStore
from kafka_controller.testing.memory_zk import InMemoryZooKeeper


class Q:
    def __init__(self) -> None:
        self.q: queue.Queue[ZNodeEvent] = queue.Queue()

    def __call__(self, event: ZNodeEvent) -> None:
        self.q.put(event)

    def next(self) -> ZNodeEvent:
        return self.q.get(timeout=10)


def test_dropped_watches_are_rearmed_and_fire_for_changes_only() -> None:
    tree = InMemoryZooKeeper()
    store, other = InMemoryMetadataStore(tree), InMemoryMetadataStore(tree)
    raw = tree.open_session()
    raw.create("/b", b"1")
    raw.create("/c", b"1")
    raw.create("/d", b"1")
    created, same, changed, deleted, kids = Q(), Q(), Q(), Q(), Q()
    assert store.watch_node("/a", created) is False
    assert store.watch_node("/b", same) is True
    assert store.watch_node("/c", changed) is True
    assert store.watch_node("/d", deleted) is True
    store.watch_topics(kids)
    sessions: queue.Queue[SessionEvent] = queue.Queue()
    store.add_session_listener(sessions.put)

    store.disconnect()
    assert sessions.get(timeout=10) is SessionEvent.SUSPENDED
    raw.create("/a", b"new")
    raw.set_data("/c", b"2")
    raw.delete("/d")
    other.create_topic("t", {0: [1]})  # type: ignore[dict-item]
    store.reconnect()
    assert sessions.get(timeout=10) is SessionEvent.CONNECTED

    assert created.next() == ZNodeEvent(ZNodeEventType.CREATED, "/a")
    assert changed.next() == ZNodeEvent(ZNodeEventType.DATA_CHANGED, "/c")
    assert deleted.next() == ZNodeEvent(ZNodeEventType.DELETED, "/d")
    assert kids.next() == ZNodeEvent(ZNodeEventType.CHILDREN_CHANGED, "/brokers/topics")
    assert same.q.empty()  # re-armed in path order: /b came before /c, and did not change

    raw.set_data("/b", b"2")  # re-armed for real
    assert same.next() == ZNodeEvent(ZNodeEventType.DATA_CHANGED, "/b")


def test_expiry_forgets_dropped_watches() -> None:
    tree = InMemoryZooKeeper()
    store = InMemoryMetadataStore(tree)
    tree.open_session().create("/x", b"1")
    fired = Q()
    store.watch_node("/x", fired)
    store.disconnect()
    store.expire_session()  # the session's watches are gone for good; the owner re-registers
    tree.open_session().set_data("/x", b"2")
    store.watch_node("/y", fired)
    tree.open_session().create("/y", b"1")
    assert fired.next() == ZNodeEvent(ZNodeEventType.CREATED, "/y")
    assert fired.q.empty()
