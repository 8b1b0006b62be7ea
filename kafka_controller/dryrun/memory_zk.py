"""An in-process ZooKeeper: a znode tree shared by sessions, with ZooKeeper's semantics where the
controller depends on them.

Kept: data versions, czxid/mzxid from one global zxid counter (one zxid per transaction), ephemeral
owners, sequential names from the parent's cversion, atomic multis that report the first failing
op's error code, one-shot data/exists/child watches fired after the change commits, session
expiry (ephemerals deleted, watches dropped, a new session follows) and disconnection (writes fail
fast; watches dropped as kazoo drops them). Not modelled: ACLs, quotas, chroots.

Watch callbacks run on the thread that made the change, after the tree's lock is released.

``InMemorySession`` is one client's session: the ``ZkBackend`` the in-memory store runs over, with
the controls tests use (disconnect, reconnect, expire, close). It works on the tree's internals
under the tree's lock, so the two live in one module.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence

from kafka_controller.domain.errors import StoreUnavailableError
from kafka_controller.zk.backend import (
    BADVERSION,
    CHECK,
    CREATE,
    DELETE,
    EPHEMERAL,
    EPHEMERAL_SEQUENTIAL,
    NOCHILDRENFOREPHEMERALS,
    NODEEXISTS,
    NONODE,
    NOTEMPTY,
    OK,
    PERSISTENT_SEQUENTIAL,
    SET_DATA,
    ChildrenRead,
    DataRead,
    DataVersions,
    MultiOutcome,
    Op,
    RawSessionListener,
    RawWatch,
    Stat,
    chunked,
    error_for_code,
)
from kafka_controller.zk.security import DEFAULT_READ_CHUNK

__all__ = ["InMemorySession", "InMemoryZooKeeper"]

_Event = tuple[RawWatch, str, str]


def _deliver(events: list[_Event]) -> None:
    for fn, etype, path in events:
        fn(etype, path)


class InMemorySession:
    """One client session on an ``InMemoryZooKeeper``: the ``ZkBackend`` of the in-memory store."""

    def __init__(self, tree: InMemoryZooKeeper) -> None:
        self._tree = tree
        self._listeners: list[RawSessionListener] = []
        self._sid = tree._new_session_id(self)
        self._state = "CONNECTED"

    # -- lifecycle controls (tests) ---------------------------------------------------------------

    @property
    def session_id(self) -> int:
        return self._sid

    @property
    def connected(self) -> bool:
        return self._state == "CONNECTED"

    def add_session_listener(self, listener: RawSessionListener) -> None:
        self._listeners.append(listener)

    def _notify(self, state: str) -> None:
        for listener in list(self._listeners):
            listener(state)

    def disconnect(self) -> None:
        """Lose the connection but keep the session (kazoo: SUSPENDED, watches dropped)."""
        if self._state != "CONNECTED":
            return
        self._state = "SUSPENDED"
        _deliver(self._tree._drop_watches(self._sid))
        self._notify("SUSPENDED")

    def reconnect(self) -> None:
        if self._state == "SUSPENDED":
            self._state = "CONNECTED"
            self._notify("CONNECTED")

    def _expire(self) -> None:
        if self._state == "CLOSED":
            return
        _deliver(self._tree._drop_watches(self._sid))
        events = self._tree._end_session(self._sid)
        self._state = "EXPIRED"
        _deliver(events)
        self._notify("EXPIRED")
        self._sid = self._tree._new_session_id(self)
        self._state = "CONNECTED"
        self._notify("CONNECTED")

    def close(self) -> None:
        if self._state == "CLOSED":
            return
        events = self._tree._end_session(self._sid)
        self._state = "CLOSED"
        _deliver(events)
        self._notify("LOST")

    # -- ZkBackend ----------------------------------------------------------------------------------

    def _check(self) -> None:
        if self._state != "CONNECTED":
            raise StoreUnavailableError(f"ZooKeeper session is {self._state.lower()}")

    def multi(self, multis: Sequence[Sequence[Op]]) -> list[MultiOutcome]:
        return list(self.iter_multi(multis))

    def iter_multi(self, multis: Iterable[Sequence[Op]]) -> Iterator[MultiOutcome]:
        self._check()
        for ops in multis:
            events: list[_Event] = []
            outcome = self._tree._multi(ops, self._sid, events)
            _deliver(events)
            yield outcome

    def get_data_many(self, paths: Sequence[str], watch: RawWatch | None = None) -> list[DataRead]:
        self._check()
        tree = self._tree
        out: list[DataRead] = []
        with tree._lock:
            nodes = tree._nodes
            for path in paths:
                node = nodes.get(path)
                if node is None:
                    out.append((NONODE, None, None))
                    continue
                out.append((OK, node.data, node.stat()))
                if watch is not None:
                    tree._watch(tree._data_watches, path, self._sid, watch)
        return out

    def iter_data_many(self, paths: Sequence[str]) -> Iterator[list[DataRead]]:
        yield self.get_data_many(paths)

    def iter_data_versions_many(self, paths: Sequence[str]) -> Iterator[DataVersions]:
        self._check()
        tree = self._tree
        codes: list[int] = []
        datas: list[bytes | None] = []
        versions: list[int] = []
        with tree._lock:
            nodes = tree._nodes
            for path in paths:
                node = nodes.get(path)
                if node is None:
                    codes.append(NONODE)
                    datas.append(None)
                    versions.append(-1)
                else:
                    codes.append(OK)
                    datas.append(node.data)
                    versions.append(node.version)
        yield codes, datas, versions

    def iter_data_versions_streamed(self, paths: Iterable[str]) -> Iterator[DataVersions]:
        self._check()
        for chunk in chunked(paths, DEFAULT_READ_CHUNK):  # as a real server's multi-reads
            yield from self.iter_data_versions_many(chunk)

    def get_children_many(self, paths: Sequence[str], watch: RawWatch | None = None) -> list[ChildrenRead]:
        self._check()
        tree = self._tree
        out: list[ChildrenRead] = []
        with tree._lock:
            for path in paths:
                node = tree._nodes.get(path)
                if node is None:
                    out.append((NONODE, None))
                    continue
                out.append((OK, sorted(node.children)))
                if watch is not None:
                    tree._watch(tree._child_watches, path, self._sid, watch)
        return out

    def exists(self, path: str, watch: RawWatch | None = None) -> Stat | None:
        self._check()
        tree = self._tree
        with tree._lock:
            node = tree._nodes.get(path)
            if watch is not None:
                tree._watch(tree._data_watches, path, self._sid, watch)
            return None if node is None else node.stat()

    def _single(self, op: Op) -> object:
        outcome = self.multi([[op]])[0]
        if not outcome.ok:
            raise error_for_code(outcome.error_code, op[1])
        assert outcome.values is not None
        return outcome.values[0]

    def create(self, path: str, data: bytes | None, mode: int = 0) -> tuple[str, Stat]:
        created = str(self._single((CREATE, path, data, mode)))
        read = self._tree.get(created)
        assert read is not None
        return created, read[1]

    def set_data(self, path: str, data: bytes | None, version: int = -1) -> Stat:
        self._single((SET_DATA, path, data, version))
        read = self._tree.get(path)
        assert read is not None
        return read[1]

    def delete(self, path: str, version: int = -1) -> None:
        self._single((DELETE, path, None, version))


_Staged = tuple[dict[str, set[tuple[int, RawWatch]]], str, str]


class _Node:
    __slots__ = (
        "children",
        "ctime",
        "cversion",
        "czxid",
        "data",
        "mtime",
        "mzxid",
        "owner",
        "pzxid",
        "version",
    )

    def __init__(self, data: bytes | None, zxid: int, now: int, owner: int) -> None:
        self.data = data
        self.version = 0
        self.cversion = 0
        self.czxid = self.mzxid = self.pzxid = zxid
        self.ctime = self.mtime = now
        self.owner = owner
        self.children: set[str] = set()

    def stat(self) -> Stat:
        d = self.data
        return Stat(
            self.czxid, self.mzxid, self.ctime, self.mtime, self.version, self.cversion, 0, self.owner,
            len(d) if d else 0, len(self.children), self.pzxid,
        )  # fmt: skip


def _split(path: str) -> tuple[str, str]:
    cut = path.rfind("/")
    return (path[:cut] or "/"), path[cut + 1 :]


class InMemoryZooKeeper:
    """The shared tree. ``open_session()`` gives a backend; several sessions see each other."""

    def __init__(self, clock_ms: Callable[[], int] | None = None) -> None:
        self._lock = threading.RLock()
        self._now = clock_ms or (lambda: int(time.time() * 1000))
        self._zxid = 0
        self._nodes: dict[str, _Node] = {"/": _Node(None, 0, 0, 0)}
        self._data_watches: dict[str, set[tuple[int, RawWatch]]] = {}
        self._child_watches: dict[str, set[tuple[int, RawWatch]]] = {}
        self._session_ids = itertools.count(0x1000)
        self._sessions: dict[int, InMemorySession] = {}

    def open_session(self) -> InMemorySession:
        return InMemorySession(self)

    # -- inspection (tests, demos) -------------------------------------------------------------------

    def get(self, path: str) -> tuple[bytes | None, Stat] | None:
        with self._lock:
            node = self._nodes.get(path)
            return None if node is None else (node.data, node.stat())

    def paths(self) -> list[str]:
        with self._lock:
            return sorted(self._nodes)

    @property
    def last_zxid(self) -> int:
        return self._zxid

    # -- session lifecycle ---------------------------------------------------------------------------

    def _new_session_id(self, session: InMemorySession) -> int:
        with self._lock:
            sid = next(self._session_ids)
            self._sessions[sid] = session
            return sid

    def _end_session(self, sid: int) -> list[_Event]:
        """Delete the session's ephemerals and drop its watches; returns the events to fire."""
        with self._lock:
            self._sessions.pop(sid, None)
            for table in (self._data_watches, self._child_watches):
                for path in list(table):
                    table[path] = {w for w in table[path] if w[0] != sid}
                    if not table[path]:
                        del table[path]
            events: list[_Event] = []
            owned = sorted((p for p, n in self._nodes.items() if n.owner == sid), reverse=True)
            if owned:
                self._zxid += 1
                staged: list[_Staged] = []
                for path in owned:
                    self._delete(path, self._zxid, staged)
                self._commit(staged, events)
            return events

    def expire_session(self, session: InMemorySession) -> None:
        """Expire ``session`` as the server would: ephemerals go, watches go, listeners hear EXPIRED,
        then the client establishes a new session (CONNECTED) as kazoo does."""
        session._expire()

    def _drop_watches(self, sid: int) -> list[_Event]:
        with self._lock:
            events: list[_Event] = []
            for table in (self._data_watches, self._child_watches):
                for path in list(table):
                    mine = {w for w in table[path] if w[0] == sid}
                    events.extend((fn, "NONE", path) for _, fn in mine)
                    table[path] -= mine
                    if not table[path]:
                        del table[path]
            return events

    # -- transactions ---------------------------------------------------------------------------------

    def _multi(self, ops: Sequence[Op], sid: int, events: list[_Event]) -> MultiOutcome:
        with self._lock:
            zxid = self._zxid + 1
            now = self._now()
            undo: list[Callable[[], None]] = []
            staged: list[_Staged] = []
            values: list[object] = []
            for i, op in enumerate(ops):
                code, value = self._apply(op, sid, zxid, now, undo, staged)
                if code != OK:
                    for u in reversed(undo):
                        u()
                    return MultiOutcome(None, i, code)
                values.append(value)
            self._zxid = zxid
            self._commit(staged, events)
            return MultiOutcome(values)

    def _apply(
        self, op: Op, sid: int, zxid: int, now: int, undo: list[Callable[[], None]], events: list[_Staged]
    ) -> tuple[int, object]:
        kind, path, data, arg = op
        nodes = self._nodes
        if kind == SET_DATA:
            target = nodes.get(path)
            if target is None:
                return NONODE, None
            if arg != -1 and arg != target.version:
                return BADVERSION, None
            old = (target.data, target.version, target.mzxid, target.mtime)
            target.data, target.version, target.mzxid, target.mtime = data, target.version + 1, zxid, now
            undo.append(lambda: _restore(target, old))
            if path in self._data_watches:
                events.append((self._data_watches, path, "CHANGED"))
            return OK, target.version
        if kind == CHECK:
            node = nodes.get(path)
            if node is None:
                return NONODE, None
            return (BADVERSION, None) if arg != -1 and arg != node.version else (OK, None)
        if kind == CREATE:
            cut = path.rfind("/")
            parent_path, name = path[:cut] or "/", path[cut + 1 :]
            found = nodes.get(parent_path)
            if found is None:
                return NONODE, None
            parent = found
            if parent.owner:
                return NOCHILDRENFOREPHEMERALS, None
            if arg in (PERSISTENT_SEQUENTIAL, EPHEMERAL_SEQUENTIAL):
                name = f"{name}{parent.cversion:010d}"
                path = f"{parent_path.rstrip('/')}/{name}"
            if path in nodes:
                return NODEEXISTS, None
            owner = sid if arg in (EPHEMERAL, EPHEMERAL_SEQUENTIAL) else 0
            nodes[path] = _Node(data, zxid, now, owner)
            old_parent = (parent.cversion, parent.pzxid)
            parent.children.add(name)
            parent.cversion += 1
            parent.pzxid = zxid

            def undo_create(path: str = path, name: str = name) -> None:
                del nodes[path]
                parent.children.discard(name)
                parent.cversion, parent.pzxid = old_parent

            undo.append(undo_create)
            if path in self._data_watches:
                events.append((self._data_watches, path, "CREATED"))
            if parent_path in self._child_watches:
                events.append((self._child_watches, parent_path, "CHILD"))
            return OK, path
        if kind == DELETE:
            node = nodes.get(path)
            if node is None:
                return NONODE, None
            if arg != -1 and arg != node.version:
                return BADVERSION, None
            if node.children:
                return NOTEMPTY, None
            parent = nodes[_split(path)[0]]
            old_parent = (parent.cversion, parent.pzxid)
            self._delete(path, zxid, events)

            def undo_delete(path: str = path, node: _Node = node) -> None:
                nodes[path] = node
                parent.children.add(_split(path)[1])
                parent.cversion, parent.pzxid = old_parent

            undo.append(undo_delete)
            return OK, None
        return error_code_unimplemented(), None

    def _delete(self, path: str, zxid: int, events: list[_Staged]) -> None:
        parent_path, name = _split(path)
        del self._nodes[path]
        parent = self._nodes[parent_path]
        parent.children.discard(name)
        parent.cversion += 1
        parent.pzxid = zxid
        self._fire(self._data_watches, path, "DELETED", events)
        self._fire(self._child_watches, path, "DELETED", events)
        self._fire(self._child_watches, parent_path, "CHILD", events)

    @staticmethod
    def _fire(
        table: dict[str, set[tuple[int, RawWatch]]], path: str, etype: str, staged: list[_Staged]
    ) -> None:
        if path in table:
            staged.append((table, path, etype))

    @staticmethod
    def _commit(staged: list[_Staged], events: list[_Event]) -> None:
        """Consume the watches a committed change triggers (one-shot), in order."""
        for table, path, etype in staged:
            watchers = table.pop(path, None)
            if watchers:
                events.extend((fn, etype, path) for _, fn in watchers)

    def _watch(self, table: dict[str, set[tuple[int, RawWatch]]], path: str, sid: int, fn: RawWatch) -> None:
        table.setdefault(path, set()).add((sid, fn))


def _restore(node: _Node, old: tuple[bytes | None, int, int, int]) -> None:
    node.data, node.version, node.mzxid, node.mtime = old


def error_code_unimplemented() -> int:
    return -6
