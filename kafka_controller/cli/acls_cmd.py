"""``kafka-controller acls --add|--remove|--list``: Kafka's ``kafka-acls.sh --bootstrap-server``, through
CreateAcls, DeleteAcls and DescribeAcls (kafka-python's admin client), so it works against this
project's brokers and any Apache Kafka with an authorizer alike.

``--add`` makes one ACL per (principal, host, operation) for the resource: ``--allow-principal``
with ``--allow-host`` (default ``*``) makes ALLOW entries, ``--deny-principal`` with ``--deny-host``
DENY entries. ``--remove`` deletes the ACLs matching the same options (none given: every ACL of
the resource) without asking, as kafka-acls.sh does with ``--force``. ``--list`` shows the ACLs
of the resource (or of every resource), optionally of one ``--principal``.
``--resource-pattern-type`` is ``literal`` (default), ``prefixed``, or for ``--list`` and
``--remove`` also ``any`` and ``match``. The caller needs ALTER (add, remove) or DESCRIBE (list)
on the cluster; a broker without an authorizer answers SECURITY_DISABLED. Exit 0 when every
request succeeded, 1 otherwise, the broker's error in one line.
"""

from __future__ import annotations

import argparse
from typing import Any

from kafka_controller.cli import common, kafka_client

OPERATIONS = (
    "All",
    "Read",
    "Write",
    "Create",
    "Delete",
    "Alter",
    "Describe",
    "ClusterAction",
    "DescribeConfigs",
    "AlterConfigs",
    "IdempotentWrite",
)
CLUSTER_NAME = "kafka-cluster"


