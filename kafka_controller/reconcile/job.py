"""The reconciliation job: does ZooKeeper, every broker, the controller and the audit log agree?

Reads a snapshot directory (``reconcile.snapshot``) and the audit history (the audit store over
JDBC, or its Parquet copy), runs every rule of ``reconcile.rules`` and writes, per run:

* ``<out>/<run_id>/findings/``, ``partition_summary/``, ``broker_summary/`` (Parquet),
* ``<out>/<run_id>/remediation_plan.json`` (``reconcile.remediation``) and ``run.json``,
* with ``--results-url`` (default: ``--audit-url``), a ``reconciliation_runs`` row and every finding
  in ``reconciliation_findings``, written from the driver.

It prints the run summary as JSON on stdout. Exit codes: 0 done; 1 failed (one line on stderr);
2 bad input (one line on stderr, nothing written); 3 done, with findings at or above ``--fail-on``
(``critical`` by default; ``--fail-on none`` never fails on findings). On stderr it prints the most
severe findings as a table, how long Spark took to start, and the verdict (``reconcile.job_report``).

Locally (the default master is ``local[*]``)::

    kafka-controller reconcile run --snapshot snap/ --audit-url sqlite:////var/lib/kc/audit.db --out runs/
    spark-submit kafka_controller/reconcile/job.py --snapshot snap/ --audit-parquet audit/ --out runs/

On a cluster the same file runs unchanged; ship the package and the JDBC jar, keep inputs and
outputs on shared storage, and write results to a database the driver can reach::

    python -m zipfile -c kc.zip kafka_controller
    spark-submit --master yarn --deploy-mode cluster --py-files kc.zip \\
        --jars /usr/share/java/postgresql.jar --num-executors 20 --executor-memory 8g \\
        --conf spark.sql.shuffle.partitions=400 \\
        kafka_controller/reconcile/job.py --snapshot hdfs:///kc/snap/2024-06-01 \\
        --audit-url postgresql://kc@audit-db:5432/audit --out hdfs:///kc/runs
    spark-submit --master k8s://https://k8s-api:6443 --deploy-mode cluster \\
        --conf spark.kubernetes.container.image=registry/kafka-controller-spark:0.1 \\
        --conf spark.executor.instances=20 local:///opt/kc/kafka_controller/reconcile/job.py \\
        --snapshot s3a://kc/snap/2024-06-01 --audit-parquet s3a://kc/audit/2024-06-01 --out s3a://kc/runs

The rules use only DataFrame expressions (no Python UDFs), so executors need no Python packages.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from kafka_controller.domain.errors import InvalidArgumentError, KafkaControllerError
from kafka_controller.reconcile import job_report, remediation, spark_io
from kafka_controller.reconcile import snapshot_schema as S
from kafka_controller.reconcile.job_report import DEFAULT_FAIL_ON, EXIT_FINDINGS, FAIL_ON_CHOICES, exit_code
from kafka_controller.reconcile.results import ResultsStore
from kafka_controller.reconcile.rules_catalog import SEVERITIES

# ``frames``, ``rules`` and ``summaries`` import PySpark at their top, so they are imported inside
# the two functions that run on the Spark driver (``_load``, ``_run``). This module is also imported
# where PySpark is absent or must not load: the CLI builds its parser from ``add_arguments`` and
# checks inputs with ``preflight`` before a JVM starts, and Airflow's report operator imports it
# only to find this file for ``spark-submit``. (Executors never import it: the rules are DataFrame
# expressions, with no Python UDF to ship.)

__all__ = ["JobConfig", "RunResult", "main", "run", "run_from_args"]
#: Findings up to this many go to one Parquet file, sorted; more stay in Spark's partitions.
SINGLE_FILE_FINDINGS = 1_000_000


@dataclass(slots=True)
class JobConfig:
    snapshot: str
    out: str
    audit_url: str | None = None
    audit_parquet: str | None = None
    results_url: str | None = None
    run_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    operation_id: str | None = None
    stuck_reassignment_minutes: float = 30.0
    leader_imbalance_percentage: int = 10
    jdbc_partitions: int = 4
    jdbc_jar: str | None = None
    now_ms: int | None = None  # "now" for reassignment ages; default: the snapshot's time


@dataclass(slots=True)
class RunResult:
    run_id: str
    run_dir: str
    partitions_checked: int
    findings: int
    by_kind: dict[str, int]
    by_severity: dict[str, int]
    plan: dict[str, Any]
    timings_s: dict[str, float]
    #: the most severe findings, for the table on stderr (not in the summary: all are in findings/)
    top: list[dict[str, Any]] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "run_dir": self.run_dir,
            "partitions_checked": self.partitions_checked,
            "findings": self.findings,
            "by_kind": self.by_kind,
            "by_severity": self.by_severity,
            "remediation": {k: len(v) for k, v in self.plan.items() if isinstance(v, list)},
            "timings_s": self.timings_s,
        }


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="reconcile", description="Reconcile a snapshot against the audit log.")
    add_arguments(p)
    return p


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--snapshot", required=True, help="snapshot directory (reconcile export / synth)")
    audit = p.add_mutually_exclusive_group()
    audit.add_argument("--audit-url", help="audit store (SQLAlchemy or jdbc: URL), read over JDBC")
    audit.add_argument("--audit-parquet", metavar="DIR", help="exported Parquet copy of the audit history")
    p.add_argument("--out", required=True, help="directory for the run's outputs (<out>/<run_id>/...)")
    p.add_argument("--results-url", help="audit store for the run row and findings (default: --audit-url)")
    p.add_argument("--no-results", action="store_true", help="do not write to any audit store")
    p.add_argument("--run-id", help="run id (default: a new UUID)")
    p.add_argument("--operation-id", help="the audit operation this run belongs to")
    p.add_argument("--stuck-reassignment-minutes", type=float, default=30.0)
    p.add_argument("--leader-imbalance-percentage", type=int, default=10)
    p.add_argument(
        "--fail-on",
        choices=FAIL_ON_CHOICES,
        default=DEFAULT_FAIL_ON,
        help=f"exit {EXIT_FINDINGS} on findings at least this severe; none: never (default: %(default)s)",
    )
    p.add_argument("--master", help="Spark master when not under spark-submit (default: local[*])")
    p.add_argument("--shuffle-partitions", type=int, help="spark.sql.shuffle.partitions for a new session")
    p.add_argument("--driver-memory", help="spark.driver.memory for a new local session, e.g. 4g")
    p.add_argument("--jdbc-partitions", type=int, default=4, help="parallel JDBC reads (PostgreSQL)")
    p.add_argument("--jdbc-jar", help="JDBC driver jar (default: from /usr/share/java)")


def config_from_args(args: argparse.Namespace) -> JobConfig:
    if args.stuck_reassignment_minutes <= 0:
        raise InvalidArgumentError("--stuck-reassignment-minutes must be positive")
    if not 0 <= args.leader_imbalance_percentage <= 100:
        raise InvalidArgumentError("--leader-imbalance-percentage must be between 0 and 100")
    if args.jdbc_partitions < 1:
        raise InvalidArgumentError("--jdbc-partitions must be at least 1")
    results = None if args.no_results else (args.results_url or args.audit_url)
    return JobConfig(
        snapshot=args.snapshot,
        out=args.out,
        audit_url=args.audit_url,
        audit_parquet=args.audit_parquet,
        results_url=results,
        run_id=args.run_id or str(uuid.uuid4()),
        operation_id=args.operation_id,
        stuck_reassignment_minutes=args.stuck_reassignment_minutes,
        leader_imbalance_percentage=args.leader_imbalance_percentage,
        jdbc_partitions=args.jdbc_partitions,
        jdbc_jar=args.jdbc_jar,
    )


def preflight(config: JobConfig) -> None:
    """Every check that needs no Spark, so bad input fails fast, in one line, before a JVM starts."""
    spark_io.check_local_tables(config.snapshot, S.TABLES, "snapshot")
    if config.audit_parquet:
        spark_io.check_local_tables(config.audit_parquet, S.AUDIT_TABLES, "audit copy")
    if config.results_url:
        # Imported on use: SQLAlchemy is optional (the 'audit' extra).
        from kafka_controller.audit.engine import parse_url

        parse_url(config.results_url)


def required_jars(config: JobConfig) -> list[str]:
    """The JDBC jars the run needs, checked to exist (one-line error naming the jar otherwise)."""
    if config.audit_url is None:
        return []
    target = spark_io.jdbc_target(config.audit_url, config.jdbc_jar)
    spark_io.check_jar(target)
    return [target.jar]


def run(spark: Any, config: JobConfig) -> RunResult:
    """Run the rules on ``spark`` and write every output; see the module docstring.

    Inputs (snapshot, audit history, results store, output directory) are all checked before
    anything is written anywhere.
    """
    inputs = _load(spark, config)
    run_dir = f"{config.out.rstrip('/')}/{config.run_id}"
    if spark_io.is_local(run_dir) and os.path.exists(run_dir.removeprefix("file://")):
        raise InvalidArgumentError(f"run directory {run_dir} already exists")
    started = int(time.time() * 1000)
    store = ResultsStore(config.results_url) if config.results_url else None
    try:
        if store is not None:
            store.start_run(
                config.run_id,
                started,
                config.snapshot,
                config.operation_id,
                inputs.meta.get("cluster_id") or None,
            )
        try:
            return _run(spark, config, inputs, run_dir, store)
        except BaseException as e:
            if store is not None:
                store.fail_run(config.run_id, int(time.time() * 1000), f"{type(e).__name__}: {e}")
            raise
    finally:
        if store is not None:
            store.close()


def _load(spark: Any, config: JobConfig) -> Any:
    # Imported on use: PySpark (the 'spark' extra) loads with frames; see the note on the imports.
    from kafka_controller.reconcile.frames import Inputs, normalise_audit

    meta, tables = spark_io.read_snapshot(spark, config.snapshot)
    cluster_id = meta.get("cluster_id") or None  # the audit rows of this cluster (and unlabelled ones)
    audit = None
    if config.audit_parquet:
        audit = normalise_audit(*spark_io.read_audit_parquet(spark, config.audit_parquet), cluster_id)
    elif config.audit_url:
        target = spark_io.jdbc_target(config.audit_url, config.jdbc_jar)
        audit = normalise_audit(*spark_io.read_audit_jdbc(spark, target, config.jdbc_partitions), cluster_id)
    return Inputs(
        meta,
        tables["brokers"],
        tables["zk_partitions"],
        tables["broker_replicas"],
        tables["controller_partitions"],
        tables["reassignments"],
        tables["topic_configs"],
        audit,
    )


def _run(spark: Any, config: JobConfig, inputs: Any, run_dir: str, store: Any) -> RunResult:
    # Imported on use: PySpark (the 'spark' extra) loads with these; see the note on the imports.
    from kafka_controller.reconcile import rules, summaries
    from kafka_controller.reconcile.frames import Params, prepare

    timings: dict[str, float] = {}
    t0 = t = time.perf_counter()

    def lap(name: str) -> None:
        nonlocal t
        now = time.perf_counter()
        timings[name] = round(now - t, 3)
        t = now

    meta = inputs.meta
    params = Params(
        now_ms=config.now_ms if config.now_ms is not None else int(meta["taken_ms"]),
        stuck_reassignment_ms=int(config.stuck_reassignment_minutes * 60_000),
        leader_imbalance_percentage=config.leader_imbalance_percentage,
    )
    prepared = prepare(spark, inputs, params)
    cached = prepared.persist()
    try:
        partitions = prepared.pz.count()
        lap("load")
        for frame in cached[1:]:  # the joins and the audit window, so "rules" times the rules alone
            frame.count()
        lap("prepare")
        # One partition per core: findings are few, and the union of fifteen rules has many partitions.
        findings = rules.run_rules(prepared).coalesce(spark.sparkContext.defaultParallelism).persist()
        cached.append(findings)
        counts = findings.groupBy("kind", "severity").count().collect()
        total = sum(row["count"] for row in counts)
        top = job_report.top_findings(findings) if total else []
        lap("rules")
        ordered = findings.coalesce(1) if total <= SINGLE_FILE_FINDINGS else findings
        ordered.sortWithinPartitions("kind", "topic", "partition", "broker").write.parquet(
            f"{run_dir}/findings"
        )
        summaries.partition_summary(prepared, findings).write.parquet(f"{run_dir}/partition_summary")
        summaries.broker_summary(prepared, findings).write.parquet(f"{run_dir}/broker_summary")
        lap("outputs")
        plan = _plan(prepared, summaries, remediation)
        spark_io.write_text(spark, f"{run_dir}/{remediation.PLAN_FILE}", json.dumps(plan, indent=1) + "\n")
        lap("remediation")
        by_kind = Counter[str]()
        by_severity = Counter[str]()
        for row in counts:
            by_kind[row["kind"]] += row["count"]
            by_severity[row["severity"]] += row["count"]
        result = RunResult(
            config.run_id,
            run_dir,
            partitions,
            total,
            dict(sorted(by_kind.items())),
            {s: by_severity.get(s, 0) for s in SEVERITIES},
            plan,
            timings,
            top,
        )
        if store is not None:
            written = store.finish_run(
                config.run_id,
                finished_ms=int(time.time() * 1000),
                partitions_checked=partitions,
                findings=(r.asDict() for r in findings.toLocalIterator()),
                detail=json.dumps({**result.summary(), "snapshot_id": meta["snapshot_id"]}),
            )
            if written != total:
                raise KafkaControllerError(f"wrote {written} findings to the audit store, expected {total}")
            lap("store")
        timings["total"] = round(time.perf_counter() - t0, 3)
        spark_io.write_text(spark, f"{run_dir}/run.json", json.dumps(result.summary(), indent=1) + "\n")
        return result
    finally:
        for f in cached:
            f.unpersist()


def _plan(prepared: Any, summaries: Any, remediation: Any) -> dict[str, Any]:
    preferred = [r.asDict() for r in summaries.preferred_elections(prepared).collect()]
    online, unclean = [], []
    for r in summaries.offline_recovery(prepared).collect():
        base = {"topic": r["topic"], "partition": r["partition"]}
        if r["clean_leader"] is not None:
            online.append({**base, "expected_leader": r["clean_leader"]})
        elif r["unclean_candidate"] is not None:
            unclean.append(
                {
                    **base,
                    "candidate": r["unclean_candidate"],
                    "live_replicas": list(r["live_replicas"]),
                    "unclean_enabled": bool(r["unclean_enabled"]),
                }
            )
    plan: dict[str, Any] = remediation.build_plan(preferred, online, unclean)
    return plan


def main(argv: list[str] | None = None) -> int:
    """Entry point for ``spark-submit`` and ``kafka-controller reconcile run``."""
    args = build_parser().parse_args(argv)
    return run_from_args(args)


def run_from_args(args: argparse.Namespace) -> int:
    spark = None
    created = False
    begun = time.perf_counter()
    try:
        config = config_from_args(args)
        preflight(config)
        jars = required_jars(config)
        t = time.perf_counter()
        spark, created = spark_io.get_spark(
            master=args.master,
            jars=jars,
            shuffle_partitions=args.shuffle_partitions,
            driver_memory=args.driver_memory,
        )
        spark_start_s = time.perf_counter() - t
        result = run(spark, config)
    except InvalidArgumentError as e:
        print(f"reconcile: error: {e}", file=sys.stderr)
        return 2
    except KafkaControllerError as e:
        print(f"reconcile: failed: {e}", file=sys.stderr)
        return 1
    except Exception as e:  # Spark's errors: report one line, the driver log has the rest
        first = (str(e).strip().splitlines() or [""])[0]
        print(f"reconcile: failed: {type(e).__name__}: {first}", file=sys.stderr)
        return 1
    finally:
        if created and spark is not None:
            spark.stop()
    if created:
        result.timings_s["spark_start"] = round(spark_start_s, 3)
    # the report first: under spark-submit stderr is merged into stdout, and the summary must end it
    _report(result, args.fail_on, spark_start_s if created else None, time.perf_counter() - begun)
    print(json.dumps(result.summary(), indent=1), flush=True)
    return exit_code(result.by_severity, args.fail_on)


def _report(result: RunResult, fail_on: str, spark_start_s: float | None, total_s: float) -> None:
    """The table, Spark's start-up and the verdict, on stderr (stdout is the JSON summary)."""
    for line in job_report.findings_table(result.top, result.findings, result.run_dir):
        print(line, file=sys.stderr)
    print(
        f"reconcile: {job_report.spark_start_line(spark_start_s, total_s, spark_start_s is not None)}",
        file=sys.stderr,
    )
    print(f"reconcile: {job_report.verdict_line(result.by_severity, fail_on)}", file=sys.stderr)
    sys.stderr.flush()


if __name__ == "__main__":
    sys.exit(main())
