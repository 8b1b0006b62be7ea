"""One audit database for two clusters: two ZooKeeper chroots (each with its own ``/cluster/id``), a
broker in each, one SQLite audit store. Each cluster's rows carry its id, colliding controller keys
are all kept, a CLI change is recorded with its requester and reason, the report keeps to the
cluster asked for, and the reconciliation of each cluster reports nothing from the other.

Cluster B's broker is restarted before its topic exists, so B's controller epoch (2) is above A's
(1) and B's rows sort after A's for the same partition: without the cluster filter, A's
reconciliation sees B's leader (broker 2) as the last audited leader of A's ``orders`` partitions
(``audit_state_mismatch``), which is what the filter must prevent.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kafka_controller.audit.reports import build_report
from kafka_controller.broker.config import BrokerConfig
from kafka_controller.broker.server import BrokerServer
from kafka_controller.domain.values import ReplicaAssignment, TopicPartition
from kafka_controller.reconcile import job
from kafka_controller.reconcile.export import export_snapshot
from kafka_controller.zk.embedded import EmbeddedZooKeeper
from kafka_controller.zk.kazoo_backend import KazooMetadataStore
from tests.broker.helpers import wait_until
from tests.cli.clirun import run

pytestmark = [pytest.mark.spark, pytest.mark.zk, pytest.mark.timeout(600)]

SETTINGS = {"auto.leader.rebalance.enable": "false", "sim.produce.rate.per.sec": "0"}
PARTITIONS = 4


@dataclass
class Cluster:
    connect: str
    broker_id: int
    store: KazooMetadataStore
    server: BrokerServer

    @property
    def cluster_id(self) -> str:
        value = self.store.get_cluster_id()
        assert value is not None
        return value


def _start(connect: str, broker_id: int, audit_url: str, spool: Path) -> BrokerServer:
    return BrokerServer(
        BrokerConfig.of(broker_id, SETTINGS), connect, audit_url=audit_url, audit_spool_dir=spool
    ).startup()


def _led(store: KazooMetadataStore, broker_id: int) -> bool:
    tps = [TopicPartition("orders", p) for p in range(PARTITIONS)]
    states = store.get_partition_states(tps).values()
    return all(
        s is not None and not isinstance(s, Exception) and s.leader_and_isr.leader == broker_id
        for s in states
    )


def _count(db: Path, sql: str, *args: Any) -> int:
    with sqlite3.connect(db) as conn:
        return int(conn.execute(sql, args).fetchone()[0])


@pytest.fixture(scope="module")
def clusters(
    zk_server: EmbeddedZooKeeper, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Path, Cluster, Cluster]]:
    root = tmp_path_factory.mktemp("two-clusters")
    db = root / "audit.db"
    url = f"sqlite:///{db}"
    base = f"/two-clusters-{uuid.uuid4().hex[:8]}"
    made: list[Cluster] = []
    try:
        for name, broker_id in (("a", 1), ("b", 2)):
            connect = f"{zk_server.connect_string}{base}/{name}"
            server = _start(connect, broker_id, url, root / f"spool-{name}")
            made.append(Cluster(connect, broker_id, KazooMetadataStore(connect), server))
        a, b = made
        for c in made:
            wait_until(lambda c=c: c.server.controller.is_active, f"broker {c.broker_id} to lead its cluster")
        # B's controller moves to epoch 2 before its topic exists: its rows sort after A's
        b.server.shutdown()
        b.server = _start(b.connect, b.broker_id, url, root / "spool-b")
        wait_until(
            lambda: b.store.get_controller_epoch() is not None and b.store.get_controller_epoch()[0] == 2,
            "B's epoch 2",
        )
        wait_until(lambda: b.server.controller.is_active, "broker 2 to lead cluster B again")
        for c in made:
            assert c.server.controller.wait_until_idle(30)
            c.store.create_topic(
                "orders", {p: ReplicaAssignment.of([c.broker_id]) for p in range(PARTITIONS)}
            )
        for c in made:
            wait_until(
                lambda c=c: _led(c.store, c.broker_id), f"cluster of broker {c.broker_id} to lead orders"
            )
            # NonExistent -> New -> Online per partition, all stamped with this cluster's id
            wait_until(
                lambda c=c: (
                    _count(
                        db, "select count(*) from partition_transitions where cluster_id = ?", c.cluster_id
                    )
                    >= 2 * PARTITIONS
                ),
                f"cluster of broker {c.broker_id}'s transitions",
            )
        yield db, a, b
    finally:
        for c in made:
            c.server.shutdown()
            c.store.close()


def test_each_cluster_has_its_own_id_and_both_clusters_rows_are_kept(
    clusters: tuple[Path, Cluster, Cluster],
) -> None:
    db, a, b = clusters
    assert a.cluster_id != b.cluster_id
    for c in (a, b):
        assert _count(db, "select count(*) from controller_events where cluster_id = ?", c.cluster_id) >= 1
        # both controllers numbered from 1: the same (controller id, epoch, sequence) in two clusters
        assert (
            _count(
                db,
                "select count(*) from partition_transitions where cluster_id = ? and topic = 'orders'",
                c.cluster_id,
            )
            >= 2 * PARTITIONS
        )
    assert _count(db, "select count(*) from partition_transitions where cluster_id is null") == 0


def test_a_cli_change_records_requester_reason_and_cluster(
    clusters: tuple[Path, Cluster, Cluster], capsys: pytest.CaptureFixture[str]
) -> None:
    db, a, _ = clusters
    done = run(
        capsys,
        "topics",
        "create",
        "--zookeeper",
        a.connect,
        "--topic",
        "cli-made",
        "--partitions",
        "1",
        "--replication-factor",
        "1",
        "--requester",
        "alice",
        "--reason",
        "ticket OPS-1: a topic for the load test",
        "--audit-url",
        f"sqlite:///{db}",
    )
    assert done.code == 0, done.err
    with sqlite3.connect(db) as conn:
        conn.row_factory = sqlite3.Row
        (row,) = conn.execute("select * from operations where kind = 'topics_create'").fetchall()
    assert (row["requester"], row["reason"], row["status"]) == (
        "alice",
        "ticket OPS-1: a topic for the load test",
        "succeeded",
    )
    assert row["cluster_id"] == a.cluster_id and row["dry_run"] == 0 and "cli-made" in row["parameters"]
    assert (
        f"sqlite:///{db}" not in row["parameters"]
    )  # the audit URL (may hold a password) is not a parameter

    # the controller's rows for the new topic (New -> Online) have landed: the counts below are still
    wait_until(
        lambda: _count(db, "select count(*) from partition_transitions where topic = 'cli-made'") >= 2,
        "cli-made's transitions",
    )
    only_a = build_report(f"sqlite:///{db}", cluster_id=a.cluster_id)
    only_b = build_report(f"sqlite:///{db}", cluster_id=b_id(clusters))
    assert only_a["summary"]["operations"] == 1 and only_b["summary"]["operations"] == 0
    everything = build_report(f"sqlite:///{db}")
    assert sorted(c for c in everything["clusters"] if c) == sorted([a.cluster_id, b_id(clusters)])
    total = everything["summary"]["partition_transitions"]
    assert only_a["summary"]["partition_transitions"] + only_b["summary"]["partition_transitions"] == total
    assert 0 < only_a["summary"]["partition_transitions"] < total


def b_id(clusters: tuple[Path, Cluster, Cluster]) -> str:
    return clusters[2].cluster_id


def test_reconciling_each_cluster_finds_nothing_of_the_other(
    clusters: tuple[Path, Cluster, Cluster], spark: Any, tmp_path: Path
) -> None:
    db, a, b = clusters
    for c in (a, b):
        snap = export_snapshot(c.store, tmp_path / f"snap-{c.broker_id}", source=f"zookeeper:{c.connect}")
        config = job.JobConfig(
            snapshot=str(snap.path),
            out=str(tmp_path / "runs"),
            audit_url=f"sqlite:///{db}",
            results_url=f"sqlite:///{db}",
            run_id=f"run-{c.broker_id}",
        )
        result = job.run(spark, config)
        assert result.findings == 0, result.by_kind
        with sqlite3.connect(db) as conn:
            assert conn.execute(
                "select cluster_id from reconciliation_runs where run_id = ?", (f"run-{c.broker_id}",)
            ).fetchone() == (c.cluster_id,)
