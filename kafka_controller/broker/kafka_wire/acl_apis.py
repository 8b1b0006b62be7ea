"""DescribeAcls (29), CreateAcls (30) and DeleteAcls (31), versions 0-2 (2 is flexible), as Kafka
2.8's ``KafkaApis`` answers them over ``AclAuthorizer``.

Without an authorizer (``authorizer.class.name`` unset, Kafka's default) each is answered
SECURITY_DISABLED, as Kafka does. With one, the caller needs DESCRIBE on CLUSTER to describe and
ALTER on CLUSTER to create or delete (CLUSTER_AUTHORIZATION_FAILED otherwise, at the top level,
resp. for every creation or filter). ACLs are written to ZooKeeper (``zk.store_acls``), whence every
broker's cache learns them from the change notices; DescribeAcls answers from this broker's cache.

CreateAcls refuses, per creation, with INVALID_REQUEST: an unknown or non-concrete resource type,
pattern type, operation or permission; a CLUSTER name other than ``kafka-cluster``; an empty
resource name; a principal without ``Type:``; PREFIXED at v0 (v0 knows only LITERAL).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode as E
from kio.static.primitive import i8

from kafka_controller.broker.kafka_wire.header import RequestHeader
from kafka_controller.broker.kafka_wire.kio_api import KioApi, response_schema
from kafka_controller.broker.kafka_wire.kio_build import NO_THROTTLE, build, nested
from kafka_controller.domain.errors import InvalidArgumentError, KafkaControllerError
from kafka_controller.security.authorizer import (
    CLUSTER_NAME,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    Authorizer,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from kafka_controller.zk.store_acls import ZkAclStore, check_resource_name

log = logging.getLogger(__name__)

DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 29, 30, 31
SECURITY_DISABLED_MESSAGE = "No Authorizer is configured on the broker"
_CONCRETE_TYPES = frozenset(ResourceType) - {ResourceType.UNKNOWN, ResourceType.ANY}
_CONCRETE_OPS = frozenset(AclOperation) - {AclOperation.UNKNOWN, AclOperation.ANY}

#: ``allowed(operation, resource_type, name) -> bool`` for the calling connection.
Allowed = Callable[[AclOperation, ResourceType, str], bool]


def _enum(cls: Any, value: int) -> Any:
    try:
        return cls(int(value))
    except ValueError:
        return cls.UNKNOWN


def _binding(c: Any, version: int) -> AclBinding:
    """One creation as a binding, or ``InvalidArgumentError`` saying what is wrong with it."""
    rt = _enum(ResourceType, c.resource_type)
    pt = _enum(PatternType, c.resource_pattern_type) if version >= 1 else PatternType.LITERAL
    op = _enum(AclOperation, c.operation)
    perm = _enum(AclPermissionType, c.permission_type)
    if rt not in _CONCRETE_TYPES:
        raise InvalidArgumentError(f"Invalid resource type {int(c.resource_type)}")
    if pt not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise InvalidArgumentError(f"Invalid pattern type {int(c.resource_pattern_type)}")
    if op not in _CONCRETE_OPS:
        raise InvalidArgumentError(f"Invalid operation {int(c.operation)}")
    if perm not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        raise InvalidArgumentError(f"Invalid permission type {int(c.permission_type)}")
    if rt == ResourceType.CLUSTER and c.resource_name != CLUSTER_NAME:
        raise InvalidArgumentError(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    if not c.resource_name:
        raise InvalidArgumentError("Invalid empty resource name")
    kind, sep, name = c.principal.partition(":")
    if not (kind and sep and name):
        raise InvalidArgumentError(f"Invalid principal {c.principal!r}: expected 'Type:name'")
    if not c.host:
        raise InvalidArgumentError("Invalid empty host")
    check_resource_name(c.resource_name)
    return AclBinding(
        ResourcePattern(rt, c.resource_name, pt), AccessControlEntry(c.principal, c.host, op, perm)
    )


def _filter(f: Any, version: int) -> AclBindingFilter:
    pt = _enum(PatternType, f.pattern_type_filter) if version >= 1 else PatternType.LITERAL
    out = AclBindingFilter(
        _enum(ResourceType, f.resource_type_filter),
        f.resource_name_filter,
        pt,
        f.principal_filter,
        f.host_filter,
        _enum(AclOperation, f.operation),
        _enum(AclPermissionType, f.permission_type),
    )
    if out.operation == AclOperation.UNKNOWN or out.resource_type == ResourceType.UNKNOWN:
        raise InvalidArgumentError("The filter has an unknown resource type or operation")
    if out.pattern_type == PatternType.UNKNOWN or out.permission_type == AclPermissionType.UNKNOWN:
        raise InvalidArgumentError("The filter has an unknown pattern or permission type")
    return out


class _Removal:
    """The change DeleteAcls makes to one pattern; ``removed`` is what the last try took away."""

    def __init__(self, pattern: ResourcePattern, filters: list[AclBindingFilter]) -> None:
        self.pattern = pattern
        self.filters = filters
        self.removed: list[AclBinding] = []

    def __call__(self, current: frozenset[AccessControlEntry]) -> frozenset[AccessControlEntry]:
        bindings = (AclBinding(self.pattern, e) for e in current)
        self.removed = sorted(
            (b for b in bindings if any(f.matches(b) for f in self.filters)), key=lambda b: b.entry
        )
        return current - {b.entry for b in self.removed}


class AclApis:
    """``authorizer`` None: the broker has none (every ACL API is SECURITY_DISABLED)."""

    def __init__(self, authorizer: Authorizer | None, store: ZkAclStore | None, allowed: Allowed) -> None:
        self.authorizer = authorizer
        self.store = store
        self.allowed = allowed

    def apis(self) -> dict[int, KioApi]:
        return {
            DESCRIBE_ACLS: KioApi(DESCRIBE_ACLS, 0, 2, 2, self.describe),
            CREATE_ACLS: KioApi(CREATE_ACLS, 0, 2, 2, self.create),
            DELETE_ACLS: KioApi(DELETE_ACLS, 0, 2, 2, self.delete),
        }

    def _cluster(self, operation: AclOperation) -> bool:
        return self.allowed(operation, ResourceType.CLUSTER, CLUSTER_NAME)

    # -- DescribeAcls ------------------------------------------------------------------------------
    def describe(self, header: RequestHeader, request: Any) -> Any:
        v = header.api_version
        schema = response_schema(DESCRIBE_ACLS, v)
        Resource, Description = nested(schema, "DescribeAclsResource"), nested(schema, "AclDescription")

        def answer(code: E, message: str | None, resources: tuple[Any, ...] = ()) -> Any:
            return build(
                schema, throttle_time=NO_THROTTLE, error_code=code, error_message=message, resources=resources
            )

        if self.authorizer is None:
            return answer(E.security_disabled, SECURITY_DISABLED_MESSAGE)
        if not self._cluster(AclOperation.DESCRIBE):
            return answer(E.cluster_authorization_failed, None)
        try:
            f = _filter(request, v)
        except InvalidArgumentError as e:
            return answer(E.invalid_request, str(e))
        grouped: dict[ResourcePattern, list[AccessControlEntry]] = defaultdict(list)
        for b in self.authorizer.cache.bindings(f):
            grouped[b.pattern].append(b.entry)
        resources = tuple(
            build(
                Resource,
                resource_type=i8(p.resource_type),
                resource_name=p.name,
                pattern_type=i8(p.pattern_type),
                acls=tuple(
                    Description(
                        principal=e.principal,
                        host=e.host,
                        operation=i8(e.operation),
                        permission_type=i8(e.permission_type),
                    )
                    for e in entries
                ),
            )
            for p, entries in sorted(grouped.items())
        )
        return answer(E.none, None, resources)

    # -- CreateAcls --------------------------------------------------------------------------------
    def create(self, header: RequestHeader, request: Any) -> Any:
        v = header.api_version
        schema = response_schema(CREATE_ACLS, v)
        Result = nested(schema, "AclCreationResult")
        if self.authorizer is None or self.store is None:
            code, message = E.security_disabled, SECURITY_DISABLED_MESSAGE
            results = tuple(Result(error_code=code, error_message=message) for _ in request.creations)
            return build(schema, throttle_time=NO_THROTTLE, results=results)
        if not self._cluster(AclOperation.ALTER):
            results = tuple(
                Result(error_code=E.cluster_authorization_failed, error_message=None)
                for _ in request.creations
            )
            return build(schema, throttle_time=NO_THROTTLE, results=results)
        outcome: list[tuple[E, str | None]] = [(E.none, None)] * len(request.creations)
        wanted: dict[ResourcePattern, list[tuple[int, AccessControlEntry]]] = defaultdict(list)
        for i, c in enumerate(request.creations):
            try:
                b = _binding(c, v)
            except InvalidArgumentError as e:
                outcome[i] = (E.invalid_request, str(e))
                continue
            wanted[b.pattern].append((i, b.entry))
        store = self.store
        for pattern, items in sorted(wanted.items()):
            added = frozenset(e for _, e in items)
            try:
                entries = store.update(pattern, lambda current, added=added: current | added)  # type: ignore[misc]
            except KafkaControllerError as e:
                log.warning("CreateAcls: writing the ACLs of %s failed: %s", pattern, e)
                for i, _ in items:
                    outcome[i] = (E.unknown_server_error, f"Failed to update ACLs for {pattern}")
                continue
            self.authorizer.cache.update(pattern, entries)  # this broker sees it at once
            log.info("ACLs added to %s: %s", pattern, ", ".join(map(str, sorted(added))))
        results = tuple(Result(error_code=code, error_message=msg) for code, msg in outcome)
        return build(schema, throttle_time=NO_THROTTLE, results=results)

    # -- DeleteAcls --------------------------------------------------------------------------------
    def delete(self, header: RequestHeader, request: Any) -> Any:
        v = header.api_version
        schema = response_schema(DELETE_ACLS, v)
        FilterResult, Matching = (
            nested(schema, "DeleteAclsFilterResult"),
            nested(schema, "DeleteAclsMatchingAcl"),
        )

        def answer(results: list[Any]) -> Any:
            return build(schema, throttle_time=NO_THROTTLE, filter_results=tuple(results))

        def failed(code: E, message: str | None) -> Any:
            return FilterResult(error_code=code, error_message=message, matching_acls=())

        if self.authorizer is None or self.store is None:
            return answer([failed(E.security_disabled, SECURITY_DISABLED_MESSAGE) for _ in request.filters])
        if not self._cluster(AclOperation.ALTER):
            return answer([failed(E.cluster_authorization_failed, None) for _ in request.filters])
        filters: list[AclBindingFilter | InvalidArgumentError] = []
        for f in request.filters:
            try:
                filters.append(_filter(f, v))
            except InvalidArgumentError as e:
                filters.append(e)
        valid = [f for f in filters if isinstance(f, AclBindingFilter)]
        patterns = sorted({b.pattern for f in valid for b in self.authorizer.cache.bindings(f)})
        deleted: dict[int, list[AclBinding]] = defaultdict(list)
        errors: dict[int, str] = {}
        store = self.store
        for pattern in patterns:
            change = _Removal(pattern, valid)
            try:
                entries = store.update(pattern, change)
            except KafkaControllerError as e:
                log.warning("DeleteAcls: writing the ACLs of %s failed: %s", pattern, e)
                for i, f in enumerate(filters):
                    if isinstance(f, AclBindingFilter) and f.matches_pattern(pattern):
                        errors[i] = f"Failed to delete ACLs of {pattern}"
                continue
            self.authorizer.cache.update(pattern, entries)
            for b in change.removed:
                for i, f in enumerate(filters):
                    if isinstance(f, AclBindingFilter) and f.matches(b):
                        deleted[i].append(b)
            if change.removed:
                log.info("ACLs removed from %s: %s", pattern, ", ".join(str(b.entry) for b in change.removed))
        results = []
        for i, f in enumerate(filters):
            if isinstance(f, InvalidArgumentError):
                results.append(failed(E.invalid_request, str(f)))
            elif i in errors:
                results.append(failed(E.unknown_server_error, errors[i]))
            else:
                matching = tuple(
                    build(
                        Matching,
                        error_code=E.none,
                        error_message=None,
                        resource_type=i8(b.pattern.resource_type),
                        resource_name=b.pattern.name,
                        pattern_type=i8(b.pattern.pattern_type),
                        principal=b.entry.principal,
                        host=b.entry.host,
                        operation=i8(b.entry.operation),
                        permission_type=i8(b.entry.permission_type),
                    )
                    for b in deleted[i]
                )
                results.append(FilterResult(error_code=E.none, error_message=None, matching_acls=matching))
        return answer(results)
