"""Kafka's ``kafka.security.authorizer.AclAuthorizer``: ACL values, the decision, and the cache.

**The decision** (``authorize``) is a pure function of the ACLs, the principal, the client's host,
the operation and the resource, with Kafka 2.8's rules (``AclAuthorizer.authorizeAction``):

* a principal in ``super.users`` is allowed everything;
* the ACLs that apply to a resource are the LITERAL ones on its exact name, the LITERAL ones on the
  wildcard name ``*``, and every PREFIXED one whose name starts the resource's name;
* when no ACL applies at all (for any principal), the answer is ``allow.everyone.if.no.acl.found``
  (default false);
* otherwise a matching DENY refuses, whatever the ALLOWs say; a matching ALLOW allows. An entry
  matches when its principal is the caller's or ``User:*``, its host the client's IP or ``*``, and
  its operation the one asked or ``All``. An ALLOW of READ, WRITE, DELETE or ALTER also allows
  DESCRIBE, and an ALLOW of ALTER_CONFIGS also allows DESCRIBE_CONFIGS; a DENY denies only its own
  operation (or every one, for ``All``).

**The cache** (``AclCache``) holds every resource pattern's entries as ZooKeeper has them; request
handler threads read it, the broker's task thread replaces one resource at a time when a change
notification names it (``kafka_controller.zk.store_acls``). ``Authorizer`` is what the broker's
APIs hold: the cache plus ``super.users`` and ``allow.everyone.if.no.acl.found``.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from kafka_controller.domain.errors import InvalidArgumentError

#: ``authorizer.class.name`` that turns the authorizer on (Kafka's ZooKeeper-backed one).
ACL_AUTHORIZER_CLASS = "kafka.security.authorizer.AclAuthorizer"
#: Kafka's older name of the same class (``kafka.security.auth.SimpleAclAuthorizer``, deprecated).
SIMPLE_ACL_AUTHORIZER_CLASS = "kafka.security.auth.SimpleAclAuthorizer"
WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"
#: The name of the one CLUSTER resource (Kafka's ``Resource.CLUSTER_NAME``).
CLUSTER_NAME = "kafka-cluster"
#: A bitfield of authorized operations that was not asked for (Kafka's ``Integer.MIN_VALUE``).
OPERATIONS_NOT_REQUESTED = -(2**31)


class ResourceType(enum.IntEnum):
    """Kafka's ``ResourceType`` codes."""

    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6


class AclOperation(enum.IntEnum):
    """Kafka's ``AclOperation`` codes."""

    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12


class PatternType(enum.IntEnum):
    """Kafka's ``PatternType`` codes (ANY and MATCH exist only in filters)."""

    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclPermissionType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


#: ZooKeeper's spelling of each (``SecurityUtils.resourceTypeName`` and friends): PascalCase.
RESOURCE_TYPE_NAMES = {
    ResourceType.TOPIC: "Topic",
    ResourceType.GROUP: "Group",
    ResourceType.CLUSTER: "Cluster",
    ResourceType.TRANSACTIONAL_ID: "TransactionalId",
    ResourceType.DELEGATION_TOKEN: "DelegationToken",
}
OPERATION_NAMES = {
    AclOperation.ALL: "All",
    AclOperation.READ: "Read",
    AclOperation.WRITE: "Write",
    AclOperation.CREATE: "Create",
    AclOperation.DELETE: "Delete",
    AclOperation.ALTER: "Alter",
    AclOperation.DESCRIBE: "Describe",
    AclOperation.CLUSTER_ACTION: "ClusterAction",
    AclOperation.DESCRIBE_CONFIGS: "DescribeConfigs",
    AclOperation.ALTER_CONFIGS: "AlterConfigs",
    AclOperation.IDEMPOTENT_WRITE: "IdempotentWrite",
}
PERMISSION_NAMES = {AclPermissionType.ALLOW: "Allow", AclPermissionType.DENY: "Deny"}

