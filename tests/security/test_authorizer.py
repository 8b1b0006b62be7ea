"""The authorizer's decision against Kafka 2.8's rules (``AclAuthorizer.authorizeAction``), the ACL
znodes' and change notices' formats (``ZkData.scala``), and the cache kept by the notices."""

from __future__ import annotations

import orjson
import pytest

from kafka_controller.domain.errors import InvalidArgumentError
from kafka_controller.dryrun.memory_store import InMemoryMetadataStore
from kafka_controller.dryrun.memory_zk import InMemoryZooKeeper
from kafka_controller.security.authorizer import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclCache,
    AclOperation,
    AclPermissionType,
    Authorizer,
    PatternType,
    ResourcePattern,
    ResourceType,
    authorize,
    authorizer_from,
    parse_super_users,
)
from kafka_controller.zk.store_acls import (
    AclChangeListener,
    ZkAclStore,
    decode_entries,
    decode_notice,
    encode_entries,
    encode_notice,
)

Op, T, P, R = AclOperation, ResourceType, PatternType, AclPermissionType
ALLOW, DENY = R.ALLOW, R.DENY
ALICE, BOB = "User:alice", "User:bob"


def acl(
    principal: str, op: AclOperation, perm: AclPermissionType = ALLOW, host: str = "*"
) -> AccessControlEntry:
    return AccessControlEntry(principal, host, op, perm)


def topic(name: str, pattern: PatternType = P.LITERAL) -> ResourcePattern:
    return ResourcePattern(T.TOPIC, name, pattern)


# (acls, principal, host, operation, topic name, expected): Kafka's cases
CASES = [
    ({}, ALICE, "1.2.3.4", Op.READ, "orders", False),  # no ACL: allow.everyone.if.no.acl.found=false
    ({topic("orders"): {acl(ALICE, Op.READ)}}, ALICE, "1.2.3.4", Op.READ, "orders", True),
    ({topic("orders"): {acl(ALICE, Op.READ)}}, BOB, "1.2.3.4", Op.READ, "orders", False),
    ({topic("orders"): {acl(ALICE, Op.READ)}}, ALICE, "1.2.3.4", Op.WRITE, "orders", False),
    ({topic("orders"): {acl(ALICE, Op.READ)}}, ALICE, "1.2.3.4", Op.READ, "other", False),
    # wildcard resource, principal and host
    ({topic("*"): {acl(ALICE, Op.READ)}}, ALICE, "1.2.3.4", Op.READ, "anything", True),
    ({topic("orders"): {acl("User:*", Op.READ)}}, BOB, "1.2.3.4", Op.READ, "orders", True),
    ({topic("orders"): {acl(ALICE, Op.READ, host="1.2.3.4")}}, ALICE, "1.2.3.4", Op.READ, "orders", True),
    ({topic("orders"): {acl(ALICE, Op.READ, host="1.2.3.4")}}, ALICE, "5.6.7.8", Op.READ, "orders", False),
    # PREFIXED
    ({topic("ord", P.PREFIXED): {acl(ALICE, Op.WRITE)}}, ALICE, "h", Op.WRITE, "orders", True),
    ({topic("ord", P.PREFIXED): {acl(ALICE, Op.WRITE)}}, ALICE, "h", Op.WRITE, "or", False),
    ({topic("orders", P.PREFIXED): {acl(ALICE, Op.WRITE)}}, ALICE, "h", Op.WRITE, "orders", True),
    # DENY wins, over ALLOW on any pattern that applies
    (
        {topic("orders"): {acl(ALICE, Op.READ), acl(ALICE, Op.READ, DENY)}},
        ALICE,
        "h",
        Op.READ,
        "orders",
        False,
    ),
    (
        {topic("*"): {acl(ALICE, Op.ALL)}, topic("ord", P.PREFIXED): {acl(ALICE, Op.READ, DENY)}},
        ALICE,
        "h",
        Op.READ,
        "orders",
        False,
    ),
    (
        {topic("orders"): {acl(ALICE, Op.READ), acl("User:*", Op.ALL, DENY)}},
        ALICE,
        "h",
        Op.READ,
        "orders",
        False,
    ),
    # a DENY denies only its own operation (no implication for DENY)
    (
        {topic("orders"): {acl(ALICE, Op.READ), acl(ALICE, Op.DESCRIBE, DENY)}},
        ALICE,
        "h",
        Op.READ,
        "orders",
        True,
    ),
    (
        {topic("orders"): {acl(ALICE, Op.DESCRIBE), acl(ALICE, Op.READ, DENY)}},
        ALICE,
        "h",
        Op.DESCRIBE,
        "orders",
        True,
    ),
    # ALL implies everything; READ/WRITE/DELETE/ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS
    ({topic("orders"): {acl(ALICE, Op.ALL)}}, ALICE, "h", Op.ALTER_CONFIGS, "orders", True),
    ({topic("orders"): {acl(ALICE, Op.READ)}}, ALICE, "h", Op.DESCRIBE, "orders", True),
    ({topic("orders"): {acl(ALICE, Op.WRITE)}}, ALICE, "h", Op.DESCRIBE, "orders", True),
    ({topic("orders"): {acl(ALICE, Op.DELETE)}}, ALICE, "h", Op.DESCRIBE, "orders", True),
    ({topic("orders"): {acl(ALICE, Op.ALTER)}}, ALICE, "h", Op.DESCRIBE, "orders", True),
    ({topic("orders"): {acl(ALICE, Op.CREATE)}}, ALICE, "h", Op.DESCRIBE, "orders", False),
    ({topic("orders"): {acl(ALICE, Op.DESCRIBE)}}, ALICE, "h", Op.READ, "orders", False),
    ({topic("orders"): {acl(ALICE, Op.ALTER_CONFIGS)}}, ALICE, "h", Op.DESCRIBE_CONFIGS, "orders", True),
    ({topic("orders"): {acl(ALICE, Op.DESCRIBE_CONFIGS)}}, ALICE, "h", Op.ALTER_CONFIGS, "orders", False),
    ({topic("orders"): {acl(ALICE, Op.ALTER)}}, ALICE, "h", Op.ALTER_CONFIGS, "orders", False),
    # an ACL for someone else on the resource: not "no ACL found"
    ({topic("orders"): {acl(BOB, Op.READ)}}, ALICE, "h", Op.READ, "orders", False),
]


