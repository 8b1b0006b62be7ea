"""The contract suite's two environments: the in-memory fake and a real ZooKeeper (``zk``).

Each test gets an ``env`` that makes stores (one session each), reaches the tree underneath
without the store (raw reads/writes, for building Kafka-shaped trees and checking what was
written), and injects session faults: expiry, and disconnection with reconnection.
"""

from __future__ import annotations

import contextlib
import queue
from collections.abc import Iterator
from typing import Any

import pytest

from kafka_controller.dryrun.memory_store import InMemoryMetadataStore
from kafka_controller.dryrun.memory_zk import InMemoryZooKeeper
from kafka_controller.ports import SessionEvent
from kafka_controller.zk.store import ZkMetadataStore

EVENT_TIMEOUT = 20.0


class StoreEnv:
    kind = "abstract"

    def __init__(self) -> None:
        self.stores: list[ZkMetadataStore] = []

    def store(self, **kwargs: Any) -> ZkMetadataStore:
        raise NotImplementedError

    def expire(self, store: ZkMetadataStore) -> None:
        raise NotImplementedError

    def disconnect(self, store: ZkMetadataStore) -> None:
        raise NotImplementedError

    def reconnect(self, store: ZkMetadataStore) -> None:
        raise NotImplementedError

    def raw_put(self, path: str, data: bytes | None) -> None:
        """Create (with parents) or overwrite ``path`` behind the store's back."""
        raise NotImplementedError

    def raw_get(self, path: str) -> tuple[bytes | None, int] | None:
        """``(data, data_version)`` or None."""
        raise NotImplementedError

    def close(self) -> None:
        for s in reversed(self.stores):
            with contextlib.suppress(Exception):
                s.close()


class MemoryEnv(StoreEnv):
    kind = "memory"

    def __init__(self) -> None:
        super().__init__()
        self.tree = InMemoryZooKeeper()
        self.raw = self.tree.open_session()

    def store(self, **kwargs: Any) -> ZkMetadataStore:
        s = InMemoryMetadataStore(self.tree, **kwargs)
        self.stores.append(s)
        return s

    def expire(self, store: ZkMetadataStore) -> None:
        assert isinstance(store, InMemoryMetadataStore)
        store.expire_session()

    def disconnect(self, store: ZkMetadataStore) -> None:
        assert isinstance(store, InMemoryMetadataStore)
        store.disconnect()

    def reconnect(self, store: ZkMetadataStore) -> None:
        assert isinstance(store, InMemoryMetadataStore)
        store.reconnect()

    def raw_put(self, path: str, data: bytes | None) -> None:
        parts = path.strip("/").split("/")
        for i in range(1, len(parts)):
            parent = "/" + "/".join(parts[:i])
            if self.raw.exists(parent) is None:
                self.raw.create(parent, None)
        if self.raw.exists(path) is None:
            self.raw.create(path, data)
        else:
            self.raw.set_data(path, data)

    def raw_get(self, path: str) -> tuple[bytes | None, int] | None:
        read = self.tree.get(path)
        return None if read is None else (read[0], read[1].version)


class ZooKeeperEnv(StoreEnv):
    kind = "zk"

    def __init__(self, server: Any, connect: str, raw_client: Any) -> None:
        super().__init__()
        self.server = server
        self.connect = connect
        self.raw = raw_client

    def store(self, **kwargs: Any) -> ZkMetadataStore:
        from kafka_controller.zk.kazoo_backend import KazooMetadataStore
        from kafka_controller.zk.security import ZkClientConfig

        cfg_keys = {"multi_read", "read_chunk", "request_timeout_s", "digest", "set_acl"}
        cfg = {k: kwargs.pop(k) for k in list(kwargs) if k in cfg_keys}
        config = ZkClientConfig(self.connect, session_timeout_ms=6000, connection_timeout_ms=20000, **cfg)
        s = KazooMetadataStore(config, **kwargs)
        self.stores.append(s)
        return s

    def expire(self, store: ZkMetadataStore) -> None:
        from kafka_controller.testing.zk_harness import expire_session

        expire_session(store._backend.client, self.server, wait_reconnected=True)  # type: ignore[attr-defined]

    def disconnect(self, store: ZkMetadataStore) -> None:
        self.server.stop()

    def reconnect(self, store: ZkMetadataStore) -> None:
        self.server.start()

    def raw_put(self, path: str, data: bytes | None) -> None:
        if self.raw.exists(path) is None:
            self.raw.create(path, data or b"", makepath=True)
        else:
            self.raw.set(path, data or b"")

    def raw_get(self, path: str) -> tuple[bytes | None, int] | None:
        from kazoo.exceptions import NoNodeError

        try:
            data, stat = self.raw.get(path)
        except NoNodeError:
            return None
        return (data or None), stat.version


@pytest.fixture(params=["memory", pytest.param("zk", marks=pytest.mark.zk)])
def env(request: pytest.FixtureRequest) -> Iterator[StoreEnv]:
    if request.param == "memory":
        e: StoreEnv = MemoryEnv()
    else:
        server = request.getfixturevalue("zk_server")
        if not server.is_running():
            server.start()
        factory = request.getfixturevalue("zk_client_factory")
        e = ZooKeeperEnv(server, request.getfixturevalue("zk_connect"), factory())
    yield e
    e.close()


class Events:
    """A queue-backed handler/listener: it only enqueues, tests poll with a deadline."""

    def __init__(self) -> None:
        self.q: queue.Queue[Any] = queue.Queue()

    def __call__(self, event: Any) -> None:
        self.q.put(event)

    def next(self, timeout: float = EVENT_TIMEOUT) -> Any:
        try:
            return self.q.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no event within {timeout}s") from None

    def until(self, wanted: Any, timeout: float = EVENT_TIMEOUT) -> list[Any]:
        """Events up to and including ``wanted``."""
        seen = []
        while True:
            event = self.next(timeout)
            seen.append(event)
            if event == wanted:
                return seen

    def drain(self) -> list[Any]:
        out = []
        while not self.q.empty():
            out.append(self.q.get_nowait())
        return out


@pytest.fixture
def events() -> Events:
    return Events()


__all__ = ["Events", "SessionEvent", "StoreEnv"]
