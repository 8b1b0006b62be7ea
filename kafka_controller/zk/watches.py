"""Watch handlers and session listeners, Kafka ``ZooKeeperClient`` style.

ZooKeeper watches are one-shot; Kafka keeps one *handler* per path and re-arms the watch by
reading with ``watch=true`` when it handles the event. We do the same: handlers live in a map keyed
by (path, kind) and stay registered until ``unregister``; the backend is given one stable
dispatcher per kind, so arming a path twice still fires once (kazoo keeps watchers in a set).

kazoo drops every watch when the connection drops (the Java client re-sends them); to give the
controller Java's behaviour, a dropped watch is re-armed after the session reconnects and fired
if the znode changed meanwhile. That work runs on a small worker thread, never on the backend's
callback thread, and handlers still only enqueue.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Iterable
from typing import TypeVar

from kafka_controller.domain.errors import KafkaControllerError
from kafka_controller.ports import SessionEvent, SessionListener, WatchHandler, ZNodeEvent, ZNodeEventType
from kafka_controller.zk.backend import OK, Stat, ZkBackend

log = logging.getLogger(__name__)
A = TypeVar("A")

NODE = "node"  # exists/data watch
CHILDREN = "children"  # child watch
_CHILDREN_VIA_EXISTS = "children-via-exists"  # exists watch on a missing parent, routed to CHILDREN

_EVENT_TYPES = {
    "CREATED": ZNodeEventType.CREATED,
    "DELETED": ZNodeEventType.DELETED,
    "CHANGED": ZNodeEventType.DATA_CHANGED,
    "CHILD": ZNodeEventType.CHILDREN_CHANGED,
}


class WatchRegistry:
    """Handlers by (path, kind), the three stable dispatchers, and re-arming after reconnection."""

    def __init__(self, backend: ZkBackend) -> None:
        self._backend = backend
        self._lock = threading.Lock()
        self._handlers: dict[tuple[str, str], WatchHandler] = {}
        self._node_state: dict[str, Stat | None] = {}  # last stat seen when a node watch was armed
        self._armed: set[tuple[str, str]] = set()  # watches set on the server and not yet fired
        self._lost: set[tuple[str, str]] = set()
        self._resync: queue.SimpleQueue[bool] | None = None
        self.node_dispatch = self._dispatcher(NODE)
        self.children_dispatch = self._dispatcher(CHILDREN)
        self.children_exists_dispatch = self._dispatcher(_CHILDREN_VIA_EXISTS)

    def set_handler(self, path: str, kind: str, handler: WatchHandler) -> None:
        """Register ``handler`` and count the watch about to be armed for ``path`` as armed."""
        with self._lock:
            self._handlers[(path, kind)] = handler
            self._armed.add((path, kind))

    def arm_failed(self, paths: Iterable[str], kind: str) -> None:
        """The read that was to arm these watches failed with the connection down: count them
        dropped, so that they are re-armed, and fired for what changed, once it is back. Kafka's
        read would have waited for the connection; without this, a handler whose re-arming read
        failed (a BrokerChange during a ZooKeeper leader's loss) would never fire again. A re-arm
        is asked for now too, in case the connection came back before this call; one that fails
        keeps them for the next reconnection."""
        with self._lock:
            for path in paths:
                self._armed.discard((path, kind))
                self._lost.add((path, kind))
        self._request_resync()

    def remember(self, path: str, stat: Stat | None) -> None:
        with self._lock:
            self._node_state[path] = stat

    def unregister(self, path: str) -> None:
        with self._lock:
            self._handlers.pop((path, NODE), None)
            self._handlers.pop((path, CHILDREN), None)
            self._node_state.pop(path, None)

    def handler(self, path: str, kind: str) -> WatchHandler | None:
        return self._handlers.get((path, kind))

    def _dispatcher(self, kind: str) -> Callable[[str, str], None]:
        target = CHILDREN if kind == _CHILDREN_VIA_EXISTS else kind

        def dispatch(event_type: str, path: str) -> None:
            if event_type == "NONE":  # dropped by a disconnection: re-arm after reconnecting
                with self._lock:
                    if path is None:  # kazoo drops every watch at once and names none
                        self._lost |= self._armed
                        self._armed.clear()
                    else:
                        self._lost.add((path, target))
                        self._armed.discard((path, target))
                return
            with self._lock:
                self._armed.discard((path, target))
            handler = self._handlers.get((path, target))
            if handler is None:
                return
            etype = _EVENT_TYPES.get(event_type)
            if etype is None:
                return
            if kind == _CHILDREN_VIA_EXISTS:
                etype = ZNodeEventType.CHILDREN_CHANGED
            _call(handler, ZNodeEvent(etype, path))

        return dispatch

    # -- session transitions ---------------------------------------------------------------------

    def on_session_event(self, event: SessionEvent) -> None:
        """Called on the backend's thread: only bookkeeping and a hand-off to the worker."""
        if event in (SessionEvent.EXPIRED, SessionEvent.LOST):
            with self._lock:  # the session's watches are gone for good: owners re-register
                self._lost.clear()
                self._armed.clear()
        elif event is SessionEvent.CONNECTED:
            self._request_resync()

    def _request_resync(self) -> None:
        """Have the worker re-arm what is dropped (started on first need)."""
        with self._lock:
            if not self._lost:
                return
            if self._resync is None:
                self._resync = queue.SimpleQueue()
                threading.Thread(target=self._resync_loop, name="zk-watch-resync", daemon=True).start()
            resync = self._resync
        resync.put(True)

    def close(self) -> None:
        if self._resync is not None:
            self._resync.put(False)

    def _resync_loop(self) -> None:
        assert self._resync is not None
        while self._resync.get():
            with self._lock:
                lost, self._lost = self._lost, set()
                lost = {key for key in lost if key in self._handlers}
            try:
                self._rearm(
                    sorted(p for p, k in lost if k == CHILDREN), sorted(p for p, k in lost if k == NODE)
                )
            except KafkaControllerError as e:  # disconnected again: keep them for the next reconnect
                log.info("re-arming %d watches failed (%s); will retry on reconnect", len(lost), e)
                with self._lock:
                    self._lost |= lost

    def _rearm(self, children_paths: list[str], node_paths: list[str]) -> None:
        """Re-arm dropped watches in batched reads and fire what changed meanwhile (children
        handlers always fire: a child list cannot be compared cheaply)."""
        backend = self._backend
        if children_paths:
            for path, (code, _) in zip(
                children_paths, backend.get_children_many(children_paths, self.children_dispatch), strict=True
            ):
                with self._lock:
                    self._armed.add((path, CHILDREN))
                if code != OK:
                    backend.exists(path, self.children_exists_dispatch)
                self._fire(path, CHILDREN, ZNodeEventType.CHILDREN_CHANGED)
        if not node_paths:
            return
        for path, (code, _data, stat) in zip(
            node_paths, backend.get_data_many(node_paths, self.node_dispatch), strict=True
        ):
            after = stat if code == OK else backend.exists(path, self.node_dispatch)
            with self._lock:
                self._armed.add((path, NODE))
                before = self._node_state.get(path)
                self._node_state[path] = after
            if before is None and after is not None:
                self._fire(path, NODE, ZNodeEventType.CREATED)
            elif before is not None and after is None:
                self._fire(path, NODE, ZNodeEventType.DELETED)
            elif before is not None and after is not None and before[:2] != after[:2]:  # czxid, mzxid
                self._fire(path, NODE, ZNodeEventType.DATA_CHANGED)

    def _fire(self, path: str, kind: str, etype: ZNodeEventType) -> None:
        handler = self._handlers.get((path, kind))
        if handler is not None:
            _call(handler, ZNodeEvent(etype, path))


class SessionListeners:
    """Registered session listeners; each is called in turn and a raising one is only logged."""

    def __init__(self) -> None:
        self._listeners: list[SessionListener] = []
        self._lock = threading.Lock()

    def add(self, listener: SessionListener) -> None:
        with self._lock:
            self._listeners.append(listener)

    def remove(self, listener: SessionListener) -> None:
        with self._lock:
            if listener in self._listeners:
                self._listeners.remove(listener)

    def fire(self, event: SessionEvent) -> None:
        with self._lock:
            listeners = list(self._listeners)
        for listener in listeners:
            _call(listener, event)


def _call(fn: Callable[[A], object], arg: A) -> None:
    try:
        fn(arg)
    except Exception:  # a listener must never break the backend's thread
        log.exception("watch handler or session listener %r raised", fn)


RAW_SESSION_EVENTS = {
    "CONNECTED": SessionEvent.CONNECTED,
    "SUSPENDED": SessionEvent.SUSPENDED,
    "EXPIRED": SessionEvent.EXPIRED,
    "LOST": SessionEvent.LOST,
}
