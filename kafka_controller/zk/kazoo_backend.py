"""The kazoo adapter: ``ZkBackend`` over a ``KazooClient``, and ``KazooMetadataStore``.

Every kazoo exception is translated here (house rule 6); nothing kazoo leaves this module. Writes
go out as ``FastMulti`` requests and reads as ``MultiRead`` requests (``multiread.py``), several in
flight, so a failover's 100,000 reads or writes take tens of round trips, not 100,000. Against a
server without multi-read (ZooKeeper < 3.6) reads fall back to pipelined ``get_async``.

Every call fails fast with ``StoreUnavailableError`` while the session is not connected: the
controller must not hang on a write it cannot make (it learns of reconnection from the session
listener).
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from kazoo.client import KazooClient, KazooState, KeeperState
from kazoo.exceptions import (
    ConnectionClosedError,
    ConnectionLoss,
    KazooException,
    OperationTimeoutError,
    SessionExpiredError,
    ZookeeperError,
)
from kazoo.retry import KazooRetry
from kazoo.security import ACL, Id

from kafka_controller.domain.errors import MetadataStoreError, StoreUnavailableError
from kafka_controller.ports import Clock, MetadataStore
from kafka_controller.zk.backend import (
    CONNECTIONLOSS,
    EPHEMERAL,
    EPHEMERAL_SEQUENTIAL,
    NONODE,
    OK,
    PERSISTENT_SEQUENTIAL,
    ChildrenRead,
    DataRead,
    MultiOutcome,
    Op,
    RawSessionListener,
    RawWatch,
    Stat,
    ZkBackend,
    error_for_code,
)
from kafka_controller.zk.batching import DEFAULT_MAX_BATCH_BYTES, DEFAULT_MAX_BATCH_OPS
from kafka_controller.zk.multiread import (
    GET_CHILDREN,
    GET_DATA,
    FastMulti,
    MultiRead,
    check_paths,
    first_failure,
    serialize_acls,
)
from kafka_controller.zk.pipeline import pipelined
from kafka_controller.zk.poll_handler import PollingHandler
from kafka_controller.zk.security import ZkClientConfig
from kafka_controller.zk.store import ZkMetadataStore

log = logging.getLogger(__name__)

ClientFactory = Callable[..., Any]


def translate(e: BaseException, path: str | None = None) -> MetadataStoreError:
    """A kazoo exception as the project's error."""
    if isinstance(e, MetadataStoreError):
        return e
    if isinstance(e, ConnectionClosedError | SessionExpiredError | ConnectionLoss | OperationTimeoutError):
        return StoreUnavailableError(f"ZooKeeper unavailable ({type(e).__name__})", path=path)
    if isinstance(e, ZookeeperError) and getattr(e, "code", None) is not None:
        return error_for_code(int(e.code), path)
    if isinstance(e, KazooException) or "Timeout" in type(e).__name__:
        return StoreUnavailableError(f"ZooKeeper unavailable ({type(e).__name__}: {e})", path=path)
    return MetadataStoreError(f"{type(e).__name__}: {e}", path=path)


def _stat(s: Any) -> Stat:
    return Stat._make(s)