#: Operations an ALLOW of another implies (``AclAuthorizer``'s implied-allow sets).
_IMPLIED_BY = {
    AclOperation.DESCRIBE: frozenset(
        {
            AclOperation.DESCRIBE,
            AclOperation.READ,
            AclOperation.WRITE,
            AclOperation.DELETE,
            AclOperation.ALTER,
        }
    ),
    AclOperation.DESCRIBE_CONFIGS: frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}),
}
#: The operations whose bits an authorized-operations field reports (``AclEntry.supportedOperations``).
SUPPORTED_OPERATIONS = {
    ResourceType.TOPIC: (3, 4, 5, 6, 7, 8, 10, 11),
    ResourceType.CLUSTER: (5, 7, 8, 9, 10, 11, 12),
    ResourceType.GROUP: (3, 6, 8),
}


_E = TypeVar("_E", bound=enum.IntEnum)


def _by_name(names: Mapping[_E, str], text: str, what: str) -> _E:
    """PascalCase as Kafka writes it; Kafka's readers accept any case and underscores too."""
    wanted = text.replace("_", "").lower()
    for value, name in names.items():
        if name.lower() == wanted:
            return value
    raise InvalidArgumentError(f"unknown {what} {text!r}")


def resource_type_named(text: str) -> ResourceType:
    return _by_name(RESOURCE_TYPE_NAMES, text, "resource type")


def operation_named(text: str) -> AclOperation:
    return _by_name(OPERATION_NAMES, text, "operation")


def permission_named(text: str) -> AclPermissionType:
    return _by_name(PERMISSION_NAMES, text, "permission type")