def register(subparsers: Any, summary: str) -> None:
    p = subparsers.add_parser(
        "acls",
        help=summary,
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--add", action="store_true", help="add ACLs")
    mode.add_argument("--remove", action="store_true", help="remove the matching ACLs")
    mode.add_argument("--list", action="store_true", help="list ACLs")
    resource = p.add_mutually_exclusive_group()
    resource.add_argument("--topic", metavar="NAME", help="a topic (or prefix, or * for all)")
    resource.add_argument("--group", metavar="NAME", help="a consumer group")
    resource.add_argument("--cluster", action="store_true", help="the cluster")
    resource.add_argument("--transactional-id", metavar="ID", help="a transactional id")
    p.add_argument(
        "--resource-pattern-type",
        default="literal",
        choices=("literal", "prefixed", "any", "match"),
        help="how the resource name matches (default: %(default)s; any/match for --list and --remove)",
    )
    p.add_argument("--allow-principal", action="append", default=[], metavar="TYPE:NAME")
    p.add_argument("--deny-principal", action="append", default=[], metavar="TYPE:NAME")
    p.add_argument("--allow-host", action="append", default=[], metavar="HOST")
    p.add_argument("--deny-host", action="append", default=[], metavar="HOST")
    p.add_argument(
        "--operation",
        action="append",
        default=[],
        choices=OPERATIONS,
        metavar="OP",
        help=", ".join(OPERATIONS),
    )
    p.add_argument("--principal", metavar="TYPE:NAME", help="with --list: only this principal's ACLs")
    kafka_client.add_connection_options(p)
    common.add_json_option(p)
    p.set_defaults(func=run)


def _resource(args: argparse.Namespace, a: Any) -> tuple[Any, str | None]:
    if args.topic is not None:
        return a.ResourceType.TOPIC, args.topic
    if args.group is not None:
        return a.ResourceType.GROUP, args.group
    if args.cluster:
        return a.ResourceType.CLUSTER, CLUSTER_NAME
    if args.transactional_id is not None:
        return a.ResourceType.TRANSACTIONAL_ID, args.transactional_id
    return a.ResourceType.ANY, None


def _entries(args: argparse.Namespace) -> list[tuple[str, str, str]]:
    """(principal, host, ALLOW/DENY) pairs from the principal and host options."""
    out = []
    for principals, hosts, kind in (
        (args.allow_principal, args.allow_host, "ALLOW"),
        (args.deny_principal, args.deny_host, "DENY"),
    ):
        for principal in principals:
            if ":" not in principal:
                raise common.UsageError(f"principal {principal!r} must be TYPE:NAME, e.g. User:alice")
            out += [(principal, host, kind) for host in hosts or ["*"]]
    return out


def _op(a: Any, name: str) -> Any:
    return a.ACLOperation["_".join(_words(name)).upper()]  # DescribeConfigs -> DESCRIBE_CONFIGS


def _words(name: str) -> list[str]:
    words, current = [], ""
    for ch in name:
        if ch.isupper() and current:
            words.append(current)
            current = ""
        current += ch
    return [*words, current]


def run(args: argparse.Namespace) -> int:
    from kafka import admin as a

    resource_type, name = _resource(args, a)
    pattern = a.ACLResourcePatternType[args.resource_pattern_type.upper()]
    entries = _entries(args)
    if args.add:
        if name is None:
            raise common.UsageError(
                "--add needs a resource: --topic, --group, --cluster or --transactional-id"
            )
        if pattern not in (a.ACLResourcePatternType.LITERAL, a.ACLResourcePatternType.PREFIXED):
            raise common.UsageError("--add takes --resource-pattern-type literal or prefixed")
        if not entries or not args.operation:
            raise common.UsageError("--add needs --allow-principal or --deny-principal, and --operation")
    from kafka.errors import KafkaError

    with kafka_client.kafka_admin(args) as admin:
        try:
            if args.add:
                return _add(args, a, admin, resource_type, name, pattern, entries)
            if args.remove:
                return _remove(args, a, admin, resource_type, name, pattern, entries)
            return _list(args, a, admin, resource_type, name, pattern)
        except KafkaError as e:
            raise common.CommandFailedError(
                f"the ACL request failed: {kafka_client.describe_error(e)}"
            ) from None


def _show(acl: Any) -> dict[str, Any]:
    p = acl.resource_pattern
    return {
        "resource_type": p.resource_type.name,
        "name": p.resource_name,
        "pattern_type": p.pattern_type.name,
        "principal": acl.principal,
        "host": acl.host,
        "operation": acl.operation.name,
        "permission_type": acl.permission_type.name,
    }


def _print(args: argparse.Namespace, title: str, acls: list[Any]) -> None:
    rows = [_show(acl) for acl in acls]
    if args.json:
        common.print_json({"acls": rows})
        return
    common.say(title)
    for r in rows:
        common.say(
            f"\t{r['resource_type']}:{r['name']} ({r['pattern_type']}): principal={r['principal']}, "
            f"host={r['host']}, operation={r['operation']}, permissionType={r['permission_type']}"
        )


def _add(args: argparse.Namespace, a: Any, admin: Any, rt: Any, name: Any, pattern: Any, entries: Any) -> int:
    resource = a.ResourcePattern(rt, name, pattern)
    acls = [
        a.ACL(principal, host, _op(a, op), a.ACLPermissionType[kind], resource)
        for principal, host, kind in entries
        for op in dict.fromkeys(args.operation)
    ]
    result = admin.create_acls(acls)
    if result["failed"]:
        errors = sorted({getattr(e, "__name__", str(e)) for e in result["failed"]})
        raise common.CommandFailedError(
            f"{len(result['failed'])} of {len(acls)} ACL(s) were not added: {', '.join(errors)}"
        )
    _print(args, f"Added {len(acls)} ACL(s) for {rt.name}:{name} ({pattern.name}):", result["succeeded"])
    return 0


def _remove(
    args: argparse.Namespace, a: Any, admin: Any, rt: Any, name: Any, pattern: Any, entries: Any
) -> int:
    resource = a.ResourcePatternFilter(rt, name, pattern)
    ops = [_op(a, op) for op in dict.fromkeys(args.operation)] or [a.ACLOperation.ANY]
    people = [(p, h, a.ACLPermissionType[k]) for p, h, k in entries] or [
        (None, None, a.ACLPermissionType.ANY)
    ]
    filters = [a.ACLFilter(p, h, op, perm, resource) for p, h, perm in people for op in ops]
    from kafka.errors import NoError

    removed: list[Any] = []
    for _filter, matching, error in admin.delete_acls(filters):
        if error is not NoError:
            raise common.CommandFailedError(f"removing ACLs failed: {error.__name__}")
        removed += matching
    _print(args, f"Removed {len(removed)} ACL(s):", removed)
    return 0


def _list(args: argparse.Namespace, a: Any, admin: Any, rt: Any, name: Any, pattern: Any) -> int:
    if name is None:
        pattern = a.ACLResourcePatternType.ANY
    acl_filter = a.ACLFilter(
        args.principal,
        None,
        a.ACLOperation.ANY,
        a.ACLPermissionType.ANY,
        a.ResourcePatternFilter(rt, name, pattern),
    )
    acls, _ = admin.describe_acls(acl_filter)
    _print(args, f"Current ACLs ({len(acls)}):", acls)
    return 0