class KazooBackend:
    """A started ``KazooClient`` on the configured chroot (created first when missing)."""

    def __init__(self, config: ZkClientConfig, *, client_factory: ClientFactory | None = None) -> None:
        self.config = config
        self._factory: ClientFactory = client_factory or KazooClient
        self._chroot = config.chroot
        self._multi_read = config.multi_read is not False
        #: each pipelined request's round trip in ms (the broker's ZooKeeperRequestLatencyMs)
        self.on_request_latency_ms: Callable[[float], None] | None = None
        self._wrappers: dict[RawWatch, Callable[[Any], None]] = {}
        self._wrappers_lock = threading.Lock()
        self._listeners: list[RawSessionListener] = []
        self._acl_cache: dict[tuple[tuple[int, str, str], ...], bytes] = {}
        self._timeout = config.request_timeout_s
        if self._chroot and config.create_paths:
            self._ensure_chroot()
        kwargs = config.kazoo_kwargs()
        if client_factory is None:  # our handler only for kazoo's own client; factories choose theirs
            kwargs["handler"] = PollingHandler()
        self.client = self._factory(**kwargs)
        self.client.add_listener(self._on_state)
        self._start(self.client)
        if config.multi_read is None:
            self._probe_multi_read()

    # -- lifecycle --------------------------------------------------------------------------------

    def _start(self, client: Any) -> None:
        try:
            client.start(timeout=self.config.connection_timeout_ms / 1000.0)
        except Exception as e:
            raise StoreUnavailableError(
                f"cannot connect to ZooKeeper at {self.config.hosts} within "
                f"{self.config.connection_timeout_ms / 1000:g} s ({type(e).__name__})"
            ) from None

    def _probe_multi_read(self) -> None:
        """Find out once whether the server knows opcode 22. A server that does not answers
        UNIMPLEMENTED and drops the connection, so wait (bounded) for the reconnection."""
        try:
            list(self._pipeline([MultiRead(GET_DATA, ["/zookeeper"], "")], "multi-read probe"))
        except MetadataStoreError as e:
            if e.code not in ("UNIMPLEMENTED", "MARSHALLINGERROR"):
                raise
            log.warning("ZooKeeper at %s has no multi-read: using pipelined reads", self.config.hosts)
            self._multi_read = False
            retry = KazooRetry(max_tries=-1, delay=0.05, max_delay=0.5, deadline=self._timeout)
            try:
                retry(self.client.exists, "/")
            except Exception as err:
                raise translate(err, "/") from None

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

    def _check(self) -> None:
        if self.client.state != KazooState.CONNECTED:
            raise StoreUnavailableError(f"ZooKeeper session is {str(self.client.state).lower()}")

    # -- ACLs and watches ---------------------------------------------------------------------------

    def _kazoo_acls(self, path: str) -> list[Any]:
        return [ACL(p, Id(s, i)) for p, s, i in self.config.acl_triples(path)]

    def _acl_bytes(self, path: str) -> bytes:
        triples = self.config.acl_triples(path)
        cached = self._acl_cache.get(triples)
        if cached is None:
            cached = self._acl_cache[triples] = serialize_acls(triples)
        return cached

    def _wrap(self, watch: RawWatch | None) -> Callable[[Any], None] | None:
        """One stable kazoo watcher per raw watch, so kazoo's watcher sets de-duplicate."""
        if watch is None:
            return None
        with self._wrappers_lock:
            wrapper = self._wrappers.get(watch)
            if wrapper is None:

                def wrapper(event: Any, watch: RawWatch = watch) -> None:
                    watch(str(event.type), event.path)

                self._wrappers[watch] = wrapper
            return wrapper

    # -- requests ------------------------------------------------------------------------------------

    def _submit(self, request: Any) -> Any:
        result = self.client.handler.async_result()
        self.client._call(request, result)
        return result

    def _wait(self, result: Any, what: str) -> Any:
        try:
            return result.get(timeout=self._timeout)
        except Exception as e:
            raise translate(e, what) from None

    def _pipeline(self, requests: Iterable[Any], what: str) -> Iterator[Any]:
        """``requests`` kept ``max_in_flight`` deep, replies in order as they settle, each round
        trip to ``on_request_latency_ms`` when set (a metric)."""
        wait = functools.partial(self._wait, what=what)
        return pipelined(requests, self._submit, wait, self.config.max_in_flight, self.on_request_latency_ms)

    def multi(self, multis: Sequence[Sequence[Op]]) -> list[MultiOutcome]:
        return list(self.iter_multi(multis))

    def iter_multi(self, multis: Iterable[Sequence[Op]]) -> Iterator[MultiOutcome]:
        """Each multi's paths are checked as it is taken (``FastMulti``): a bad one ends the call there."""
        self._check()
        chroot, acl = self._chroot, self._acl_bytes
        for reply in self._pipeline((FastMulti(ops, chroot, acl) for ops in multis), "multi"):
            failure = first_failure(reply)
            yield MultiOutcome(reply) if failure is None else MultiOutcome(None, *failure)

    def get_data_many(self, paths: Sequence[str], watch: RawWatch | None = None) -> list[DataRead]:
        return self._read_many(GET_DATA, paths, watch)

    def get_children_many(self, paths: Sequence[str], watch: RawWatch | None = None) -> list[ChildrenRead]:
        return self._read_many(GET_CHILDREN, paths, watch)

    def iter_data_many(self, paths: Sequence[str]) -> Iterator[list[DataRead]]:
        return self._read_chunks(GET_DATA, paths, None)

    def _read_many(self, op_type: int, paths: Sequence[str], watch: RawWatch | None) -> list[Any]:
        return [r for chunk in self._read_chunks(op_type, paths, watch) for r in chunk]

    def _read_chunks(self, op_type: int, paths: Sequence[str], watch: RawWatch | None) -> Iterator[list[Any]]:
        """Replies in order, a multi-read's at a time (watched reads: kazoo's, as one chunk)."""
        self._check()
        check_paths(paths)
        if not paths:
            return
        wrapper = self._wrap(watch)
        if self._multi_read and wrapper is None:
            n = self.config.read_chunk
            requests = [MultiRead(op_type, paths[i : i + n], self._chroot) for i in range(0, len(paths), n)]
            replied = False
            try:
                for reply in self._pipeline(requests, "multi-read"):
                    replied = True
                    yield reply
                return
            except MetadataStoreError as e:
                unsupported = e.code in ("UNIMPLEMENTED", "MARSHALLINGERROR")
                if replied or self.config.multi_read is not None or not unsupported:
                    raise
                log.warning("server rejected multi-read (%s): falling back to pipelined reads", e.code)
                self._multi_read = False
        yield self._read_pipelined(op_type, paths, wrapper)

    def _read_pipelined(self, op_type: int, paths: Sequence[str], wrapper: Any) -> list[Any]:
        """One kazoo async read per path, all in flight: the fallback, and how watches are armed."""
        client = self.client
        call = client.get_async if op_type == GET_DATA else client.get_children_async
        futures = [call(p, watch=wrapper) for p in paths]
        out: list[Any] = []
        for path, future in zip(paths, futures, strict=True):
            try:
                value = future.get(timeout=self._timeout)
            except ZookeeperError as e:
                code = int(getattr(e, "code", CONNECTIONLOSS))
                if code != NONODE:
                    raise translate(e, path) from None
                out.append((NONODE, None, None) if op_type == GET_DATA else (NONODE, None))
                continue
            except Exception as e:
                raise translate(e, path) from None
            out.append((OK, value[0], _stat(value[1])) if op_type == GET_DATA else (OK, list(value)))
        return out

    @property
    def uses_multi_read(self) -> bool:
        return self._multi_read

    def exists(self, path: str, watch: RawWatch | None = None) -> Stat | None:
        self._check()
        check_paths([path])
        try:
            stat = self.client.exists(path, watch=self._wrap(watch))
        except Exception as e:
            raise translate(e, path) from None
        return None if stat is None else _stat(stat)

    def create(self, path: str, data: bytes | None, mode: int = 0) -> tuple[str, Stat]:
        self._check()
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
        return created, _stat(stat)

    def set_data(self, path: str, data: bytes | None, version: int = -1) -> Stat:
        self._check()
        check_paths([path])
        try:
            return _stat(self.client.set(path, data if data is not None else b"", version))
        except Exception as e:
            raise translate(e, path) from None

    def delete(self, path: str, version: int = -1) -> None:
        self._check()
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


__all__ = ["KazooBackend", "KazooMetadataStore", "translate"]


def _conforms(store: KazooMetadataStore, backend: KazooBackend) -> tuple[MetadataStore, ZkBackend]:
    return store, backend  # mypy proves the store implements the port and the backend the backend