@pytest.mark.parametrize(("acls", "principal", "host", "op", "name", "expected"), CASES)
def test_kafka_decision_table(
    acls: dict[ResourcePattern, set[AccessControlEntry]],
    principal: str,
    host: str,
    op: AclOperation,
    name: str,
    expected: bool,
) -> None:
    frozen = {p: frozenset(es) for p, es in acls.items()}
    assert authorize(frozen, principal, host, op, T.TOPIC, name) is expected


def test_super_users_and_allow_everyone_if_no_acl_found() -> None:
    denied = {topic("orders"): frozenset({acl(ALICE, Op.ALL, DENY)})}
    supers = parse_super_users("User:admin; User:CN=broker,O=acme ;")
    assert supers == {"User:admin", "User:CN=broker,O=acme"}
    assert authorize(denied, "User:CN=broker,O=acme", "h", Op.DELETE, T.TOPIC, "orders", super_users=supers)
    assert not authorize(denied, ALICE, "h", Op.READ, T.TOPIC, "orders", super_users=supers)
    # allow.everyone.if.no.acl.found applies only where no ACL at all applies
    assert authorize({}, ALICE, "h", Op.READ, T.TOPIC, "x", allow_everyone_if_no_acl_found=True)
    only_bob = {topic("x"): frozenset({acl(BOB, Op.READ)})}
    assert not authorize(only_bob, ALICE, "h", Op.READ, T.TOPIC, "x", allow_everyone_if_no_acl_found=True)
    # the resource type matters
    group = {ResourcePattern(T.GROUP, "orders"): frozenset({acl(ALICE, Op.READ)})}
    assert not authorize(group, ALICE, "h", Op.READ, T.TOPIC, "orders")


