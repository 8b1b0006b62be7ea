"""The failover drill on real processes: embedded ZooKeeper, three ``kafka-controller broker``
processes, the controller SIGKILLed and its broker restarted; then a snapshot with every view the
job compares — ZooKeeper, each broker's ``DescribeReplicas`` and the new controller's
``DescribeControllerContext`` — and the Spark job (the session's local SparkSession) on it.

Clean means no critical or error finding. That the controller's view was really compared is shown
by planting one disagreement in a copy of the snapshot: the job then reports exactly that partition
as ``controller_view_mismatch``.

The simulated produce rate is 0: the exporter asks the brokers one after the other, and with logs
growing, a follower's high watermark read a few fetch rounds after its leader's log end could pass
it (a false ``hw_regression`` on a loaded machine). Leadership, epochs and ISRs, which this drill is
about, do not move while the cluster is quiet.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kafka_controller.cluster.local import LocalCluster
from kafka_controller.domain.values import TopicPartition
from kafka_controller.reconcile import job
from kafka_controller.reconcile import snapshot as S
from kafka_controller.reconcile.export import export_snapshot
from kafka_controller.reconcile.sources import admin_broker_source, admin_controller_source
from kafka_controller.zk.embedded import EmbeddedZooKeeper
from tests.integration.helpers import TIMEOUT, wait_healthy

pytestmark = [
    pytest.mark.spark,
    pytest.mark.integration,
    pytest.mark.zk,
    pytest.mark.slow,
    pytest.mark.timeout(600),
]

TOPICS = {"orders": (6, 3), "events": (4, 2)}  # partitions, replication factor


@pytest.fixture(scope="module")
def cluster(zk_server: EmbeddedZooKeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    data_dir = tmp_path_factory.mktemp("live-drill")
    c = LocalCluster(
        3,
        zookeeper=zk_server.connect_string,
        chroot=f"/spark/live-drill-{uuid.uuid4().hex[:8]}",
        data_dir=data_dir,
        audit_url=f"sqlite:///{data_dir / 'audit.db'}",
        broker_config={"auto.leader.rebalance.enable": "false", "sim.produce.rate.per.sec": "0"},
    )
    try:
        yield c.start(timeout=120)
    finally:
        c.close(graceful=False)


def _partitions() -> list[TopicPartition]:
    return [TopicPartition(t, p) for t, (n, _) in TOPICS.items() for p in range(n)]


def _views_converged(cluster: LocalCluster) -> bool:
    """Every running broker hosts exactly its assigned replicas, with ZooKeeper's leader and epoch."""
    view = cluster.waits.describe()
    admin = cluster.admin()
    for b in cluster.running_broker_ids():
        hosted = {
            (r.topic, r.partition): (r.leader, r.leader_epoch, r.is_leader)
            for r in admin.describe_replicas(b).replicas
        }
        expected = {
            (p.topic, p.partition): (p.leader, p.leader_epoch, p.leader == b)
            for p in view.partitions
            if b in p.replicas
        }
        if hosted != expected:
            return False
    return True


def _run_job(spark: Any, snapshot: Path, out: Path, run_id: str, audit_url: str) -> job.RunResult:
    config = job.JobConfig(snapshot=str(snapshot), out=str(out), audit_url=audit_url, run_id=run_id)
    return job.run(spark, config)


def test_a_controller_failover_reconciles_clean_with_the_controller_view_compared(
    cluster: LocalCluster, spark: Any, tmp_path: Path
) -> None:
    ids = cluster.broker_ids
    for topic, (n, rf) in TOPICS.items():
        cluster.create_topic(topic, {p: [ids[(p + k) % len(ids)] for k in range(rf)] for p in range(n)})
    wait_healthy(cluster)

    old, epoch = cluster.controller()
    assert old is not None and epoch is not None
    cluster.kill_broker(old)  # SIGKILL: its session lapses, another broker takes over
    new, new_epoch = cluster.waits.wait_for_controller(TIMEOUT, exclude=[old], min_epoch=epoch + 1)
    cluster.start_broker(old, timeout=TIMEOUT)
    wait_healthy(cluster)
    cluster.waits.wait_until(
        lambda: _views_converged(cluster), TIMEOUT, "every broker to host its replicas as ZooKeeper says"
    )
    assert cluster.controller() == (new, new_epoch)

    admin = cluster.admin()
    snap = export_snapshot(
        cluster.store,
        tmp_path / "snap",
        broker_source=admin_broker_source(admin),
        controller_source=admin_controller_source(admin, timeout_s=TIMEOUT),
        source=f"zookeeper:{cluster.connect_string}",
    )
    meta = S.read_meta(snap.path)
    assert (meta["controller_id"], meta["controller_epoch"]) == (new, new_epoch)
    assert snap.controller_view and meta["controller_view"] and meta["controller_view_error"] is None
    assert meta["broker_views"] and snap.rows["broker_replicas"] == sum(n * rf for n, rf in TOPICS.values())
    assert snap.rows["controller_partitions"] == snap.rows["zk_partitions"] == len(_partitions())
    assert snap.rows["controller_replicas"] == snap.rows["broker_replicas"]

    audit_url = str(cluster.audit_url)
    clean = _run_job(spark, snap.path, tmp_path / "runs", "live-drill", audit_url)
    assert clean.partitions_checked == len(_partitions())
    assert (clean.by_severity["critical"], clean.by_severity["error"]) == (0, 0), clean.by_kind

    # Plant one disagreement in the controller's view (a copy): the job must see it.
    planted = tmp_path / "planted"
    shutil.copytree(snap.path, planted)
    (part,) = (planted / "controller_partitions").iterdir()
    table = pq.read_table(part)
    rows = table.to_pylist()
    target = next(r for r in rows if (r["topic"], r["partition"]) == ("orders", 2))
    target["leader_epoch"] += 1
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), part)
    caught = _run_job(spark, planted, tmp_path / "runs", "live-drill-planted", audit_url)
    assert caught.by_kind.get("controller_view_mismatch") == 1, caught.by_kind
    findings = spark.read.parquet(f"{caught.run_dir}/findings").filter("kind = 'controller_view_mismatch'")
    assert [(r["topic"], r["partition"]) for r in findings.collect()] == [("orders", 2)]
    assert caught.by_severity["error"] == clean.by_severity["error"] + 1
