"""Every admin subcommand has ``--help`` naming its options, and the top-level help lists them all."""

from __future__ import annotations

import pytest

from kafka_controller.cli.main import COMMAND_MODULES
from tests.cli.clirun import run

JSON, ZK = "--json", "--zookeeper"
HELP = {
    ("topics", "create"): [
        "--topic",
        "--partitions",
        "--replication-factor",
        "--replica-assignment",
        "--config",
        "--bootstrap-server",
        JSON,
    ],
    ("topics", "delete"): ["--topic", "--wait", ZK, "--bootstrap-server"],
    ("topics", "list"): [ZK, JSON],
    ("topics", "describe"): ["--topic", "--under-replicated-partitions", "--unavailable-partitions", JSON],
    ("describe",): [ZK, "--topic", "--problems-only", JSON],
    ("reassign",): [
        "--reassignment-json-file",
        "--generate",
        "--execute",
        "--verify",
        "--cancel",
        "--list",
        "--topics-to-move-json-file",
        "--broker-list",
        "--legacy-znode",
        "--additional",
        JSON,
    ],
    ("elect",): [
        "--election-type",
        "--topic",
        "--partition",
        "--all-topic-partitions",
        "--path-to-json-file",
        JSON,
    ],
    ("shutdown",): ["--broker-id", "--pid", "SIGTERM", "listener", JSON],
    ("cluster", "up"): ["--brokers", "--port", "--data-dir", "--audit-url", "--config", "SIGINT/SIGTERM"],
    ("demo",): ["--keep", JSON, "Ctrl-C"],
}


@pytest.mark.parametrize("command", sorted(HELP), ids=lambda c: " ".join(c))
def test_help(capsys: pytest.CaptureFixture[str], command: tuple[str, ...]) -> None:
    r = run(capsys, *command, "--help")
    assert r.code == 0
    assert r.out.startswith(f"usage: kafka-controller {' '.join(command)}")
    text = " ".join(r.out.split())
    for word in HELP[command]:
        assert word in text, f"{word} missing from {' '.join(command)} --help"


def test_top_level_help_lists_every_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    r = run(capsys, "--help")
    assert r.code == 0
    for name in (
        "demo",
        "cluster",
        "topics",
        "describe",
        "reassign",
        "elect",
        "shutdown",
        "zookeeper",
        "broker",
        "audit",
    ):
        assert f"\n    {name}" in r.out
    assert {"zookeeper_cmd", "broker_cmd", "audit_cmd"} <= set(COMMAND_MODULES)


def test_cluster_up_refuses_bad_config_before_starting(capsys: pytest.CaptureFixture[str]) -> None:
    r = run(capsys, "cluster", "up", "--port", "0", "--config", "no.such.key=1")
    assert r.code == 1
    assert r.error_line.startswith("kafka-controller cluster: error: unknown broker config 'no.such.key'")
    r = run(capsys, "cluster", "up", "--port", "0", "--config", "unclean.leader.election.enable=maybe")
    assert r.error_line == (
        "kafka-controller cluster: error: invalid value 'maybe' for unclean.leader.election.enable: "
        "expected true or false"
    )