def test_authorized_operations_bitfield() -> None:
    cache = AclCache({topic("orders"): frozenset({acl(ALICE, Op.READ), acl(ALICE, Op.ALTER_CONFIGS)})})
    a = Authorizer(cache)
    bits = a.authorized_operations(ALICE, "h", T.TOPIC, "orders")
    assert bits == (1 << 3) | (1 << 8) | (1 << 10) | (
        1 << 11
    )  # READ, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS
    assert a.authorized_operations(BOB, "h", T.TOPIC, "orders") == 0


def test_binding_filters_as_kafka_matches_them() -> None:
    lit, pre, wild = topic("orders"), topic("ord", P.PREFIXED), topic("*")
    assert AclBindingFilter(T.TOPIC, "orders", P.MATCH).matches_pattern(lit)
    assert AclBindingFilter(T.TOPIC, "orders", P.MATCH).matches_pattern(pre)
    assert AclBindingFilter(T.TOPIC, "orders", P.MATCH).matches_pattern(wild)
    assert not AclBindingFilter(T.TOPIC, "orders", P.LITERAL).matches_pattern(pre)
    assert AclBindingFilter(T.ANY, "ord", P.ANY).matches_pattern(pre)
    assert not AclBindingFilter(T.GROUP).matches_pattern(lit)
    b = AclBinding(lit, acl(ALICE, Op.READ))
    assert AclBindingFilter(principal=ALICE, operation=Op.READ).matches(b)
    assert not AclBindingFilter(principal=BOB).matches(b)
    assert not AclBindingFilter(permission_type=DENY).matches(b)


def test_authorizer_settings() -> None:
    assert authorizer_from({}) is None
    a = authorizer_from(
        {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "super.users": "User:admin"}
    )
    assert a is not None and a.super_users == {"User:admin"} and not a.allow_everyone_if_no_acl_found
    with pytest.raises(InvalidArgumentError, match=r"authorizer\.class\.name"):
        authorizer_from({"authorizer.class.name": "kafka.security.authorizer.AclAuthoriser"})


# -- ZooKeeper formats ------------------------------------------------------------------------------
def test_znode_and_notice_formats_are_kafkas() -> None:
    data = encode_entries({acl(ALICE, Op.READ)})
    assert orjson.loads(data) == {
        "version": 1,
        "acls": [{"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"}],
    }
    assert data.startswith(b'{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow"')
    kafka_written = orjson.dumps(
        {
            "version": 1,
            "acls": [
                {
                    "principal": "User:bob",
                    "permissionType": "DENY",
                    "operation": "DESCRIBE_CONFIGS",
                    "host": "10.0.0.1",
                }
            ],
        }
    )
    assert decode_entries(kafka_written, "/p") == {acl(BOB, Op.DESCRIBE_CONFIGS, DENY, "10.0.0.1")}
    assert encode_notice(topic("orders")) == ("/kafka-acl-changes", b"TOPIC:orders")
    path, notice = encode_notice(ResourcePattern(T.TRANSACTIONAL_ID, "tx", P.PREFIXED))
    assert path == "/kafka-acl-extended-changes"
    assert notice == b'{"version":1,"resourceType":"TRANSACTIONAL_ID","name":"tx","patternType":"PREFIXED"}'
    assert decode_notice(path, notice) == ResourcePattern(T.TRANSACTIONAL_ID, "tx", P.PREFIXED)
    assert decode_notice("/kafka-acl-changes", b"CLUSTER:kafka-cluster") == ResourcePattern(
        T.CLUSTER, "kafka-cluster"
    )


