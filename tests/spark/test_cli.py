"""``kafka-controller reconcile``: synth, run's wiring and exit codes, plan, schema (no Spark job here:
the job itself runs in ``test_job`` in-process and in ``test_drill`` under ``spark-submit``, both
through the same ``job.run_from_args`` the CLI calls)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from kafka_controller.cli.main import main
from kafka_controller.reconcile.job import EXIT_FINDINGS, exit_code
from kafka_controller.reconcile.remediation import write_plan


def test_synth_writes_a_fleet_and_run_reports_bad_input_in_one_line(capsys: Any, tmp_path: Path) -> None:
    rc = main(
        [
            "reconcile",
            "synth",
            "--partitions",
            "200",
            "--brokers",
            "5",
            "--plant",
            "under_replicated",
            "--out",
            str(tmp_path / "fleet"),
        ]
    )
    synth = json.loads(capsys.readouterr().out)
    assert rc == 0 and synth["audit_rows"] == 2000 and synth["planted_findings"] == 1
    assert pq.read_table(Path(synth["snapshot"]) / "zk_partitions").num_rows == 200
    rc = main(
        [
            "reconcile",
            "run",
            "--snapshot",
            synth["snapshot"],
            "--audit-parquet",
            str(tmp_path),
            "--out",
            str(tmp_path / "runs"),
        ]
    )
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "has no 'partition_transitions' table" in err and "\n" not in err
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    ("by_severity", "fail_on", "code"),
    [
        ({"warning": 1}, None, 0),
        ({"warning": 1}, "warning", EXIT_FINDINGS),
        ({"warning": 1}, "info", EXIT_FINDINGS),
        ({"warning": 1}, "error", 0),
        ({"critical": 2}, "critical", EXIT_FINDINGS),
        ({"info": 5}, "warning", 0),
    ],
)
def test_fail_on_exit_codes(by_severity: dict[str, int], fail_on: str | None, code: int) -> None:
    assert exit_code(by_severity, fail_on) == code


def test_plan_prints_an_election_file_and_schema_prints_every_table(capsys: Any, tmp_path: Path) -> None:
    plan = {
        "version": 1,
        "preferred_election": [{"topic": "t", "partition": 3}],
        "online_transition": [],
        "unclean_candidates": [],
    }
    path = write_plan(plan, tmp_path)
    assert main(["reconcile", "plan", str(path)]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "preferred_election": 1,
        "online_transition": 0,
        "unclean_candidates": 0,
    }
    assert main(["reconcile", "plan", str(path), "--election-json", "preferred_election"]) == 0
    assert json.loads(capsys.readouterr().out) == {"partitions": [{"topic": "t", "partition": 3}]}
    assert main(["reconcile", "schema"]) == 0
    text = capsys.readouterr().out
    assert "zk_partitions:" in text and "replica_transitions:" in text
    assert main(["reconcile", "synth", "--partitions", "0", "--out", str(tmp_path / "x")]) == 1
    assert "--partitions must be positive" in capsys.readouterr().err