@dataclass(frozen=True, slots=True, order=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL


@dataclass(frozen=True, slots=True, order=True)
class AccessControlEntry:
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType


@dataclass(frozen=True, slots=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """Kafka's ``AclBindingFilter``: None (or ANY) matches everything in that field."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY

    def matches_pattern(self, p: ResourcePattern) -> bool:
        """Kafka's ``ResourcePatternFilter.matches``: MATCH finds the patterns that apply to ``name``."""
        if self.resource_type != ResourceType.ANY and self.resource_type != p.resource_type:
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH, p.pattern_type):
            return False
        if self.name is None:
            return True
        if self.pattern_type in (PatternType.ANY, p.pattern_type):
            return self.name == p.name
        if p.pattern_type == PatternType.LITERAL:  # MATCH
            return self.name == p.name or p.name == WILDCARD
        return p.pattern_type == PatternType.PREFIXED and self.name.startswith(p.name)

    def matches_entry(self, e: AccessControlEntry) -> bool:
        return (
            (self.principal is None or self.principal == e.principal)
            and (self.host is None or self.host == e.host)
            and self.operation in (AclOperation.ANY, e.operation)
            and self.permission_type in (AclPermissionType.ANY, e.permission_type)
        )

    def matches(self, binding: AclBinding) -> bool:
        return self.matches_pattern(binding.pattern) and self.matches_entry(binding.entry)


#: Every resource pattern's entries (a pattern with none is absent).
Acls = Mapping[ResourcePattern, frozenset[AccessControlEntry]]


def parse_super_users(text: str | None) -> frozenset[str]:
    """``super.users``: principals separated by ``;`` (a DN may hold commas)."""
    return frozenset(p.strip() for p in (text or "").split(";") if p.strip())


class AclIndex:
    """The same ACLs keyed for the decision: per resource type, LITERAL names and PREFIXED names
    (with the prefix lengths that occur), so finding what applies to a name costs a few string
    lookups, whatever the number of ACLs."""

    __slots__ = ("literal", "prefix_lengths", "prefixed")

    def __init__(self, acls: Acls) -> None:
        self.literal: dict[ResourceType, dict[str, frozenset[AccessControlEntry]]] = {}
        self.prefixed: dict[ResourceType, dict[str, frozenset[AccessControlEntry]]] = {}
        lengths: dict[ResourceType, set[int]] = {}
        for p, entries in acls.items():
            if p.pattern_type == PatternType.LITERAL:
                self.literal.setdefault(p.resource_type, {})[p.name] = frozenset(entries)
            elif p.pattern_type == PatternType.PREFIXED:
                self.prefixed.setdefault(p.resource_type, {})[p.name] = frozenset(entries)
                lengths.setdefault(p.resource_type, set()).add(len(p.name))
        self.prefix_lengths = {rt: sorted(ls) for rt, ls in lengths.items()}

    def with_pattern(self, p: ResourcePattern, entries: frozenset[AccessControlEntry]) -> AclIndex:
        """A new index with one pattern's entries replaced (none: removed); only the names of that
        resource type and pattern type are copied, the rest is shared (neither is ever mutated)."""
        out = AclIndex({})
        out.literal, out.prefixed, out.prefix_lengths = (
            dict(self.literal),
            dict(self.prefixed),
            dict(self.prefix_lengths),
        )
        table = out.literal if p.pattern_type == PatternType.LITERAL else out.prefixed
        names = dict(table.get(p.resource_type, {}))
        if entries:
            names[p.name] = entries
        else:
            names.pop(p.name, None)
        table[p.resource_type] = names
        if p.pattern_type == PatternType.PREFIXED:
            out.prefix_lengths[p.resource_type] = sorted({len(n) for n in names})
        return out

    def applicable(self, resource_type: ResourceType, name: str) -> list[AccessControlEntry]:
        """The entries that apply to one resource: LITERAL exact and ``*``, PREFIXED of any prefix."""
        out: list[AccessControlEntry] = []
        literal = self.literal.get(resource_type)
        if literal:
            out.extend(literal.get(name, ()))
            out.extend(literal.get(WILDCARD, ()))
        prefixed = self.prefixed.get(resource_type)
        if prefixed:
            for length in self.prefix_lengths[resource_type]:
                if length > len(name):
                    break
                out.extend(prefixed.get(name[:length], ()))
        return out


def applicable_entries(
    acls: Acls | AclIndex, resource_type: ResourceType, name: str
) -> list[AccessControlEntry]:
    """The entries that apply to one resource (see ``AclIndex.applicable``)."""
    index = acls if isinstance(acls, AclIndex) else AclIndex(acls)
    return index.applicable(resource_type, name)


def _matches(e: AccessControlEntry, principal: str, host: str, operations: frozenset[AclOperation]) -> bool:
    return (
        e.principal in (principal, WILDCARD_PRINCIPAL)
        and e.host in (host, WILDCARD)
        and (e.operation == AclOperation.ALL or e.operation in operations)
    )


def authorize(
    acls: Acls | AclIndex,
    principal: str,
    host: str,
    operation: AclOperation,
    resource_type: ResourceType,
    name: str,
    *,
    super_users: frozenset[str] = frozenset(),
    allow_everyone_if_no_acl_found: bool = False,
) -> bool:
    """Whether ``principal`` from ``host`` may do ``operation`` on the resource (the rules above)."""
    if principal in super_users:
        return True
    entries = applicable_entries(acls, resource_type, name)
    if not entries:
        return allow_everyone_if_no_acl_found
    own = frozenset({operation})
    if any(
        e.permission_type == AclPermissionType.DENY and _matches(e, principal, host, own) for e in entries
    ):
        return False
    allowing = _IMPLIED_BY.get(operation, own)
    return any(
        e.permission_type == AclPermissionType.ALLOW and _matches(e, principal, host, allowing)
        for e in entries
    )


class AclCache:
    """Every pattern's entries; thread-safe (a whole snapshot is swapped, readers never lock long)."""

    def __init__(self, acls: Acls | None = None) -> None:
        self._lock = threading.Lock()
        self._acls: dict[ResourcePattern, frozenset[AccessControlEntry]] = {
            p: frozenset(es) for p, es in (acls or {}).items() if es
        }
        self._index = AclIndex(self._acls)

    def snapshot(self) -> Acls:
        return self._acls  # replaced, never mutated: a reader keeps a consistent view

    def index(self) -> AclIndex:
        return self._index  # replaced together with the snapshot, never mutated

    def replace_all(self, acls: Acls) -> None:
        fresh = {p: frozenset(es) for p, es in acls.items() if es}
        index = AclIndex(fresh)
        with self._lock:
            self._acls, self._index = fresh, index

    def update(self, pattern: ResourcePattern, entries: Iterable[AccessControlEntry]) -> None:
        """One pattern's entries as ZooKeeper now has them (none: the pattern is gone)."""
        fresh = frozenset(entries)
        with self._lock:
            acls = dict(self._acls)
            if fresh:
                acls[pattern] = fresh
            else:
                acls.pop(pattern, None)
            index = self._index
            if pattern.pattern_type in (PatternType.LITERAL, PatternType.PREFIXED):
                index = index.with_pattern(pattern, fresh)
            self._acls, self._index = acls, index

    def bindings(self, f: AclBindingFilter | None = None) -> list[AclBinding]:
        """Every binding the filter matches, sorted (Kafka's ``acls(filter)``)."""
        out = [AclBinding(p, e) for p, es in self._acls.items() for e in es]
        if f is not None:
            out = [b for b in out if f.matches(b)]
        return sorted(out, key=lambda b: (b.pattern, b.entry))


@dataclass(frozen=True)
class Authorizer:
    """The broker's authorizer: ``cache`` kept fresh by ZooKeeper's change notifications."""

    cache: AclCache
    super_users: frozenset[str] = frozenset()
    allow_everyone_if_no_acl_found: bool = False

    def authorize(
        self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType, name: str
    ) -> bool:
        return authorize(
            self.cache.index(),
            principal,
            host,
            operation,
            resource_type,
            name,
            super_users=self.super_users,
            allow_everyone_if_no_acl_found=self.allow_everyone_if_no_acl_found,
        )

    def authorized_operations(self, principal: str, host: str, resource_type: ResourceType, name: str) -> int:
        """Kafka's authorized-operations bitfield: bit ``1 << code`` per supported operation allowed."""
        bits = 0
        for code in SUPPORTED_OPERATIONS.get(resource_type, ()):
            if self.authorize(principal, host, AclOperation(code), resource_type, name):
                bits |= 1 << code
        return bits


def authorizer_enabled(class_name: str | None) -> bool:
    """Whether ``authorizer.class.name`` turns on the ACL authorizer; another class is refused
    (a typo must not leave a cluster open)."""
    name = (class_name or "").strip()
    if not name:
        return False
    if name in (ACL_AUTHORIZER_CLASS, SIMPLE_ACL_AUTHORIZER_CLASS):
        return True
    raise InvalidArgumentError(
        f"authorizer.class.name {name!r} is not supported: only {ACL_AUTHORIZER_CLASS} (or empty)"
    )


def authorizer_from(props: Mapping[str, str], cache: AclCache | None = None) -> Authorizer | None:
    """The broker's authorizer from its settings (``authorizer.class.name``, ``super.users``,
    ``allow.everyone.if.no.acl.found``), or None when none is configured (Kafka's default)."""
    if not authorizer_enabled(props.get("authorizer.class.name")):
        return None
    allow = str(props.get("allow.everyone.if.no.acl.found", "false")).strip().lower()
    if allow not in ("true", "false"):
        raise InvalidArgumentError(f"allow.everyone.if.no.acl.found must be true or false, not {allow!r}")
    return Authorizer(cache or AclCache(), parse_super_users(props.get("super.users")), allow == "true")
