"""The reconciliation operator keeps its documented behaviour although the job now fails on critical
findings by default: without ``fail_on`` it passes ``--fail-on none`` and exit 3 never fails the task."""

from __future__ import annotations

import pytest

from kafka_controller.airflow.operators.reports import reconcile_job_args, reconcile_job_failed
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
