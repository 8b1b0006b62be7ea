"""The small interface the store logic needs from a ZooKeeper, and ZooKeeper's own vocabulary.

Two implementations: ``kazoo_backend.KazooBackend`` (a real server) and
``kafka_controller.dryrun.memory_zk.InMemorySession`` (an in-process znode tree). Everything
above this line — fencing, batching, result splitting, codecs, paths — lives once, in the store.

Ops are plain tuples ``(kind, path, data, arg)`` because a controller failover builds hundreds of
thousands of them: ``arg`` is the expected version for set/delete/check and the create mode for
create. Error codes are ZooKeeper's integers (``KeeperException.Code``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Any, NamedTuple, Protocol

from kafka_controller.domain.errors import (
    BadVersionError,
    MetadataStoreError,
    NodeExistsError,
    NoNodeError,
    StoreUnavailableError,
)

# Op kinds (ZooKeeper opcodes).
CREATE = 1
DELETE = 2
SET_DATA = 5
CHECK = 13

# Create modes (ZooKeeper's CreateMode flags).
PERSISTENT = 0
EPHEMERAL = 1
PERSISTENT_SEQUENTIAL = 2
EPHEMERAL_SEQUENTIAL = 3

Op = tuple[int, str, bytes | None, int]

# ZooKeeper error codes.
OK = 0
SYSTEMERROR = -1
RUNTIMEINCONSISTENCY = -2
CONNECTIONLOSS = -4
MARSHALLINGERROR = -5
UNIMPLEMENTED = -6
OPERATIONTIMEOUT = -7
BADARGUMENTS = -8
NONODE = -101
NOAUTH = -102
BADVERSION = -103
NOCHILDRENFOREPHEMERALS = -108
NODEEXISTS = -110
NOTEMPTY = -111
SESSIONEXPIRED = -112
INVALIDACL = -114
AUTHFAILED = -115

CODE_NAMES = {
    OK: "OK",
    SYSTEMERROR: "SYSTEMERROR",
    RUNTIMEINCONSISTENCY: "RUNTIMEINCONSISTENCY",
    -3: "DATAINCONSISTENCY",
    CONNECTIONLOSS: "CONNECTIONLOSS",
    MARSHALLINGERROR: "MARSHALLINGERROR",
    UNIMPLEMENTED: "UNIMPLEMENTED",
    OPERATIONTIMEOUT: "OPERATIONTIMEOUT",
    BADARGUMENTS: "BADARGUMENTS",
    -100: "APIERROR",
    NONODE: "NONODE",
    NOAUTH: "NOAUTH",
    BADVERSION: "BADVERSION",
    NOCHILDRENFOREPHEMERALS: "NOCHILDRENFOREPHEMERALS",
    NODEEXISTS: "NODEEXISTS",
    NOTEMPTY: "NOTEMPTY",
    SESSIONEXPIRED: "SESSIONEXPIRED",
    -113: "INVALIDCALLBACK",
    INVALIDACL: "INVALIDACL",
    AUTHFAILED: "AUTHFAILED",
    -118: "SESSIONMOVED",
    -119: "NOTREADONLY",
    -124: "SESSIONCLOSEDREQUIRESASLAUTH",
}
#: ZooKeeper 3.6+'s answer to a session without a SASL login on a server that requires one.
SESSIONCLOSEDREQUIRESASLAUTH = -124

_UNAVAILABLE = frozenset({CONNECTIONLOSS, OPERATIONTIMEOUT, SESSIONEXPIRED, AUTHFAILED, -118})


def error_for_code(code: int, path: str | None) -> MetadataStoreError:
    """The project's error for a ZooKeeper error code on ``path``
    (docs/rules.md, errors are translated at the adapter edge)."""
    if code == NONODE:
        return NoNodeError(path or "")
    if code == NODEEXISTS:
        return NodeExistsError(path or "")
    if code == BADVERSION:
        return BadVersionError(path or "")
    name = CODE_NAMES.get(code, f"UNKNOWN({code})")
    if code == SESSIONCLOSEDREQUIRESASLAUTH:  # say how to log in, as Kafka's docs do
        return MetadataStoreError(
            f"ZooKeeper requires a SASL login ({name}): name a JAAS file whose Client section holds "
            "it in $KAFKA_OPTS (-Djava.security.auth.login.config=FILE)",
            code=name,
            path=path,
        )
    if code in _UNAVAILABLE:
        return StoreUnavailableError(f"KeeperErrorCode = {name} for {path}", path=path)
    return MetadataStoreError(f"KeeperErrorCode = {name} for {path}", code=name, path=path)


class Stat(NamedTuple):
    """ZooKeeper's Stat, field for field (kazoo's ``ZnodeStat`` has the same layout)."""

    czxid: int
    mzxid: int
    ctime: int
    mtime: int
    version: int
    cversion: int
    aversion: int
    ephemeral_owner: int
    data_length: int
    num_children: int
    pzxid: int


@dataclass(slots=True)
class MultiOutcome:
    """One multi's result. On success ``values`` holds per op: the created path (create), the new
    data version (set), ``None`` (delete/check). On failure only the first failing op is known
    (ZooKeeper reports the others as rolled back): ``failed_index`` and its ``error_code``."""

    values: list[Any] | None = None
    failed_index: int = -1
    error_code: int = OK

    @property
    def ok(self) -> bool:
        return self.failed_index < 0


#: A one-shot backend watch callback: ``(event_type, path)``; event_type "NONE" means the watch was
#: dropped by a disconnection (kazoo semantics) and will not fire.
RawWatch = Callable[[str, str], None]

#: Raw session states a backend reports: "CONNECTED", "SUSPENDED", "EXPIRED", "LOST".
RawSessionListener = Callable[[str], None]

# Per-path read results: (code, data, stat) for getData; (code, children) for getChildren.
DataRead = tuple[int, bytes | None, Stat | None]
ChildrenRead = tuple[int, list[str] | None]
#: A chunk of getData results as columns: codes, data (None where absent or failed) and data
#: versions (-1 where failed), one entry per path. What a caller that needs only the data version
#: reads: no ``Stat`` and no tuple per znode (``iter_data_versions_many``).
DataVersions = tuple[list[int], list[bytes | None], list[int]]


def data_version_columns(reads: Sequence[DataRead]) -> DataVersions:
    """``DataRead`` results as ``DataVersions`` columns (a backend without a columnar read)."""
    return (
        [code for code, _, _ in reads],
        [data for _, data, _ in reads],
        [-1 if stat is None else stat.version for _, _, stat in reads],
    )


class ZkBackend(Protocol):
    """What the store needs. Every method raises only the project's errors (``MetadataStoreError``
    subclasses); ``StoreUnavailableError`` at once when the session is not connected."""

    def multi(self, multis: Sequence[Sequence[Op]]) -> list[MultiOutcome]:
        """Run each multi atomically, several in flight, outcomes in order."""
        ...

    def iter_multi(self, multis: Iterable[Sequence[Op]]) -> Iterator[MultiOutcome]:
        """``multi`` over a stream: each multi is taken as the window frees up and its outcome
        yielded as it settles, so the caller builds the next multis while earlier ones are in flight."""
        ...

    def get_data_many(self, paths: Sequence[str], watch: RawWatch | None = None) -> list[DataRead]:
        """Batched getData; ``watch`` is armed as a data watch on every path that exists."""
        ...

    def iter_data_many(self, paths: Sequence[str]) -> Iterator[list[DataRead]]:
        """``get_data_many(paths)`` without watches, in order, a chunk at a time as the replies
        arrive: the caller decodes one chunk while the next ones are in flight."""
        ...

    def iter_data_versions_many(self, paths: Sequence[str]) -> Iterator[DataVersions]:
        """``iter_data_many`` with each chunk as columns and of each stat only its data version: a
        failover reads 100,000 partition states and uses nothing else of their stats."""
        ...

    def iter_data_versions_streamed(self, paths: Iterable[str]) -> Iterator[DataVersions]:
        """``iter_data_versions_many`` over a stream of paths, taken a chunk at a time as the window
        of reads in flight frees up: the caller works out the next paths (a failover decodes the
        topics that name them) while ZooKeeper answers the earlier ones."""
        ...

    def get_children_many(self, paths: Sequence[str], watch: RawWatch | None = None) -> list[ChildrenRead]:
        """Batched getChildren; ``watch`` is armed as a child watch on every path that exists."""
        ...

    def exists(self, path: str, watch: RawWatch | None = None) -> Stat | None:
        """Stat or None; ``watch`` fires on create, delete or data change."""
        ...

    def create(self, path: str, data: bytes | None, mode: int = PERSISTENT) -> tuple[str, Stat]:
        """Create one znode (parents must exist); returns the actual path and its stat."""
        ...

    def set_data(self, path: str, data: bytes | None, version: int = -1) -> Stat: ...

    def delete(self, path: str, version: int = -1) -> None: ...

    @property
    def session_id(self) -> int: ...

    @property
    def connected(self) -> bool: ...

    def add_session_listener(self, listener: RawSessionListener) -> None: ...

    def close(self) -> None: ...


def read_raise(path: str, code: int) -> None:
    """Raise the error for a failed single read (helper for single-path wrappers)."""
    if code != OK:
        raise error_for_code(code, path)


def chunked(items: Iterable[str], size: int) -> Iterator[list[str]]:
    """``items`` in lists of ``size`` (the last may be shorter), taken from the stream as needed."""
    stream = iter(items)
    while chunk := list(islice(stream, size)):
        yield chunk
