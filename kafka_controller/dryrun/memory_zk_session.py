"""One client session on the in-process ZooKeeper (``memory_zk``): the ``ZkBackend`` the in-memory
store runs over, with the controls tests use (disconnect, reconnect, expire, close).
``memory_zk`` re-exports ``InMemorySession``."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

from kafka_controller.domain.errors import StoreUnavailableError
from kafka_controller.zk.backend import (
    CREATE,
    DELETE,
    NONODE,
    OK,
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

if TYPE_CHECKING:
    from kafka_controller.dryrun.memory_zk import InMemoryZooKeeper

__all__ = ["InMemorySession"]

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
