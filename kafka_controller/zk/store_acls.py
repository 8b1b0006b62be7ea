"""ACLs in ZooKeeper in Kafka 2.8's layout (``ZkData.scala``'s ``ZkAclStore``s), and the listener
that keeps a broker's ``AclCache`` fresh.

* LITERAL patterns: ``/kafka-acl/<ResourceType>/<name>``; PREFIXED ones:
  ``/kafka-acl-extended/prefixed/<ResourceType>/<name>`` (``Topic``, ``Group``, ``Cluster``,
  ``TransactionalId``, ``DelegationToken``); each znode ``{"version":1,"acls":[{"principal":
  "User:alice","permissionType":"Allow","operation":"Read","host":"*"}]}``; a pattern left with no
  entry has its znode deleted. Writes are read-modify-write with the znode's version, retried on a
  concurrent change, as ``AclAuthorizer.updateResourceAcls`` does.
* After each write, a persistent-sequential change notice: ``/kafka-acl-changes/acl_changes_<n>``
  holding ``<RESOURCE_TYPE>:<name>`` (``TOPIC:orders``) for a LITERAL pattern,
  ``/kafka-acl-extended-changes/acl_changes_<n>`` holding ``{"version":1,"resourceType":"TOPIC",
  "name":"ord","patternType":"PREFIXED"}`` for a PREFIXED one.

``AclChangeListener`` is ``AclAuthorizer``'s ``ZkNodeChangeNotificationListener``: its watches only
hand work to the broker's task thread, which reads the new notices, re-reads the patterns they name
and replaces them in the cache; notices older than 15 minutes are deleted by whoever sees them
(Kafka's ``changeExpirationMs``), so the change paths do not grow without bound.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

import orjson

from kafka_controller.domain.errors import (
    BadVersionError,
    InvalidArgumentError,
    KafkaControllerError,
    NodeExistsError,
    NoNodeError,
    ZNodeDecodeError,
)
from kafka_controller.ports import Clock, SystemClock, ZNodeEvent
from kafka_controller.security.authorizer import (
    OPERATION_NAMES,
    PERMISSION_NAMES,
    RESOURCE_TYPE_NAMES,
    AccessControlEntry,
    AclCache,
    PatternType,
    ResourcePattern,
    ResourceType,
    operation_named,
    permission_named,
)
from kafka_controller.zk.backend import (
    NONODE,
    OK,
    PERSISTENT,
    PERSISTENT_SEQUENTIAL,
    ZkBackend,
    error_for_code,
)

log = logging.getLogger(__name__)

LITERAL_ACL_PATH = "/kafka-acl"
PREFIXED_ACL_PATH = "/kafka-acl-extended/prefixed"
LITERAL_CHANGES_PATH = "/kafka-acl-changes"
EXTENDED_CHANGES_PATH = "/kafka-acl-extended-changes"
CHANGE_PREFIX = "acl_changes_"
#: Kafka's ``AclAuthorizer`` retries a conflicting ACL write this many times.
MAX_UPDATE_RETRIES = 10
#: Kafka's ``ZkNodeChangeNotificationListener`` default ``changeExpirationMs``.
CHANGE_EXPIRATION_MS = 15 * 60 * 1000
#: Bound on one notice's bytes a broker parses (a resource name is far shorter).
_MAX_NOTICE_BYTES = 64 * 1024


def pattern_path(p: ResourcePattern) -> str:
    root = {PatternType.LITERAL: LITERAL_ACL_PATH, PatternType.PREFIXED: PREFIXED_ACL_PATH}.get(
        p.pattern_type
    )
    type_name = RESOURCE_TYPE_NAMES.get(p.resource_type)
    if root is None or type_name is None:
        raise InvalidArgumentError(f"no ZooKeeper path for the pattern {p}")
    check_resource_name(p.name)
    return f"{root}/{type_name}/{p.name}"


def check_resource_name(name: str) -> None:
    """A name that cannot be one znode's name (Kafka writes it raw under the type's path)."""
    if not name or "/" in name or name in (".", "..") or "\x00" in name:
        raise InvalidArgumentError(f"resource name {name!r} cannot be stored in ZooKeeper")


def encode_entries(entries: Iterable[AccessControlEntry]) -> bytes:
    acls = [
        {
            "principal": e.principal,
            "permissionType": PERMISSION_NAMES[e.permission_type],
            "operation": OPERATION_NAMES[e.operation],
            "host": e.host,
        }
        for e in sorted(entries)
    ]
    return orjson.dumps({"version": 1, "acls": acls})


def decode_entries(data: bytes | None, path: str) -> frozenset[AccessControlEntry]:
    """Kafka's ``AclEntry.fromBytes``: empty data is no entry; version must be 1."""
    if not data:
        return frozenset()
    try:
        doc = orjson.loads(data)
        if not isinstance(doc, dict) or doc.get("version") != 1:
            raise ZNodeDecodeError(path, "not an ACL document of version 1")
        return frozenset(
            AccessControlEntry(
                str(a["principal"]),
                str(a["host"]),
                operation_named(str(a["operation"])),
                permission_named(str(a["permissionType"])),
            )
            for a in doc.get("acls", [])
        )
    except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError, InvalidArgumentError) as e:
        raise ZNodeDecodeError(path, f"bad ACL document: {e}") from None


