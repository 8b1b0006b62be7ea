"""The kazoo adapter's request plumbing and reads: ``KazooReads``, which ``KazooBackend`` builds
over its client and hands its reads and writes to.

Reads go out as ``MultiRead`` requests (``multiread.py``), several in flight, so a failover's
100,000 reads take tens of round trips, not 100,000. A watched read of many znodes is multi-reads
plus one ``SetWatches`` each (``multiread.py`` argues the watch is the getData/getChildren one);
a few watched znodes, and every read against a server without multi-read (ZooKeeper < 3.6), go
through kazoo's pipelined ``get_async``/``get_children_async``. kazoo exceptions are translated
here (docs/rules.md, errors are translated at the adapter edge).
"""

from __future__ import annotations

import functools
import logging
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import chain
from typing import Any

from kazoo.client import KazooState
from kazoo.exceptions import (
    ConnectionClosedError,
    ConnectionLoss,
    KazooException,
    OperationTimeoutError,
    SessionExpiredError,
    ZookeeperError,
)
from kazoo.retry import KazooRetry

from kafka_controller.domain.errors import MetadataStoreError, StoreUnavailableError
from kafka_controller.zk.backend import (
    CONNECTIONLOSS,
    NONODE,
    OK,
    ChildrenRead,
    DataRead,
    DataVersions,
    RawWatch,
    Stat,
    chunked,
    data_version_columns,
    error_for_code,
)
from kafka_controller.zk.multiread import (
    GET_CHILDREN,
    GET_DATA,
    DataVersionsMultiRead,
    MultiRead,
    SetWatches,
    WatchedMultiRead,
    check_paths,
)
from kafka_controller.zk.pipeline import pipelined
from kafka_controller.zk.security import ZkClientConfig

log = logging.getLogger("kafka_controller.zk.kazoo_backend")  # the adapter's one logger

#: From this many paths a watched read is multi-reads plus one ``SetWatches`` per multi-read
#: (``multiread.py``): two round trips instead of one, but a few requests instead of one kazoo
#: request per path.
WATCHED_MULTI_READ_MIN_PATHS = 16


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


def stat_of(s: Any) -> Stat:
    return Stat._make(s)


def _checked(chunks: Iterator[list[str]]) -> Iterator[list[str]]:
    for chunk in chunks:
        check_paths(chunk)
        yield chunk


