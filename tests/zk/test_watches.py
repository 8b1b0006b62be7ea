"""Watches dropped by a disconnection are re-armed on reconnection and fire only for what changed
meanwhile, with the event type the Java client would have delivered."""

from __future__ import annotations

import queue

import pytest

from kafka_controller.domain.errors import StoreUnavailableError
from kafka_controller.dryrun.memory_store import InMemoryMetadataStore
from kafka_controller.dryrun.memory_zk import InMemoryZooKeeper
from kafka_controller.ports import SessionEvent, ZNodeEvent, ZNodeEventType


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


def test_a_watch_whose_arming_read_failed_is_armed_and_fired_once_reconnected() -> None:
    """A BrokerChange handled while the connection is down fails in the read that re-arms the
    child watch; without the registry counting that watch dropped, no later registration would
    ever fire (seen in a fault trial: a broker restarted during a ZooKeeper leader's loss was
    never seen by the controller)."""
    tree = InMemoryZooKeeper()
    store, other = InMemoryMetadataStore(tree), InMemoryMetadataStore(tree)
    tree.open_session().create("/n", b"1")
    kids, node = Q(), Q()
    sessions: queue.Queue[SessionEvent] = queue.Queue()
    store.add_session_listener(sessions.put)
    assert store.watch_node("/n", node) is True

    store.disconnect()
    assert sessions.get(timeout=10) is SessionEvent.SUSPENDED
    with pytest.raises(StoreUnavailableError):
        store.watch_topics(kids)
    with pytest.raises(StoreUnavailableError):
        store.watch_node("/n", node)  # the handler's own re-arming read, failed
    other.create_topic("t", {0: [1]})  # type: ignore[dict-item]
    tree.open_session().set_data("/n", b"2")
    store.reconnect()
    assert sessions.get(timeout=10) is SessionEvent.CONNECTED

    assert kids.next() == ZNodeEvent(ZNodeEventType.CHILDREN_CHANGED, "/brokers/topics")
    assert node.next() == ZNodeEvent(ZNodeEventType.DATA_CHANGED, "/n")
    other.create_topic("u", {0: [1]})  # type: ignore[dict-item]
    assert kids.next() == ZNodeEvent(ZNodeEventType.CHILDREN_CHANGED, "/brokers/topics")  # armed for real


def test_a_failed_arming_noticed_after_the_reconnection_is_still_armed() -> None:
    """The connection may come back between the failed read and the registry hearing of it: the
    registry then re-arms at once rather than waiting for a reconnection that already happened."""
    tree = InMemoryZooKeeper()
    store, other = InMemoryMetadataStore(tree), InMemoryMetadataStore(tree)
    kids = Q()
    store.watch_topics(kids)
    other.create_topic("t", {0: [1]})  # type: ignore[dict-item]
    # fired, so not armed now
    assert kids.next() == ZNodeEvent(ZNodeEventType.CHILDREN_CHANGED, "/brokers/topics")
    store._watches.arm_failed(["/brokers/topics"], "children")  # the failure, heard while connected
    assert kids.next() == ZNodeEvent(ZNodeEventType.CHILDREN_CHANGED, "/brokers/topics")
    other.create_topic("u", {0: [1]})  # type: ignore[dict-item]
    assert kids.next() == ZNodeEvent(ZNodeEventType.CHILDREN_CHANGED, "/brokers/topics")
