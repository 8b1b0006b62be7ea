"""The kazoo adapter: ``ZkBackend`` over a ``KazooClient``, and ``KazooMetadataStore``.

Every kazoo exception is translated here or in ``kazoo_reads``
(docs/rules.md, errors are translated at the adapter edge); nothing kazoo leaves
the two modules. Writes go out as ``FastMulti`` requests and reads as ``MultiRead`` requests
(``multiread.py``, ``kazoo_reads.py``), several in flight, so a failover's 100,000 reads or writes
take tens of round trips, not 100,000. Against a server without multi-read (ZooKeeper < 3.6) reads
fall back to pipelined ``get_async``.

Every call fails fast with ``StoreUnavailableError`` while the session is not connected: the
controller must not hang on a write it cannot make (it learns of reconnection from the session
listener).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from kazoo.client import KazooState, KeeperState
from kazoo.security import ACL, Id

from kafka_controller.domain.errors import StoreUnavailableError
from kafka_controller.ports import Clock, MetadataStore
from kafka_controller.zk.backend import (
    EPHEMERAL,
    EPHEMERAL_SEQUENTIAL,
    PERSISTENT_SEQUENTIAL,
    ChildrenRead,
    DataRead,
    DataVersions,
    MultiOutcome,
    Op,
    RawSessionListener,
    RawWatch,
    Stat,
    ZkBackend,
)
from kafka_controller.zk.batching import DEFAULT_MAX_BATCH_BYTES, DEFAULT_MAX_BATCH_OPS
from kafka_controller.zk.kazoo_client import InterruptibleKazooClient
from kafka_controller.zk.kazoo_reads import KazooReads, stat_of, translate
from kafka_controller.zk.multiread import FastMulti, check_paths, first_failure, serialize_acls
from kafka_controller.zk.poll_handler import PollingHandler
from kafka_controller.zk.security import ZkClientConfig
from kafka_controller.zk.store import ZkMetadataStore

log = logging.getLogger(__name__)

ClientFactory = Callable[..., Any]


class KazooBackend:
    """A started ``KazooClient`` on the configured chroot (created first when missing).

    Its reads, and the request window its writes share with them, are a ``KazooReads`` it builds
    over the client (``kazoo_reads``); each read hands the whole batch on in one call."""

    def __init__(self, config: ZkClientConfig, *, client_factory: ClientFactory | None = None) -> None:
        self.config = config
        self._factory: ClientFactory = client_factory or InterruptibleKazooClient
        self._chroot = config.chroot
        self._listeners: list[RawSessionListener] = []
        self._acl_cache: dict[tuple[tuple[int, str, str], ...], bytes] = {}
        if self._chroot and config.create_paths:
            self._ensure_chroot()
        kwargs = config.kazoo_kwargs()
        if client_factory is None:  # our handler only for kazoo's own client; factories choose theirs
            kwargs["handler"] = PollingHandler()
        self.client = self._factory(**kwargs)
        self._reads = KazooReads(self.client, config)
        self.client.add_listener(self._on_state)
        self._start(self.client)
        if config.multi_read is None:
            self._reads.probe_multi_read()

    # -- lifecycle --------------------------------------------------------------------------------

    def _start(self, client: Any) -> None:
        try:
            client.start(timeout=self.config.connection_timeout_ms / 1000.0)
        except Exception as e:
            raise StoreUnavailableError(
                f"cannot connect to ZooKeeper at {self.config.hosts} within "
                f"{self.config.connection_timeout_ms / 1000:g} s ({type(e).__name__})"
            ) from None

    def _ensure_chroot(self) -> None:
        """Create the chroot path with a client on the server's root, as Kafka's broker does."""
        root = self._factory(**self.config.kazoo_kwargs(with_chroot=False))
        self._start(root)
        try:
            root.ensure_path(self._chroot, acl=self._kazoo_acls(self._chroot))
        except Exception as e:
            raise translate(e, self._chroot) from None
        finally:
            root.stop()
            root.close()

    def close(self) -> None:
        try:
            self.client.stop()
            self.client.close()
        except Exception as e:  # closing is best effort
            log.debug("closing kazoo client: %r", e)

    @property
    def session_id(self) -> int:
        cid = self.client.client_id
        return int(cid[0]) if cid else 0

    def session_credentials(self) -> tuple[int, bytes] | None:
        """The session id and password (what re-attaching to the session takes); None if not connected."""
        cid = self.client.client_id
        return (int(cid[0]), bytes(cid[1])) if cid else None

    @property
    def connected(self) -> bool:
        return bool(self.client.state == KazooState.CONNECTED)

    @property
    def uses_multi_read(self) -> bool:
        """Whether reads go out as multi-reads (False against a server without them)."""
        return self._reads.uses_multi_read

    @property
    def on_request_latency_ms(self) -> Callable[[float], None] | None:
        """Told each pipelined request's round trip in ms (the broker's ZooKeeperRequestLatencyMs)."""
        return self._reads.on_request_latency_ms

    @on_request_latency_ms.setter
    def on_request_latency_ms(self, sink: Callable[[float], None] | None) -> None:
        self._reads.on_request_latency_ms = sink

    def add_session_listener(self, listener: RawSessionListener) -> None:
        self._listeners.append(listener)

    def _on_state(self, state: str) -> None:
        """kazoo calls this on its connection thread: translate and hand on, nothing more."""
        if state == KazooState.CONNECTED:
            raw = "CONNECTED"
        elif state == KazooState.SUSPENDED:
            raw = "SUSPENDED"
        else:
            raw = "EXPIRED" if self.client.client_state == KeeperState.EXPIRED_SESSION else "LOST"
        for listener in list(self._listeners):
            try:
                listener(raw)
            except Exception:
                log.exception("session listener raised")

    # -- reads: ``KazooReads``, a batch per call --------------------------------------------------

    def get_data_many(self, paths: Sequence[str], watch: RawWatch | None = None) -> list[DataRead]:
        return self._reads.get_data_many(paths, watch)

    def get_children_many(self, paths: Sequence[str], watch: RawWatch | None = None) -> list[ChildrenRead]:
        return self._reads.get_children_many(paths, watch)

    def iter_data_many(self, paths: Sequence[str]) -> Iterator[list[DataRead]]:
        return self._reads.iter_data_many(paths)

    def iter_data_versions_many(self, paths: Sequence[str]) -> Iterator[DataVersions]:
        return self._reads.iter_data_versions_many(paths)

    def iter_data_versions_streamed(self, paths: Iterable[str]) -> Iterator[DataVersions]:
        return self._reads.iter_data_versions_streamed(paths)

    # -- ACLs and writes ----------------------------------------------------------------------------

    def _kazoo_acls(self, path: str) -> list[Any]:
        return [ACL(p, Id(s, i)) for p, s, i in self.config.acl_triples(path)]

    def _acl_bytes(self, path: str) -> bytes:
        triples = self.config.acl_triples(path)
        cached = self._acl_cache.get(triples)
        if cached is None:
            cached = self._acl_cache[triples] = serialize_acls(triples)
        return cached

    def multi(self, multis: Sequence[Sequence[Op]]) -> list[MultiOutcome]:
        return list(self.iter_multi(multis))

    def iter_multi(self, multis: Iterable[Sequence[Op]]) -> Iterator[MultiOutcome]:
        """Each multi's paths are checked as it is taken (``FastMulti``): a bad one ends the call there."""
        self._reads.check()
        chroot, acl = self._chroot, self._acl_bytes
        for reply in self._reads.pipeline((FastMulti(ops, chroot, acl) for ops in multis), "multi"):
            failure = first_failure(reply)
            yield MultiOutcome(reply) if failure is None else MultiOutcome(None, *failure)

    def exists(self, path: str, watch: RawWatch | None = None) -> Stat | None:
        self._reads.check()
        check_paths([path])
        try:
            stat = self.client.exists(path, watch=self._reads.wrap(watch))
        except Exception as e:
            raise translate(e, path) from None
        return None if stat is None else stat_of(stat)

    def create(self, path: str, data: bytes | None, mode: int = 0) -> tuple[str, Stat]:
        self._reads.check()
        check_paths([path])
        try:
            created, stat = self.client.create(
                path,
                data if data is not None else b"",
                acl=self._kazoo_acls(path),
                ephemeral=mode in (EPHEMERAL, EPHEMERAL_SEQUENTIAL),
                sequence=mode in (PERSISTENT_SEQUENTIAL, EPHEMERAL_SEQUENTIAL),
                include_data=True,
            )
        except Exception as e:
            raise translate(e, path) from None
        return created, stat_of(stat)

    def set_data(self, path: str, data: bytes | None, version: int = -1) -> Stat:
        self._reads.check()
        check_paths([path])
        try:
            return stat_of(self.client.set(path, data if data is not None else b"", version))
        except Exception as e:
            raise translate(e, path) from None

    def delete(self, path: str, version: int = -1) -> None:
        self._reads.check()
        check_paths([path])
        try:
            self.client.delete(path, version)
        except Exception as e:
            raise translate(e, path) from None


class KazooMetadataStore(ZkMetadataStore):
    """The metadata store on a real ZooKeeper. Connects on construction; ``close()`` ends the
    session. ``config`` is a ``ZkClientConfig`` or just a connect string."""

    def __init__(
        self,
        config: ZkClientConfig | str,
        *,
        clock: Clock | None = None,
        client_factory: ClientFactory | None = None,
        max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
        max_batch_ops: int = DEFAULT_MAX_BATCH_OPS,
    ) -> None:
        cfg = config if isinstance(config, ZkClientConfig) else ZkClientConfig(config)
        self.config = cfg
        self.backend = KazooBackend(cfg, client_factory=client_factory)
        super().__init__(
            self.backend, clock=clock, max_batch_bytes=max_batch_bytes, max_batch_ops=max_batch_ops
        )
        if cfg.create_paths:
            try:
                self.create_top_level_paths()
            except BaseException:
                self.backend.close()
                raise


__all__ = ["KazooBackend", "KazooMetadataStore"]


def _conforms(store: KazooMetadataStore, backend: KazooBackend) -> tuple[MetadataStore, ZkBackend]:
    return store, backend  # mypy proves the store implements the port and the backend the backend