class KazooReads:
    """Requests and reads over a started ``client`` on ``config``'s chroot: the pipelined request
    window (``pipeline``, which ``KazooBackend``'s writes share), the watchers kazoo is handed
    (``wrap``), whether the server takes multi-reads, and the ``ZkBackend`` reads."""

    def __init__(self, client: Any, config: ZkClientConfig) -> None:
        self.client = client
        self.config = config
        #: each pipelined request's round trip in ms (the broker's ZooKeeperRequestLatencyMs)
        self.on_request_latency_ms: Callable[[float], None] | None = None
        self._chroot = config.chroot
        self._multi_read = config.multi_read is not False
        self._timeout = config.request_timeout_s
        self._wrappers: dict[RawWatch, Callable[[Any], None]] = {}
        self._wrappers_lock = threading.Lock()

    def probe_multi_read(self) -> None:
        """Find out once whether the server knows opcode 22. A server that does not answers
        UNIMPLEMENTED and drops the connection, so wait (bounded) for the reconnection."""
        try:
            list(self.pipeline([MultiRead(GET_DATA, ["/zookeeper"], "")], "multi-read probe"))
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

    def check(self) -> None:
        """Fail fast while the session is not connected (see ``kazoo_backend``)."""
        if self.client.state != KazooState.CONNECTED:
            raise StoreUnavailableError(f"ZooKeeper session is {str(self.client.state).lower()}")

    def wrap(self, watch: RawWatch | None) -> Callable[[Any], None] | None:
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

    def pipeline(self, requests: Iterable[Any], what: str) -> Iterator[Any]:
        """``requests`` kept ``max_in_flight`` deep, replies in order as they settle, each round
        trip to ``on_request_latency_ms`` when set (a metric)."""
        wait = functools.partial(self._wait, what=what)
        return pipelined(requests, self._submit, wait, self.config.max_in_flight, self.on_request_latency_ms)

    def get_data_many(self, paths: Sequence[str], watch: RawWatch | None = None) -> list[DataRead]:
        return self._read_many(GET_DATA, paths, watch)

    def get_children_many(self, paths: Sequence[str], watch: RawWatch | None = None) -> list[ChildrenRead]:
        return self._read_many(GET_CHILDREN, paths, watch)

    def iter_data_many(self, paths: Sequence[str]) -> Iterator[list[DataRead]]:
        return self._read_chunks(GET_DATA, paths, None)

    def iter_data_versions_many(self, paths: Sequence[str]) -> Iterator[DataVersions]:
        return self._read_chunks(GET_DATA, paths, None, columns=True)

    def iter_data_versions_streamed(self, paths: Iterable[str]) -> Iterator[DataVersions]:
        self.check()
        return self._unwatched_chunks(GET_DATA, _checked(chunked(paths, self.config.read_chunk)), True)

    def _read_many(self, op_type: int, paths: Sequence[str], watch: RawWatch | None) -> list[Any]:
        return [r for chunk in self._read_chunks(op_type, paths, watch) for r in chunk]

    def _read_chunks(
        self, op_type: int, paths: Sequence[str], watch: RawWatch | None, columns: bool = False
    ) -> Iterator[Any]:
        """Replies in order, a multi-read's at a time (watched reads: kazoo's, as one chunk);
        with ``columns`` (unwatched getData only), each chunk as ``DataVersions``."""
        self.check()
        check_paths(paths)
        if not paths:
            return
        wrapper = self.wrap(watch)
        if self._multi_read and wrapper is not None and len(paths) >= WATCHED_MULTI_READ_MIN_PATHS:
            try:
                yield self._read_watched(op_type, paths, wrapper)
                return
            except MetadataStoreError as e:
                if self.config.multi_read is not None or e.code not in ("UNIMPLEMENTED", "MARSHALLINGERROR"):
                    raise
                log.warning("server rejected multi-read (%s): falling back to pipelined reads", e.code)
                self._multi_read = False
        if wrapper is None:
            n = self.config.read_chunk
            yield from self._unwatched_chunks(
                op_type, (paths[i : i + n] for i in range(0, len(paths), n)), columns
            )
            return
        yield self._read_pipelined(op_type, paths, wrapper)

    def _unwatched_chunks(
        self, op_type: int, chunks: Iterator[Sequence[str]], columns: bool
    ) -> Iterator[Any]:
        """A multi-read per chunk, taken from ``chunks`` as the window frees up, replies in order;
        pipelined reads, chunk by chunk, once the server has rejected a first multi-read (the chunks
        it was sent are read again)."""
        if self._multi_read:
            chroot = self._chroot
            sent: deque[Sequence[str]] = deque()  # chunks in flight, oldest first

            def requests() -> Iterator[MultiRead]:
                for chunk in chunks:
                    sent.append(chunk)
                    yield (
                        DataVersionsMultiRead(chunk, chroot) if columns else MultiRead(op_type, chunk, chroot)
                    )

            replied = False
            try:
                for reply in self.pipeline(requests(), "multi-read"):
                    replied = True
                    sent.popleft()
                    yield reply
                return
            except MetadataStoreError as e:
                unsupported = e.code in ("UNIMPLEMENTED", "MARSHALLINGERROR")
                if replied or self.config.multi_read is not None or not unsupported:
                    raise
                log.warning("server rejected multi-read (%s): falling back to pipelined reads", e.code)
                self._multi_read = False
            chunks = chain(sent, chunks)
        for chunk in chunks:
            reads = self._read_pipelined(op_type, chunk, None)
            yield data_version_columns(reads) if columns else reads

    def _read_watched(self, op_type: int, paths: Sequence[str], wrapper: Any) -> list[Any]:
        """Multi-reads, then one ``SetWatches`` per multi-read relative to the zxid it was served
        at, on the paths it found: the watch of a pipelined getData/getChildren, armed as if
        atomically with the read (the argument is in ``multiread.py``). Errors other than NONODE
        raise, as in ``_read_pipelined``."""
        n = self.config.read_chunk
        reads = [WatchedMultiRead(op_type, paths[i : i + n], self._chroot) for i in range(0, len(paths), n)]
        out: list[Any] = []
        arms: list[SetWatches] = []
        for request, reply in zip(reads, self.pipeline(reads, "multi-read"), strict=True):
            found = []
            for path, read in zip(request.paths, reply, strict=True):
                code = read[0]
                if code == OK:
                    found.append(path)
                elif code != NONODE:
                    raise error_for_code(code, path)
            if found:
                register = functools.partial(self._register_watcher, op_type, found, wrapper)
                arms.append(SetWatches(request.zxid, op_type, found, self._chroot, register))
            out.extend(reply)
        for _ in self.pipeline(arms, "set-watches"):
            pass
        return out

    def _register_watcher(self, op_type: int, paths: Sequence[str], wrapper: Any) -> None:
        """kazoo's bookkeeping for a watch it armed itself (its ``_read_response`` does this after a
        watched read): events find their watchers by server path. Runs on kazoo's connection thread,
        which alone pops these sets when events arrive."""
        client = self.client
        if client._stopped.is_set():
            return
        watchers = client._data_watchers if op_type == GET_DATA else client._child_watchers
        chroot = self._chroot
        for path in paths:
            watchers[chroot + path].add(wrapper)

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
            out.append((OK, value[0], stat_of(value[1])) if op_type == GET_DATA else (OK, list(value)))
        return out

    @property
    def uses_multi_read(self) -> bool:
        return self._multi_read
