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
from kafka_controller.reconcile.job import build_parser
from kafka_controller.reconcile.job_report import (
    EXIT_FINDINGS,
    exit_code,
    findings_table,
    spark_start_line,
    verdict_line,
)
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
        ({"critical": 2}, "none", 0),
    ],
)
def test_fail_on_exit_codes(by_severity: dict[str, int], fail_on: str | None, code: int) -> None:
    assert exit_code(by_severity, fail_on) == code


def test_fail_on_defaults_to_critical_and_accepts_none() -> None:
    parser = build_parser()
    assert parser.parse_args(["--snapshot", "s", "--out", "o"]).fail_on == "critical"
    assert parser.parse_args(["--snapshot", "s", "--out", "o", "--fail-on", "none"]).fail_on == "none"


def test_findings_table_most_severe_first_with_evidence_and_the_rest_counted() -> None:
    rows: list[dict[str, Any]] = [
        {"severity": "critical", "kind": "offline_partition", "topic": "t", "partition": 3, "broker": None,
         "expected": "a live leader", "actual": "leader=-1 " + "x" * 200},
        {"severity": "warning", "kind": "leader_skew", "topic": None, "partition": None, "broker": 2,
         "expected": "<= 10%", "actual": "31%"},
    ]  # fmt: skip
    lines = findings_table(rows, 5, "runs/r1")
    assert lines[0].split() == ["SEVERITY", "KIND", "PARTITION", "DETAIL"]
    assert lines[1].split()[:3] == ["critical", "offline_partition", "t-3"]
    assert lines[1].endswith("...") and len(lines[1]) < 160
    assert lines[2].split()[:4] == ["warning", "leader_skew", "broker", "2"]
    assert lines[3] == "... and 3 more in runs/r1/findings"
    assert findings_table([], 0, "runs/r1") == ["no findings"]


def test_spark_start_line_says_when_most_of_the_run_went_to_spark() -> None:
    assert spark_start_line(38.0, 45.0, True) == (
        "Spark started in 38.0 s (84% of 45.0 s); most of the run went to starting Spark"
    )
    assert spark_start_line(2.0, 40.0, True) == "Spark started in 2.0 s (5% of 40.0 s)"
    assert spark_start_line(None, 40.0, False) == "Spark: the running session was used (no start-up)"


def test_verdict_line() -> None:
    assert verdict_line({"critical": 1, "warning": 2}, "critical") == (
        "findings: 1 critical, 0 error, 2 warning, 0 info; exit 3: findings at or above --fail-on critical"
    )
    assert verdict_line({"warning": 2}, "critical").endswith("; --fail-on critical: ok")


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
