"""The Spark job on a fleet with every finding planted once: findings, evidence (against the pandas
baseline), remediation plan, summaries, the audit store's rows, JDBC reads, and bad input."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from bench import pandas_reconcile
from kafka_controller.reconcile import job, synthetic
from kafka_controller.reconcile import snapshot as S
from kafka_controller.reconcile.frames import normalise_audit
from kafka_controller.reconcile.remediation import load_plan
from kafka_controller.reconcile.rules_catalog import RULE_SEVERITY
from kafka_controller.reconcile.spark_io import jdbc_target, read_audit_jdbc, read_audit_parquet

from .conftest import sqlite_audit_url
from .helpers import finding_keys, load_audit_parquet_into, query

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def planted_run(
    spark: Any, planted_fleet: synthetic.SyntheticFleet, tmp_path_factory: pytest.TempPathFactory
) -> Any:
    tmp = tmp_path_factory.mktemp("run")
    url = sqlite_audit_url(tmp)
    config = job.JobConfig(
        snapshot=str(planted_fleet.snapshot),
        out=str(tmp / "runs"),
        audit_parquet=str(planted_fleet.audit),
        results_url=url,
        run_id="run-1",
    )
    result = job.run(spark, config)
    findings = spark.read.parquet(f"{result.run_dir}/findings").collect()
    return result, findings, url


def test_every_planted_finding_and_nothing_else(
    planted_run: Any, planted_fleet: synthetic.SyntheticFleet
) -> None:
    result, findings, _ = planted_run
    expected = [
        dict(zip(("kind", "topic", "partition", "broker"), e, strict=True)) for e in planted_fleet.expected
    ]
    assert finding_keys(findings) == finding_keys(expected)
    assert all(f.severity == RULE_SEVERITY[f.kind] for f in findings)
    assert result.by_kind == dict(sorted(Counter(f.kind for f in findings).items()))
    assert result.partitions_checked == planted_fleet.partitions
    assert all(json.loads(f.detail) is not None for f in findings)


def test_evidence_is_the_same_as_the_pandas_baseline(
    planted_run: Any, planted_fleet: synthetic.SyntheticFleet
) -> None:
    _, findings, _ = planted_run
    baseline, _ = pandas_reconcile.run(planted_fleet.snapshot, planted_fleet.audit)

    def rows(items: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
        keys = ("kind", "topic", "partition", "broker", "expected", "actual")
        return sorted((tuple(None if r[k] != r[k] else r[k] for k in keys) for r in items), key=str)

    assert rows([f.asDict() for f in findings]) == rows(baseline.to_dict("records"))


def test_remediation_plan_is_what_the_plants_imply(
    planted_run: Any, planted_fleet: synthetic.SyntheticFleet
) -> None:
    result, _, _ = planted_run
    assert result.plan == planted_fleet.expected_plan
    assert load_plan(Path(result.run_dir) / "remediation_plan.json") == planted_fleet.expected_plan
    run_json = json.loads((Path(result.run_dir) / "run.json").read_text())
    assert run_json["findings"] == result.findings and run_json["remediation"]["unclean_candidates"] == 1


def test_summaries_per_partition_and_per_broker(
    spark: Any, planted_run: Any, planted_fleet: synthetic.SyntheticFleet
) -> None:
    result, findings, _ = planted_run
    parts = spark.read.parquet(f"{result.run_dir}/partition_summary")
    assert parts.count() == planted_fleet.partitions
    flagged = {(r.topic, r.partition): r for r in parts.filter("findings > 0").collect()}
    assert set(flagged) == {(f.topic, f.partition) for f in findings if f.partition is not None}
    offline = [tp for tp, r in flagged.items() if r.offline]
    assert sorted(offline) == sorted(
        (f.topic, f.partition) for f in findings if f.kind in ("offline_partition", "leader_on_dead_broker")
    )
    assert all(r.max_severity == "critical" for tp, r in flagged.items() if tp in offline)
    brokers = {r.broker_id: r for r in spark.read.parquet(f"{result.run_dir}/broker_summary").collect()}
    skewed = next(f.broker for f in findings if f.kind == "leader_skew")
    assert brokers[skewed].imbalance_pct > 10 and brokers[skewed].registered
    assert all(r.imbalance_pct <= 10 for b, r in brokers.items() if b != skewed and r.registered)
    dead = planted_fleet.brokers + 1
    assert not brokers[dead].registered and brokers[dead].view_replicas is None
    assert sum(r.replicas for r in brokers.values()) == sum(
        len(r) for r in S.read_arrow(planted_fleet.snapshot, "zk_partitions").column("replicas").to_pylist()
    )


def test_run_row_and_findings_land_in_the_audit_store(planted_run: Any) -> None:
    result, findings, url = planted_run
    runs = query(url, "SELECT * FROM reconciliation_runs")
    assert len(runs) == 1
    run = runs[0]
    assert (run["run_id"], run["status"], run["findings_count"]) == ("run-1", "succeeded", len(findings))
    assert run["partitions_checked"] == result.partitions_checked and run["finished_ms"] >= run["started_ms"]
    assert json.loads(run["detail"])["by_kind"] == result.by_kind
    stored = query(url, "SELECT kind, topic, partition, replica AS broker FROM reconciliation_findings")
    assert finding_keys(stored) == finding_keys(findings)


def _sorted_rows(df: Any) -> list[tuple[Any, ...]]:
    cols = [c for c in df.columns if c != "id"]
    return sorted((tuple(r[c] for c in cols) for r in df.collect()), key=str)


def test_audit_history_reads_the_same_over_sqlite_jdbc(
    spark: Any, planted_fleet: synthetic.SyntheticFleet, tmp_path: Path
) -> None:
    url = sqlite_audit_url(tmp_path)
    assert load_audit_parquet_into(url, planted_fleet.audit) == planted_fleet.audit_rows
    over_jdbc = normalise_audit(*read_audit_jdbc(spark, jdbc_target(url)))
    from_parquet = normalise_audit(*read_audit_parquet(spark, str(planted_fleet.audit)))
    assert _sorted_rows(over_jdbc) == _sorted_rows(from_parquet)


@pytest.mark.postgres
def test_audit_history_reads_the_same_over_postgresql_jdbc_in_id_ranges(
    spark: Any, planted_fleet: synthetic.SyntheticFleet
) -> None:
    from kafka_controller.audit.migrate import upgrade_database
    from kafka_controller.testing.postgres import DEFAULT_ADMIN_URL, temporary_database

    with temporary_database(DEFAULT_ADMIN_URL, prefix="reconcile_test") as url:
        upgrade_database(url)
        load_audit_parquet_into(url, planted_fleet.audit)
        partitions, replicas = read_audit_jdbc(spark, jdbc_target(url), partitions=3)
        assert partitions.rdd.getNumPartitions() == 3
        over_jdbc = normalise_audit(partitions, replicas)
        from_parquet = normalise_audit(*read_audit_parquet(spark, str(planted_fleet.audit)))
        assert _sorted_rows(over_jdbc) == _sorted_rows(from_parquet)


# -- bad input: one line on stderr, exit 2, nothing written anywhere --------------------------------
def _main(capsys: Any, *argv: str) -> tuple[int, str]:
    rc = job.main(list(argv))
    err = capsys.readouterr().err.strip()
    return rc, err


def test_bad_input_is_one_line_and_writes_nothing(
    spark: Any, capsys: Any, tmp_path: Path, healthy_fleet: synthetic.SyntheticFleet
) -> None:
    url = sqlite_audit_url(tmp_path)
    out = tmp_path / "runs"
    snap, audit = str(healthy_fleet.snapshot), str(healthy_fleet.audit)
    cases = [
        (["--snapshot", str(tmp_path / "nope"), "--audit-parquet", audit], "does not exist"),
        (["--snapshot", snap, "--audit-parquet", str(tmp_path)], "has no 'partition_transitions' table"),
        (
            ["--snapshot", snap, "--audit-url", url, "--jdbc-jar", "/nowhere/sqlite.jar"],
            "JDBC driver jar /nowhere/sqlite.jar is missing: "
            "install the Debian package libxerial-sqlite-jdbc-java",
        ),
        (["--snapshot", snap, "--audit-url", f"sqlite:///{tmp_path / 'none.db'}"], "no audit database at"),
        (["--snapshot", snap, "--audit-url", "mysql://x/y"], "backend 'mysql' is not supported"),
        (["--snapshot", snap, "--stuck-reassignment-minutes", "0"], "must be positive"),
    ]
    for args, message in cases:
        rc, err = _main(capsys, *args, "--out", str(out), "--results-url", url)
        assert rc == 2, (args, err)
        assert message in err and "\n" not in err, err
    assert not out.exists()
    assert query(url, "SELECT count(*) AS n FROM reconciliation_runs") == [{"n": 0}]


def test_refuses_a_results_store_without_its_tables_and_an_existing_run(
    spark: Any, capsys: Any, tmp_path: Path, healthy_fleet: synthetic.SyntheticFleet
) -> None:
    import sqlite3

    sqlite3.connect(tmp_path / "empty.db").close()
    base = ["--snapshot", str(healthy_fleet.snapshot), "--audit-parquet", str(healthy_fleet.audit)]
    rc, err = _main(
        capsys, *base, "--out", str(tmp_path / "runs"), "--results-url", f"sqlite:///{tmp_path / 'empty.db'}"
    )
    assert rc == 2 and "has no reconciliation tables" in err
    (tmp_path / "runs" / "r1").mkdir(parents=True)
    rc, err = _main(capsys, *base, "--out", str(tmp_path / "runs"), "--run-id", "r1", "--no-results")
    assert rc == 2 and "already exists" in err
    assert list((tmp_path / "runs" / "r1").iterdir()) == []


# -- what `reconcile run` tells its user: the table, Spark's start-up, the verdict and exit code -------
def test_run_prints_the_findings_table_and_fails_on_critical_by_default(
    spark: Any, capsys: Any, tmp_path: Path, planted_fleet: synthetic.SyntheticFleet
) -> None:
    base = ["--snapshot", str(planted_fleet.snapshot), "--audit-parquet", str(planted_fleet.audit)]
    rc = job.main([*base, "--out", str(tmp_path / "runs"), "--no-results"])
    out, err = capsys.readouterr()
    summary = json.loads(out)
    assert summary["by_severity"]["critical"] > 0
    assert rc == job.EXIT_FINDINGS
    lines = err.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("SEVERITY"))
    assert lines[header].split() == ["SEVERITY", "KIND", "PARTITION", "DETAIL"]
    first = lines[header + 1]
    assert first.startswith("critical") and "expected " in first  # the most severe first
    assert f"and {summary['findings'] - 25} more in " in err
    assert "reconcile: Spark: the running session was used (no start-up)" in lines
    assert (
        lines[-1].startswith("reconcile: findings: ")
        and "exit 3: findings at or above --fail-on critical" in lines[-1]
    )

    rc = job.main([*base, "--out", str(tmp_path / "runs2"), "--no-results", "--fail-on", "none"])
    out, err = capsys.readouterr()
    assert rc == 0 and err.splitlines()[-1].endswith("--fail-on none: ok")
