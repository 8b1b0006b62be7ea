"""State-changing commands record an operation when an audit store is given (``--audit-url`` or
``$KAFKA_CONTROLLER_AUDIT_URL``): requester (``--requester`` or the OS user), reason, cluster id,
outcome; no secret reaches the row; a store that cannot be used refuses the command before it
changes anything; without a store the command runs as before."""

from __future__ import annotations

import argparse
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafka_controller.cli import audit_options
from kafka_controller.domain.values import Broker, EndPoint
from kafka_controller.zk.kazoo_backend import KazooMetadataStore
from tests.cli.clirun import Result, run

pytestmark = pytest.mark.zk


@pytest.fixture
def store(zk_connect: str) -> Iterator[KazooMetadataStore]:
    s = KazooMetadataStore(zk_connect)
    for b in (1, 2):
        s.register_broker(Broker(b, (EndPoint("127.0.0.1", 9000 + b),)))
    s.create_or_get_cluster_id("Cl0sterIdForTheTest0a")
    yield s
    s.close()


def _create(capsys: pytest.CaptureFixture[str], zk: str, topic: str, *extra: str) -> Result:
    return run(
        capsys, "topics", "create", "--zookeeper", zk, "--timeout", "5", "--topic", topic,
        "--partitions", "2", "--replication-factor", "1", *extra,
    )  # fmt: skip


def _operations(db: Path) -> list[dict[str, Any]]:
    with sqlite3.connect(db) as conn:
        conn.row_factory = sqlite3.Row
        return [dict(r) for r in conn.execute("select * from operations order by started_ms")]


def test_a_cli_change_is_an_operation_with_requester_reason_and_cluster(
    capsys: pytest.CaptureFixture[str], zk_connect: str, store: KazooMetadataStore, tmp_path: Path
) -> None:
    db = tmp_path / "audit.db"
    done = _create(
        capsys, zk_connect, "made", "--config", "retention.ms=86400000",
        "--requester", "alice", "--reason", "OPS-7", "--audit-url", f"sqlite:///{db}",
    )  # fmt: skip
    assert done.code == 0, done.err
    assert store.topic_exists("made")
    (row,) = _operations(db)
    assert (row["kind"], row["requester"], row["reason"], row["status"]) == (
        "topics_create",
        "alice",
        "OPS-7",
        "succeeded",
    )
    assert row["cluster_id"] == "Cl0sterIdForTheTest0a" and row["finished_ms"] >= row["started_ms"]
    assert (
        '"config":["retention.ms"]' in row["parameters"].replace(" ", "")
        and "86400000" not in row["parameters"]
    )


def test_the_environment_names_the_store_and_the_os_user_is_the_default_requester(
    capsys: pytest.CaptureFixture[str],
    zk_connect: str,
    store: KazooMetadataStore,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    db = tmp_path / "env.db"
    monkeypatch.setenv(audit_options.AUDIT_URL_ENV, f"sqlite:///{db}")
    monkeypatch.setenv("USER", "ops-bob")
    monkeypatch.setenv("LOGNAME", "ops-bob")
    assert _create(capsys, zk_connect, "from-env").code == 0
    failed = run(
        capsys, "topics", "delete", "--zookeeper", zk_connect, "--timeout", "5", "--topic", "no-such-topic"
    )
    assert failed.code != 0
    created, deleted = _operations(db)
    assert created["requester"] == "ops-bob" and "command line" in created["reason"]
    assert (deleted["kind"], deleted["status"]) == ("topics_delete", "failed") and deleted["error"]
    # an empty --audit-url records nothing, whatever the environment says
    assert _create(capsys, zk_connect, "unrecorded", "--audit-url", "").code == 0
    assert len(_operations(db)) == 2


def test_a_store_that_cannot_be_used_refuses_before_anything_changes(
    capsys: pytest.CaptureFixture[str], zk_connect: str, store: KazooMetadataStore, tmp_path: Path
) -> None:
    bad = f"sqlite:///{tmp_path / 'no-such-dir' / 'audit.db'}"
    refused = _create(capsys, zk_connect, "never", "--audit-url", bad)
    assert refused.code == 1 and "audit" in refused.error_line.lower()
    assert not store.topic_exists("never")


def test_without_a_store_the_command_runs_and_says_the_reason_is_not_recorded(
    capsys: pytest.CaptureFixture[str],
    zk_connect: str,
    store: KazooMetadataStore,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(audit_options.AUDIT_URL_ENV, raising=False)
    done = _create(capsys, zk_connect, "plain", "--reason", "why not")
    assert done.code == 0 and store.topic_exists("plain")
    assert "--requester/--reason are not recorded" in done.err


def test_parameters_keep_config_names_and_drop_the_audit_options() -> None:
    args = argparse.Namespace(
        command="configs",
        configs_command="alter",
        add_config="ssl.keystore.password=hunter2,retention.ms=5",
        audit_url="postgresql+psycopg://kc:s3cret@db/audit",
        requester="alice",
        reason="r",
        entity_name="t",
        path=Path("/x"),
        func=print,
        operation_id=None,
        sasl_password="hunter3",
        security=object(),
    )
    got = audit_options.operation_parameters(args)
    assert got == {
        "add_config": ["retention.ms", "ssl.keystore.password"],
        "command": "configs",
        "configs_command": "alter",
        "entity_name": "t",
        "path": "/x",
        "sasl_password": "<not recorded>",
        "security": "<object>",
    }
    assert "hunter2" not in str(got) and "s3cret" not in str(got) and "hunter3" not in str(got)
