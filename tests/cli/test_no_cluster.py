"""A chroot (or server) without Kafka's metadata is an error for every command that reads or operates a
cluster: one line, exit 2, nothing written, no kazoo warning. ``topics create --replica-assignment``
writes there anyway (Kafka's tool does), with warnings; ``broker`` and ``cluster up`` create clusters."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from kazoo.client import KazooClient

from tests.cli.clirun import run, snapshot
from tests.cli.parsers import zookeeper_commands

pytestmark = pytest.mark.zk

PLAN = '{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1]}]}'


def _commands(tmp_path: Path) -> dict[tuple[str, ...], list[str]]:
    plan = tmp_path / "plan.json"
    plan.write_text(PLAN)
    moves = tmp_path / "moves.json"
    moves.write_text('{"topics":[{"topic":"t"}]}')
    return {
        ("acls",): ["--list"],
        ("configs", "alter"): ["--entity-type", "topics", "--entity-name", "t", "--add-config", "a=1"],
        ("configs", "describe"): ["--entity-type", "topics", "--entity-name", "t"],
        ("describe",): [],
        ("elect",): ["--election-type", "preferred", "--all-topic-partitions"],
        ("reassign", "--verify"): ["--reassignment-json-file", str(plan)],
        ("reassign", "--execute"): ["--reassignment-json-file", str(plan)],
        ("reassign", "--cancel"): ["--reassignment-json-file", str(plan)],
        ("reassign", "--generate"): ["--topics-to-move-json-file", str(moves), "--broker-list", "1"],
        ("reconcile", "export"): ["--out", str(tmp_path / "snapshot")],
        ("shutdown",): ["--broker-id", "1"],
        ("topics", "alter"): ["--topic", "t", "--partitions", "2"],
        ("topics", "create"): ["--topic", "t", "--partitions", "1", "--replication-factor", "1"],
        ("topics", "delete"): ["--topic", "t"],
        ("topics", "describe"): [],
        ("topics", "list"): [],
    }


def test_every_command_but_broker_is_covered(tmp_path: Path) -> None:
    """``broker`` creates a cluster; ``close-session`` reads a dead broker's session file first and
    has nothing to do in ZooKeeper without one (its own tests cover that)."""
    covered = {c if c[0] != "reassign" else ("reassign",) for c in _commands(tmp_path)}
    assert covered | {("broker",), ("close-session",)} == set(zookeeper_commands())


@pytest.mark.parametrize("missing_chroot", [False, True], ids=["empty-chroot", "missing-chroot"])
def test_commands_refuse_a_tree_without_brokers_ids(
    capsys: pytest.CaptureFixture[str],
    zk_server,  # type: ignore[no-untyped-def]
    zk_admin_client: KazooClient,
    zk_chroot: str,
    tmp_path: Path,
    missing_chroot: bool,
) -> None:
    zk_admin_client.ensure_path(f"{zk_chroot}/config/topics")  # some other tenant's data, but no brokers
    chroot = f"{zk_chroot}/nothing-here" if missing_chroot else zk_chroot
    connect = zk_server.connect_string + chroot
    before = snapshot(zk_admin_client, zk_chroot)
    for command, rest in _commands(tmp_path).items():
        r = run(capsys, *command, "--zookeeper", connect, "--timeout", "5", *rest)
        assert r.code == 2, (command, r.err)
        assert (
            r.error_line
            == f"kafka-controller {command[0]}: error: no Kafka cluster at {connect}: /brokers/ids is missing"
        )
        assert r.out == ""
    assert snapshot(zk_admin_client, zk_chroot) == before
    assert not (tmp_path / "snapshot").exists()


def test_topics_create_with_an_assignment_writes_a_fresh_chroot_as_kafka_does(
    capsys: pytest.CaptureFixture[str],
    zk_server,
    zk_admin_client: KazooClient,
    zk_chroot: str,  # type: ignore[no-untyped-def]
) -> None:
    chroot = f"{zk_chroot}/fresh"
    connect = zk_server.connect_string + chroot
    r = run(
        capsys, "topics", "create", "--zookeeper", connect, "--topic", "early", "--replica-assignment", "1:2"
    )
    assert (r.code, r.out) == (0, "Created topic early.\n")
    assert r.err.splitlines() == [
        f"kafka-controller topics: warning: no broker has ever registered at {connect} "
        "(/brokers/ids was missing): created it and Kafka's other top-level paths",
        "kafka-controller topics: warning: topic early: brokers 1, 2 in --replica-assignment "
        "are not registered; its replicas there stay offline until then",
    ]
    znode = orjson.loads(zk_admin_client.get(f"{chroot}/brokers/topics/early")[0])
    assert znode["partitions"] == {"0": [1, 2]}
    assert zk_admin_client.exists(f"{chroot}/brokers/ids") is not None
    # now a cluster (as far as the tree goes): the other commands read it
    r = run(capsys, "topics", "list", "--zookeeper", connect)
    assert (r.code, r.out, r.err) == (0, "early\n", "")


def test_no_kazoo_warning_in_a_real_process(zk_server, zk_chroot: str) -> None:  # type: ignore[no-untyped-def]
    """pytest captures warnings in-process; a real run shows what an operator would see."""
    import subprocess
    import sys

    connect = f"{zk_server.connect_string}{zk_chroot}/missing"
    done = subprocess.run(
        [sys.executable, "-m", "kafka_controller.cli.main", "describe", "--zookeeper", connect],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert (
        done.stderr
        == f"kafka-controller describe: error: no Kafka cluster at {connect}: /brokers/ids is missing\n"
    )
