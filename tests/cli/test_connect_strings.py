"""A bad ZooKeeper connect string, from ``--zookeeper`` or ``$KAFKA_CONTROLLER_ZOOKEEPER``, is one line
naming what is wrong and exit 2 for every command that takes one: checked before anything connects,
so no ZooKeeper is needed here."""

from __future__ import annotations

import pytest

from kafka_controller.cli.common import ZOOKEEPER_ENV
from kafka_controller.domain.errors import InvalidArgumentError
from kafka_controller.zk.paths import parse_connect_string
from tests.cli.clirun import run
from tests.cli.parsers import zookeeper_commands

#: The least each command needs past argparse, so that the connect string is what fails.
MINIMAL: dict[tuple[str, ...], list[str]] = {
    ("acls",): ["--list"],
    ("broker",): ["--broker-id", "1"],
    ("close-session",): ["--data-dir", "/nonexistent/data"],
    ("configs", "alter"): ["--entity-type", "topics", "--entity-name", "t", "--add-config", "a=1"],
    ("configs", "describe"): ["--entity-type", "topics", "--entity-name", "t"],
    ("describe",): [],
    ("elect",): ["--election-type", "preferred", "--all-topic-partitions"],
    ("reassign",): ["--verify", "--reassignment-json-file", "/nonexistent/plan.json"],
    ("reconcile", "export"): ["--out", "/nonexistent/snapshot"],
    ("shutdown",): ["--broker-id", "1"],
    ("topics", "alter"): ["--topic", "t", "--partitions", "2"],
    ("topics", "create"): ["--topic", "t", "--partitions", "1", "--replication-factor", "1"],
    ("topics", "delete"): ["--topic", "t"],
    ("topics", "describe"): [],
    ("topics", "list"): [],
}

BAD = {
    "127.0.0.1:21810000": "port 21810000 is out of range 1-65535",
    "127.0.0.1:2181 ": "whitespace at its end",
    " 127.0.0.1:2181": "whitespace at its start",
    "127.0.0.1:abc": "port 'abc' is not a number",
    "127.0.0.1:2181,": "host 2 of 2 is empty (a stray ',')",
    "h1:2181,,h2:2181": "host 2 of 3 is empty (a stray ',')",
    "h1:2181,h2:99999": "port 99999 of host 2 is out of range 1-65535",
    "127.0.0.1:": "host '127.0.0.1:' has an empty port after ':'",
    ":2181": "host ':2181' has no host name before ':'",
    "::1:2181": "host '::1:2181' has more than one ':' (write IPv6 addresses as [ADDRESS]:PORT)",
    "[::1:2181": "host '[::1:2181' has '[' without ']'",
    "h\u00e9:2181": "host name 'h\u00e9' has an illegal character '\u00e9'",
    "/kafka": "no host before the chroot",
    "h:2181/a//b": "chroot '/a//b' has an empty path element",
    "h:2181/a/../b": "chroot '/a/../b' has a '.' or '..' path element",
    "h:2181/a\x01": "chroot '/a\\x01' has an illegal character '\\x01'",
}


def _expected(connect: str, reason: str) -> str:
    return f"bad ZooKeeper connect string {connect!r}: {reason}"


def test_the_table_covers_every_command_that_takes_zookeeper() -> None:
    assert set(MINIMAL) == set(zookeeper_commands())


@pytest.mark.parametrize("connect", sorted(BAD))
def test_parse_connect_string_names_the_mistake(connect: str) -> None:
    with pytest.raises(InvalidArgumentError) as e:
        parse_connect_string(connect)
    assert str(e.value) == _expected(connect, BAD[connect])