def encode_notice(p: ResourcePattern) -> tuple[str, bytes]:
    """The change path and the notice's bytes for a pattern."""
    type_name = p.resource_type.name
    if p.pattern_type == PatternType.LITERAL:
        return LITERAL_CHANGES_PATH, f"{type_name}:{p.name}".encode()
    doc = {"version": 1, "resourceType": type_name, "name": p.name, "patternType": p.pattern_type.name}
    return EXTENDED_CHANGES_PATH, orjson.dumps(doc)


def decode_notice(changes_path: str, data: bytes | None) -> ResourcePattern:
    """The pattern a notice names (``AclChangeNotificationHandler``'s ``decode``)."""
    if not data or len(data) > _MAX_NOTICE_BYTES:
        raise InvalidArgumentError("empty or oversized ACL change notice")
    try:
        if changes_path == LITERAL_CHANGES_PATH:
            type_name, sep, name = data.decode().partition(":")
            if not sep:
                raise InvalidArgumentError(f"ACL change notice {data!r} has no ':'")
            return ResourcePattern(ResourceType[type_name.upper()], name, PatternType.LITERAL)
        doc = orjson.loads(data)
        if doc.get("version") != 1:
            raise InvalidArgumentError("ACL change notice is not of version 1")
        return ResourcePattern(
            ResourceType[str(doc["resourceType"]).upper()],
            str(doc["name"]),
            PatternType[str(doc["patternType"]).upper()],
        )
    except (KeyError, UnicodeDecodeError, orjson.JSONDecodeError, AttributeError, TypeError) as e:
        raise InvalidArgumentError(f"bad ACL change notice: {e}") from None


class ZkAclStore:
    """Reads and writes of the ACL znodes over a ``ZkBackend`` (the broker's ZooKeeper session)."""

    def __init__(self, backend: ZkBackend) -> None:
        self._backend = backend

    def create_paths(self) -> None:
        """Kafka's ``createAclPaths``: the roots, each type's directory and both change paths."""
        paths = [LITERAL_ACL_PATH, "/kafka-acl-extended", PREFIXED_ACL_PATH]
        for root in (LITERAL_ACL_PATH, PREFIXED_ACL_PATH):
            paths += [f"{root}/{name}" for name in RESOURCE_TYPE_NAMES.values()]
        paths += [LITERAL_CHANGES_PATH, EXTENDED_CHANGES_PATH]
        for path in paths:
            with contextlib.suppress(NodeExistsError):
                self._backend.create(path, None, PERSISTENT)

    def read(self, p: ResourcePattern) -> tuple[frozenset[AccessControlEntry], int]:
        """A pattern's entries and its znode version (-1: no znode)."""
        path = pattern_path(p)
        code, data, stat = self._backend.get_data_many([path])[0]
        if code == NONODE:
            return frozenset(), -1
        if code != OK or stat is None:
            raise error_for_code(code, path)
        return decode_entries(data, path), stat.version

    def load_all(self) -> dict[ResourcePattern, frozenset[AccessControlEntry]]:
        """Every pattern's entries (Kafka's ``loadCache``); an unreadable znode is logged and skipped."""
        patterns: list[ResourcePattern] = []
        roots = ((LITERAL_ACL_PATH, PatternType.LITERAL), (PREFIXED_ACL_PATH, PatternType.PREFIXED))
        dirs = [(f"{root}/{name}", rt, pt) for root, pt in roots for rt, name in RESOURCE_TYPE_NAMES.items()]
        for (path, rt, pt), (code, children) in zip(
            dirs, self._backend.get_children_many([d for d, _, _ in dirs]), strict=True
        ):
            if code == NONODE:
                continue
            if code != OK or children is None:
                raise error_for_code(code, path)
            patterns += [ResourcePattern(rt, name, pt) for name in sorted(children)]
        return self.read_many(patterns)

    def read_many(
        self, patterns: Sequence[ResourcePattern]
    ) -> dict[ResourcePattern, frozenset[AccessControlEntry]]:
        out: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
        paths = [pattern_path(p) for p in patterns]
        for p, path, (code, data, stat) in zip(
            patterns, paths, self._backend.get_data_many(paths), strict=True
        ):
            if code == NONODE:
                out[p] = frozenset()
            elif code != OK or stat is None:
                raise error_for_code(code, path)
            else:
                try:
                    out[p] = decode_entries(data, path)
                except ZNodeDecodeError as e:
                    log.warning("Ignoring the ACLs of %s: %s", path, e)
                    out[p] = frozenset()
        return out

    def update(
        self,
        p: ResourcePattern,
        change: Callable[[frozenset[AccessControlEntry]], frozenset[AccessControlEntry]],
    ) -> frozenset[AccessControlEntry]:
        """Apply ``change`` to the pattern's entries with a versioned write, retried on a conflict;
        notify every broker when something changed. Returns the entries now stored."""
        path = pattern_path(p)
        for _ in range(MAX_UPDATE_RETRIES):
            current, version = self.read(p)
            wanted = change(current)
            if wanted == current:
                return current
            try:
                if not wanted:
                    self._backend.delete(path, version)
                elif version < 0:
                    self._backend.create(path, encode_entries(wanted), PERSISTENT)
                else:
                    self._backend.set_data(path, encode_entries(wanted), version)
            except (BadVersionError, NodeExistsError, NoNodeError):
                continue  # someone else wrote meanwhile: read again
            self.notify(p)
            return wanted
        raise KafkaControllerError(
            f"the ACLs of {path} kept changing: gave up after {MAX_UPDATE_RETRIES} tries"
        )

    def notify(self, p: ResourcePattern) -> str:
        changes, data = encode_notice(p)
        return self._backend.create(f"{changes}/{CHANGE_PREFIX}", data, PERSISTENT_SEQUENTIAL)[0]


