"""``kafka-controller acls --add/--list/--remove`` (kafka-acls.sh) against an in-process broker."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from kafka_controller.broker.server import BrokerServer
from kafka_controller.security.authorizer import AclOperation, AclPermissionType, PatternType, ResourceType
from tests.broker.helpers import wait_until
from tests.cli.clirun import run

ON = {
    "listeners": "PLAINTEXT://127.0.0.1:0",
    "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
    "super.users": "User:ANONYMOUS",  # the CLI connects over PLAINTEXT here
}


def test_add_list_remove(
    capsys: pytest.CaptureFixture[str], start_broker: Callable[..., BrokerServer]
) -> None:
    broker = start_broker(1, ON)
    wait_until(lambda: broker.metadata_cache.alive_brokers(), "the broker to know itself")
    server = f"127.0.0.1:{broker.port}"
    added = run(
        capsys,
        "acls",
        "--add",
        "--bootstrap-server",
        server,
        "--topic",
        "ord",
        "--resource-pattern-type",
        "prefixed",
        "--allow-principal",
        "User:alice",
        "--operation",
        "Read",
        "--operation",
        "DescribeConfigs",
        "--timeout",
        "10",
    )
    assert added.code == 0, added.err
    authz = broker.authorization.authorizer
    assert authz is not None
    assert {(b.pattern.name, b.pattern.pattern_type, b.entry.operation) for b in authz.cache.bindings()} == {
        ("ord", PatternType.PREFIXED, AclOperation.READ),
        ("ord", PatternType.PREFIXED, AclOperation.DESCRIBE_CONFIGS),
    }
    assert authz.authorize("User:alice", "10.0.0.1", AclOperation.DESCRIBE, ResourceType.TOPIC, "orders")

    listed = run(capsys, "acls", "--list", "--bootstrap-server", server, "--json", "--timeout", "10")
    assert listed.code == 0, listed.err
    rows = listed.json()["acls"]
    assert sorted(r["operation"] for r in rows) == ["DESCRIBE_CONFIGS", "READ"]
    assert {r["permission_type"] for r in rows} == {AclPermissionType.ALLOW.name}

    removed = run(
        capsys,
        "acls",
        "--remove",
        "--bootstrap-server",
        server,
        "--topic",
        "ord",
        "--resource-pattern-type",
        "prefixed",
        "--operation",
        "Read",
        "--timeout",
        "10",
    )
    assert removed.code == 0, removed.err
    assert [b.entry.operation for b in authz.cache.bindings()] == [AclOperation.DESCRIBE_CONFIGS]


def test_refusals_are_one_line(
    capsys: pytest.CaptureFixture[str], start_broker: Callable[..., BrokerServer]
) -> None:
    open_broker = start_broker(1, {"listeners": "PLAINTEXT://127.0.0.1:0"})  # no authorizer
    server = f"127.0.0.1:{open_broker.port}"
    args = ("acls", "--add", "--bootstrap-server", server, "--cluster", "--allow-principal", "User:a")
    refused = run(capsys, *args, "--operation", "Alter", "--timeout", "10")
    assert refused.code == 1 and "SecurityDisabled" in refused.error_line
    usage = run(capsys, *args, "--timeout", "10")  # no --operation
    assert usage.code == 2 and "--operation" in usage.error_line
    bad = run(
        capsys, "acls", "--add", "--bootstrap-server", server, "--topic", "t", "--allow-principal", "alice"
    )
    assert bad.code == 2 and "TYPE:NAME" in bad.error_line
