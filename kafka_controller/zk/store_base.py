"""The part of the store every concern shares: the backend, the batcher, the clock, small read/write
helpers, session listeners and the watch registry.

The store's concerns (partition states, controller and brokers, topics, admin znodes) are objects
that each receive this core in their constructor (``store.ZkMetadataStore`` builds them), so a
reader of any concern finds everything it touches through ``self._core``: what Kafka's
``KafkaZkClient`` gets from its one ``ZooKeeperClient``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

from kafka_controller.domain.errors import MetadataStoreError, StoreUnavailableError, ZNodeDecodeError
from kafka_controller.domain.values import MATCH_ANY_VERSION
from kafka_controller.ports import Clock, SessionListener, SystemClock, WatchHandler
from kafka_controller.zk import paths as P
from kafka_controller.zk.backend import (
    CREATE,
    DELETE,
    NODEEXISTS,
    NONODE,
    OK,
    PERSISTENT,
    DataRead,
    Op,
    Stat,
    ZkBackend,
    error_for_code,
)
from kafka_controller.zk.batching import DEFAULT_MAX_BATCH_BYTES, DEFAULT_MAX_BATCH_OPS, Batcher, BatchResult
from kafka_controller.zk.watches import CHILDREN, NODE, RAW_SESSION_EVENTS, SessionListeners, WatchRegistry

T = TypeVar("T")


class StoreCore:
    """One session's backend with the batcher, the watch registry and the session listeners over it,
    and the read/write helpers every concern uses."""

    def __init__(
        self,
        backend: ZkBackend,
        *,
        clock: Clock | None = None,
        max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
        max_batch_ops: int = DEFAULT_MAX_BATCH_OPS,
    ) -> None:
        self.backend = backend
        self.clock: Clock = clock or SystemClock()
        self.batcher = Batcher(backend, max_batch_bytes=max_batch_bytes, max_batch_ops=max_batch_ops)
        self.watches = WatchRegistry(backend)
        self.session_listeners = SessionListeners()
        backend.add_session_listener(self._on_raw_session_state)

    # -- session ---------------------------------------------------------------------------------

    def _on_raw_session_state(self, raw: str) -> None:
        event = RAW_SESSION_EVENTS.get(raw)
        if event is None:
            return
        self.watches.on_session_event(event)
        self.session_listeners.fire(event)

    def add_session_listener(self, listener: SessionListener) -> None:
        """Call ``listener(SessionEvent)`` on every session transition; it must only enqueue."""
        self.session_listeners.add(listener)

    def remove_session_listener(self, listener: SessionListener) -> None:
        self.session_listeners.remove(listener)

    @property
    def session_id(self) -> int:
        """The current ZooKeeper session id (changes after expiry)."""
        return self.backend.session_id

    @property
    def connected(self) -> bool:
        return self.backend.connected

    def close(self) -> None:
        """Close the session: its ephemerals (``/controller``, ``/brokers/ids/<id>``) go away."""
        self.watches.close()
        self.backend.close()

    # -- batching ---------------------------------------------------------------------------------

    def run(self, ops: Iterable[Op], expected_controller_epoch_zk_version: int) -> BatchResult:
        return self.batcher.run(ops, expected_controller_epoch_zk_version)

    def run_one(self, op: Op, expected_controller_epoch_zk_version: int = MATCH_ANY_VERSION) -> object:
        """One op, fenced or not; raises the op's own error."""
        result = self.run([op], expected_controller_epoch_zk_version)
        err = result.error(0, op[1])
        if err is not None:
            raise err
        return result.values[0]

    def delete_all(self, paths: Sequence[str], expected_controller_epoch_zk_version: int) -> None:
        """Delete each path (any version), batched; a missing znode counts as deleted."""
        result = self.run([(DELETE, p, None, -1) for p in paths], expected_controller_epoch_zk_version)
        for i, code in enumerate(result.codes):
            if code not in (OK, NONODE):
                raise error_for_code(code, paths[i])

    def ensure_paths(self, paths: tuple[str, ...] | list[str]) -> None:
        """Create-if-absent ``paths`` and their ancestors, parents first, in one batched pass."""
        wanted = list(dict.fromkeys(a for p in paths for a in (*P.ancestors(p), p)))
        reads = self.read_many(wanted)
        missing = [p for p, (code, _, _) in zip(wanted, reads, strict=True) if code == NONODE]
        if not missing:
            return
        result = self.run([(CREATE, p, None, PERSISTENT) for p in missing], MATCH_ANY_VERSION)
        for i, code in enumerate(result.codes):
            if code not in (OK, NODEEXISTS):
                raise error_for_code(code, missing[i])

    # -- reads ------------------------------------------------------------------------------------

    def path_exists(self, path: str) -> bool:
        """Whether the znode at ``path`` (relative to the chroot) exists."""
        return self.backend.exists(path) is not None

    def read_many(self, paths: Sequence[str]) -> list[DataRead]:
        return self.backend.get_data_many(paths)

    def read_raw(self, paths: Sequence[str]) -> list[DataRead]:
        """``(code, data, stat)`` per path, batched, undecoded: for checkers that need what only a
        Stat says (its ``mzxid`` orders every write in the ensemble)."""
        return self.read_many(paths)

    def read(self, path: str) -> tuple[bytes | None, Stat] | None:
        """One znode's data and stat, or None when it does not exist."""
        code, data, stat = self.backend.get_data_many([path])[0]
        if code == NONODE:
            return None
        if code != OK or stat is None:
            raise error_for_code(code, path)
        return data, stat

    def children(self, path: str) -> list[str]:
        """Children of ``path``, sorted; none when it does not exist."""
        code, children = self.backend.get_children_many([path])[0]
        if code == NONODE:
            return []
        if code != OK or children is None:
            raise error_for_code(code, path)
        return sorted(children)

    def decode_many(
        self, paths: Sequence[str], decode: Callable[[bytes | None, Stat, str], T]
    ) -> list[T | MetadataStoreError | None]:
        """Read and decode each path: the value, None when missing, or the per-znode error."""
        out: list[T | MetadataStoreError | None] = []
        for path, (code, data, stat) in zip(paths, self.read_many(paths), strict=True):
            if code == NONODE:
                out.append(None)
            elif code != OK or stat is None:
                out.append(error_for_code(code, path))
            else:
                try:
                    out.append(decode(data, stat, path))
                except ZNodeDecodeError as e:
                    out.append(e)
        return out

    # -- watches ----------------------------------------------------------------------------------------

    def watch_children(self, path: str, handler: WatchHandler) -> list[str]:
        """Set ``handler`` for ``path``'s children and arm a one-shot child watch; returns the
        children (sorted). A missing path returns [] and fires CHILDREN_CHANGED when created."""
        w = self.watches
        w.set_handler(path, CHILDREN, handler)
        try:
            code, children = self.backend.get_children_many([path], w.children_dispatch)[0]
            if code == NONODE:
                if self.backend.exists(path, w.children_exists_dispatch) is None:
                    return []
                code, children = self.backend.get_children_many([path], w.children_dispatch)[0]
        except StoreUnavailableError:
            w.arm_failed([path], CHILDREN)
            raise
        if code != OK or children is None:
            raise error_for_code(code, path)
        return sorted(children)

    def watch_node(self, path: str, handler: WatchHandler) -> bool:
        """Set ``handler`` for ``path`` and arm a one-shot exists watch (fires on create, delete or
        data change); returns whether the znode exists now."""
        w = self.watches
        w.set_handler(path, NODE, handler)
        try:
            stat = self.backend.exists(path, w.node_dispatch)
        except StoreUnavailableError:
            w.arm_failed([path], NODE)
            raise
        w.remember(path, stat)
        return stat is not None

    def unwatch(self, path: str) -> None:
        """Drop the handlers of ``path`` (Kafka's unregister): a watch still armed fires into nothing."""
        self.watches.unregister(path)