def test_writes_land_in_kafkas_paths_and_reach_another_brokers_cache() -> None:
    tree = InMemoryZooKeeper()
    writer_zk, reader_zk = InMemoryMetadataStore(tree), InMemoryMetadataStore(tree)
    writer = ZkAclStore(writer_zk._backend)
    tasks: list = []
    cache = AclCache()
    listener = AclChangeListener(
        reader_zk, ZkAclStore(reader_zk._backend), reader_zk._backend, cache, tasks.append
    )
    listener.start()
    writer.update(topic("orders"), lambda cur: cur | {acl(ALICE, Op.READ)})
    writer.update(topic("ord", P.PREFIXED), lambda cur: cur | {acl(BOB, Op.WRITE)})
    raw = writer_zk.read_raw(["/kafka-acl/Topic/orders", "/kafka-acl-extended/prefixed/Topic/ord"])
    assert [r[0] for r in raw] == [0, 0]
    assert writer_zk.path_exists("/kafka-acl-changes") and writer_zk.path_exists(
        "/kafka-acl-extended-changes"
    )
    while tasks:  # the watches only enqueued; the broker's task thread runs these
        tasks.pop(0)()
    assert cache.snapshot() == {
        topic("orders"): {acl(ALICE, Op.READ)},
        topic("ord", P.PREFIXED): {acl(BOB, Op.WRITE)},
    }
    writer.update(topic("orders"), lambda cur: frozenset())  # the last entry gone: znode deleted
    assert not writer_zk.path_exists("/kafka-acl/Topic/orders")
    while tasks:
        tasks.pop(0)()
    assert topic("orders") not in cache.snapshot()
    # a broker started later loads what is there
    late = AclCache()
    AclChangeListener(
        reader_zk, ZkAclStore(reader_zk._backend), reader_zk._backend, late, tasks.append
    ).start()
    assert late.snapshot() == {topic("ord", P.PREFIXED): {acl(BOB, Op.WRITE)}}


def test_notices_older_than_fifteen_minutes_are_purged_by_whoever_reads_them() -> None:
    now = [0]
    tree = InMemoryZooKeeper(clock_ms=lambda: now[0])
    zk = InMemoryMetadataStore(tree)
    store = ZkAclStore(zk._backend)
    store.create_paths()
    old = store.notify(topic("a"))
    tasks: list = []

    class Clock:
        def time_ms(self) -> int:
            return now[0]

    listener = AclChangeListener(zk, store, zk._backend, AclCache(), tasks.append, Clock())  # type: ignore[arg-type]
    listener.start()
    assert zk.path_exists(old)  # young: kept
    now[0] = 15 * 60 * 1000 + 1
    fresh = store.notify(topic("b"))
    while tasks:
        tasks.pop(0)()
    assert zk.path_exists(fresh)
    # the old one was seen at start; a broker starting now purges it
    AclChangeListener(zk, store, zk._backend, AclCache(), tasks.append, Clock()).start()  # type: ignore[arg-type]
    assert not zk.path_exists(old) and zk.path_exists(fresh)


def test_the_cache_index_kept_by_updates_decides_as_one_built_from_scratch() -> None:
    import random

    from kafka_controller.security.authorizer import AclIndex

    rng = random.Random(7)
    cache = AclCache()
    names = ["", "o", "or", "ord", "orders", "*", "other", "x"]
    for _ in range(300):
        p = ResourcePattern(
            rng.choice([T.TOPIC, T.GROUP]), rng.choice(names) or "o", rng.choice([P.LITERAL, P.PREFIXED])
        )
        entries = {
            acl(
                rng.choice([ALICE, BOB, "User:*"]),
                rng.choice([Op.READ, Op.ALL, Op.DESCRIBE]),
                rng.choice([ALLOW, DENY]),
            )
            for _ in range(rng.randrange(0, 3))
        }
        cache.update(p, entries)
        rebuilt = AclIndex(cache.snapshot())
        for name in ("orders", "ord", "x", "other"):
            for rt in (T.TOPIC, T.GROUP):
                kept = sorted(cache.index().applicable(rt, name))
                assert kept == sorted(rebuilt.applicable(rt, name))
                assert kept == sorted(applicable_from_scratch(cache.snapshot(), rt, name))


def applicable_from_scratch(acls: dict, rt: ResourceType, name: str) -> list[AccessControlEntry]:
    """The rule written out plainly: literal name or ``*``, or a prefixed pattern the name starts with."""
    out: list[AccessControlEntry] = []
    for p, entries in acls.items():
        if p.resource_type != rt:
            continue
        if (p.pattern_type == P.LITERAL and p.name in (name, "*")) or (
            p.pattern_type == P.PREFIXED and name.startswith(p.name)
        ):
            out.extend(entries)
    return out
