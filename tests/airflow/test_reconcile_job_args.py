"""The reconciliation operator keeps its documented behaviour although the job now fails on critical
findings by default: without ``fail_on`` it passes ``--fail-on none`` and exit 3 never fails the task."""

from __future__ import annotations

import pytest

from kafka_controller.airflow.operators.reports import (
    reconcile_job_args,
    reconcile_job_failed,
    reconcile_job_summary,
)
from kafka_controller.domain.errors import KafkaControllerError
from kafka_controller.reconcile.job import build_parser


def _args(fail_on: str | None, audit_parquet: str | None = None) -> list[str]:
    return reconcile_job_args(
        snapshot="snap", out="runs", results_url="sqlite://", operation_id="op-1",
        audit_parquet=audit_parquet, fail_on=fail_on,
    )  # fmt: skip


def test_without_fail_on_the_job_is_told_never_to_fail_on_findings() -> None:
    args = _args(None)
    assert args[-2:] == ["--fail-on", "none"]
    assert build_parser().parse_args(args).fail_on == "none"  # the job accepts what the operator passes


def test_fail_on_is_passed_through() -> None:
    args = _args("warning", audit_parquet="audit")
    parsed = build_parser().parse_args(args)
    assert (parsed.fail_on, parsed.audit_parquet, parsed.operation_id) == ("warning", "audit", "op-1")


@pytest.mark.parametrize(
    ("code", "fail_on", "failed"),
    [(0, None, False), (3, None, False), (3, "critical", True), (1, None, True), (2, "none", True)],
)
def test_which_exit_codes_fail_the_task(code: int, fail_on: str | None, failed: bool) -> None:
    assert reconcile_job_failed(code, fail_on) is failed


def test_the_summary_is_found_among_the_merged_stderr_lines() -> None:
    """spark-submit merges the driver's stderr into stdout: a warning, the findings table (whose
    evidence may hold braces) and the verdict come around the summary."""
    stdout = (
        "/x/pyspark/testing/utils.py:127: FutureWarning: pandas >= 3.0.0\n"
        "SEVERITY  KIND  PARTITION  DETAIL\n"
        'critical  offline_partition  t-0  expected {"a": 1}, actual leader=-1\n'
        "reconcile: Spark started in 25.3 s (17% of 148.6 s)\n"
        '{\n "run_id": "r1",\n "by_severity": {\n  "critical": 1\n }\n}\n'
        "late worker warning {\n"
    )
    assert reconcile_job_summary(stdout) == {"run_id": "r1", "by_severity": {"critical": 1}}
    assert reconcile_job_summary('{\n "run_id": "r2"\n}') == {"run_id": "r2"}
    for bad in ("", "no findings\n", "{\n not json"):
        with pytest.raises(KafkaControllerError, match="printed no JSON summary"):
            reconcile_job_summary(bad)