class _WatchingStore(Protocol):
    """What the listener needs of the metadata store: its child watches (they survive session
    loss and re-arm as the store's other watches do)."""

    def watch_children(self, path: str, handler: Callable[[ZNodeEvent], None]) -> list[str]: ...

    def unwatch(self, path: str) -> None: ...


class AclChangeListener:
    """Keeps ``cache`` equal to ZooKeeper's ACLs: loads them all on ``start``, then re-reads each
    pattern a new change notice names. Watches only ``submit`` work; ``process`` runs on the
    broker's task thread."""

    def __init__(
        self,
        store: _WatchingStore,
        acls: ZkAclStore,
        backend: ZkBackend,
        cache: AclCache,
        submit: Callable[[Callable[[], None]], None],
        clock: Clock | None = None,
    ) -> None:
        self._store = store
        self._acls = acls
        self._backend = backend
        self._cache = cache
        self._submit = submit
        self._clock: Clock = clock or SystemClock()
        self._seen: dict[str, set[str]] = {LITERAL_CHANGES_PATH: set(), EXTENDED_CHANGES_PATH: set()}

    def start(self) -> None:
        """Create the paths, arm both watches, then load every ACL (a change between the two is
        seen twice, which is harmless; one before the watch is in the load)."""
        self._acls.create_paths()
        for path in self._seen:
            self._seen[path] = set(self._store.watch_children(path, self._on_watch))
        self._cache.replace_all(self._acls.load_all())
        for path, names in self._seen.items():  # notices left from before: only purged
            self._apply(path, sorted(names), reload=False)

    def stop(self) -> None:
        for path in self._seen:
            self._store.unwatch(path)

    def _on_watch(self, _event: ZNodeEvent) -> None:
        self._submit(self.process)

    def process(self) -> None:
        for path in self._seen:
            try:
                children = set(self._store.watch_children(path, self._on_watch))
                new = sorted(children - self._seen[path])
                if new:
                    self._apply(path, new)
                self._seen[path] = children
            except KafkaControllerError as e:
                log.warning("Could not process the ACL change notices in %s: %s", path, e)

    def _apply(self, changes: str, names: list[str], *, reload: bool = True) -> None:
        paths = [f"{changes}/{n}" for n in names]
        patterns: set[ResourcePattern] = set()
        expired: list[str] = []
        now = self._clock.time_ms()
        for path, (code, data, stat) in zip(paths, self._backend.get_data_many(paths), strict=True):
            if code != OK or stat is None:
                continue  # purged meanwhile
            try:
                p = decode_notice(changes, data)
                pattern_path(p)  # one that cannot be a znode names nothing stored
                patterns.add(p)
            except (InvalidArgumentError, KeyError) as e:
                log.warning("Ignoring ACL change notice %s: %s", path, e)
            if now - stat.ctime > CHANGE_EXPIRATION_MS:
                expired.append(path)
        if reload:
            for p, entries in self._acls.read_many(sorted(patterns)).items():
                self._cache.update(p, entries)
        for path in expired:
            with contextlib.suppress(KafkaControllerError):  # another broker purged it
                self._backend.delete(path)
