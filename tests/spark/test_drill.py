"""After a failover drill on the real state machines, the job — run by ``spark-submit`` exactly as
an operator would — finds nothing to report.

The drill (``drill.py``): four brokers, three topics; broker 1 fails hard, restarts, catches up,
rejoins every ISR and gets its leadership back by preferred election; then the controller's session
expires and broker 3 takes over (epoch 2), loading its context from ZooKeeper. The job reads the
snapshot (ZooKeeper, every broker's replica manager, the new controller's context) and the audit
store over SQLite JDBC (the Debian jar passed with ``--jars``), and writes its run row into the same
store. ``test_export`` shows the same drill *during* the failure yields exactly the expected
findings, so "clean" here is not vacuous.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kafka_controller.reconcile.export import export_snapshot
from kafka_controller.reconcile.spark_io import jdbc_target

from . import drill
from .conftest import sqlite_audit_url
from .helpers import query

# pytest-timeout (300 s by default) above the subprocess's own 600 s, so a slow machine gets the
# subprocess's clear error rather than a kill mid-run.
pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(660)]
JOB = Path(__file__).resolve().parents[2] / "kafka_controller" / "reconcile" / "job.py"


def test_failover_drill_comes_out_clean_under_spark_submit(tmp_path: Path) -> None:
    url = sqlite_audit_url(tmp_path)
    d = drill.start(url, tmp_path / "spool")
    drill.fail_broker(d, 1)
    drill.recover_broker(d, 1)
    drill.fail_over_controller(d, 3)
    assert d.writer.flush(10)
    d.writer.close()
    assert d.store is not None
    snap = export_snapshot(
        d.store,
        tmp_path / "snap",
        broker_source=d.brokers.source(),
        controller_source=d.controller_source(),
        clock=d.clock,
        source="memory",
    )

    env = {
        **os.environ,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }
    proc = subprocess.run(
        [
            str(Path(sys.executable).parent / "spark-submit"),
            "--master",
            "local[2]",
            "--jars",
            jdbc_target(url).jar,
            "--conf",
            "spark.ui.enabled=false",
            "--conf",
            "spark.sql.shuffle.partitions=2",
            str(JOB),
            "--snapshot",
            str(snap.path),
            "--audit-url",
            url,
            "--out",
            str(tmp_path / "runs"),
            "--run-id",
            "drill",
            "--fail-on",
            "info",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout[proc.stdout.index("{") :])
    assert summary["findings"] == 0, summary["by_kind"]
    assert summary["partitions_checked"] == len(drill.all_partitions())
    assert summary["remediation"] == {
        "preferred_election": 0,
        "online_transition": 0,
        "unclean_candidates": 0,
    }
    run = query(url, "SELECT run_id, status, findings_count, partitions_checked FROM reconciliation_runs")
    assert run == [
        {
            "run_id": "drill",
            "status": "succeeded",
            "findings_count": 0,
            "partitions_checked": len(drill.all_partitions()),
        }
    ]
    assert query(url, "SELECT count(*) AS n FROM partition_transitions")[0]["n"] > len(drill.all_partitions())
    assert (tmp_path / "runs" / "drill" / "remediation_plan.json").is_file()