def test_good_connect_strings_parse() -> None:
    assert parse_connect_string("h1:2181,h2:2182/kafka/prod/") == (
        (("h1", 2181), ("h2", 2182)),
        "/kafka/prod",
    )
    assert parse_connect_string("zk") == ((("zk", 2181),), "")
    assert parse_connect_string("[::1]:2182,[fe80::1%eth0]") == ((("::1", 2182), ("fe80::1%eth0", 2181)), "")
    with pytest.raises(InvalidArgumentError, match=r"^ZooKeeper connect string is empty$"):
        parse_connect_string("")


@pytest.mark.parametrize("command", sorted(MINIMAL), ids=" ".join)
@pytest.mark.parametrize(
    "connect", ["127.0.0.1:21810000", "127.0.0.1:2181 ", "127.0.0.1:abc", "127.0.0.1:2181,"]
)
def test_every_command_refuses_a_bad_connect_string_with_exit_2(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    command: tuple[str, ...],
    connect: str,
) -> None:
    monkeypatch.delenv(ZOOKEEPER_ENV, raising=False)
    r = run(capsys, *command, "--zookeeper", connect, *MINIMAL[command])
    assert r.code == 2
    assert r.error_line == f"kafka-controller {command[0]}: error: {_expected(connect, BAD[connect])}"
    assert r.out == ""


@pytest.mark.parametrize("command", sorted(MINIMAL), ids=" ".join)
def test_the_environment_variable_is_checked_the_same_way_and_named(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, command: tuple[str, ...]
) -> None:
    monkeypatch.setenv(ZOOKEEPER_ENV, "127.0.0.1:abc")
    r = run(capsys, *command, *MINIMAL[command])
    assert r.code == 2
    assert r.error_line == (
        f"kafka-controller {command[0]}: error: "
        f"{_expected('127.0.0.1:abc', BAD['127.0.0.1:abc'])} (from ${ZOOKEEPER_ENV})"
    )


@pytest.mark.parametrize("command", sorted(MINIMAL), ids=" ".join)
def test_empty_and_missing_connect_strings(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, command: tuple[str, ...]
) -> None:
    monkeypatch.delenv(ZOOKEEPER_ENV, raising=False)
    r = run(capsys, *command, "--zookeeper", "", *MINIMAL[command])
    assert (r.code, r.error_line) == (
        2,
        f"kafka-controller {command[0]}: error: ZooKeeper connect string is empty",
    )
    r = run(capsys, *command, *MINIMAL[command])
    assert r.code == 2
    assert r.error_line == (
        f"kafka-controller {command[0]}: error: no ZooKeeper to connect to: "
        f"pass --zookeeper CONNECT or set ${ZOOKEEPER_ENV}"
    )
    monkeypatch.setenv(ZOOKEEPER_ENV, "")  # an empty variable counts as unset
    assert run(capsys, *command, *MINIMAL[command]).error_line.endswith(f"or set ${ZOOKEEPER_ENV}")


@pytest.mark.parametrize("command", sorted(MINIMAL), ids=" ".join)
@pytest.mark.parametrize("env", [None, "127.0.0.1:2181"])
def test_usage_never_shows_zookeeper_as_required(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    command: tuple[str, ...],
    env: str | None,
) -> None:
    if env is None:
        monkeypatch.delenv(ZOOKEEPER_ENV, raising=False)
    else:
        monkeypatch.setenv(ZOOKEEPER_ENV, env)
    r = run(capsys, *command, "--help")
    assert r.code == 0
    usage = " ".join(r.out.split("\n\n")[0].split())
    assert "[--zookeeper CONNECT]" in usage
    assert ZOOKEEPER_ENV in " ".join(r.out.split())


@pytest.mark.parametrize("timeout", ["0", "-1", "nan", "inf", "1e300"])
def test_bad_timeouts_are_usage_errors(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, timeout: str
) -> None:
    r = run(capsys, "describe", "--zookeeper", "127.0.0.1:2181", "--timeout", timeout)
    assert r.code == 2
    assert r.error_line == (
        "kafka-controller describe: error: --timeout must be a number of seconds above 0 and at most 86400, "
        f"got {float(timeout)}"
    )
