"""Every admin subcommand has ``--help`` naming its options, and the top-level help lists them all."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kafka_controller.cli.main import COMMAND_MODULES, COMMANDS, build_parser
from tests.cli.clirun import run
from tests.cli.parsers import _subparsers, options

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


def test_the_help_without_a_command_is_the_full_parsers() -> None:
    """``kafka-controller --help`` lists the commands from ``main.COMMANDS`` without importing their
    modules: its names and order must be the ones the modules register."""
    full, lazy = build_parser(), build_parser(only=None)
    assert lazy.format_help() == full.format_help()
    assert lazy.format_usage() == full.format_usage()
    assert list(_subparsers(full)) == [c.name for c in COMMANDS]


def test_the_help_imports_no_command_module() -> None:
    """What ``kafka-controller --help`` costs: ``cli.main`` and ``cli.common`` only, and none of the
    optional dependencies."""
    code = (
        "import contextlib, io, sys\n"
        "from kafka_controller.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        "    main(['--help'])\n"
        "print(' '.join(sorted(sys.modules)))\n"
    )
    loaded = set(
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout.split()
    )
    cli = {m for m in loaded if m.startswith("kafka_controller.cli.")}
    assert cli == {"kafka_controller.cli.main", "kafka_controller.cli.common"}
    heavy = {m.split(".")[0] for m in loaded} & {
        "kazoo",
        "sqlalchemy",
        "airflow",
        "pyspark",
        "pyarrow",
        "cryptography",
    }
    assert not heavy


def test_a_command_builds_its_own_parser_only() -> None:
    parser = build_parser(only="describe")
    parsers = _subparsers(parser)
    assert "--zookeeper" in options(parsers["describe"])
    assert options(parsers["topics"]) == {"-h", "--help"}  # a placeholder: its module was not needed
