"""What ``reconcile run`` tells the person who ran it, on stderr (stdout keeps the JSON summary that
scripts and the Airflow operator parse): the most severe findings as a table, how long Spark took to
start, and whether the findings make the run fail (``--fail-on``, critical by default).

Pure, apart from ``top_findings`` (a Spark query): the table and exit code are plain functions of
rows and counts, so they are tested without a JVM.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kafka_controller.reconcile.rules_catalog import SEVERITIES, SEVERITY_RANK

EXIT_FINDINGS = 3
#: ``--fail-on`` values: a severity (fail on findings at least that severe) or ``none``.
FAIL_ON_CHOICES = ("none", *SEVERITIES)
DEFAULT_FAIL_ON = "critical"
#: At most this many findings in the table; the rest are in ``<run_dir>/findings``.
TABLE_ROWS = 25
DETAIL_WIDTH = 80


def exit_code(by_severity: Mapping[str, int], fail_on: str | None) -> int:
    """0, or ``EXIT_FINDINGS`` when there are findings at least as severe as ``fail_on``
    (``none`` or None: never)."""
    if fail_on is None or fail_on == "none":
        return 0
    worst = SEVERITIES.index(fail_on)
    return EXIT_FINDINGS if any(by_severity.get(s, 0) for s in SEVERITIES[: worst + 1]) else 0


def top_findings(findings: Any, limit: int = TABLE_ROWS) -> list[dict[str, Any]]:
    """The ``limit`` most severe findings (then by kind, topic, partition, broker), as dicts."""
    from pyspark.sql import functions as F

    rank = F.lit(0)
    for severity, value in SEVERITY_RANK.items():
        rank = F.when(F.col("severity") == severity, F.lit(value)).otherwise(rank)
    ordered = findings.orderBy(rank.desc(), "kind", "topic", "partition", "broker")
    return [row.asDict() for row in ordered.limit(limit).collect()]


def _cut(text: str, width: int = DETAIL_WIDTH) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 3] + "..."


def _partition(row: Mapping[str, Any]) -> str:
    if row.get("topic") is None:
        return "-" if row.get("broker") is None else f"broker {row['broker']}"
    where = f"{row['topic']}-{row['partition']}"
    return where if row.get("broker") is None else f"{where} (broker {row['broker']})"


def findings_table(rows: Sequence[Mapping[str, Any]], total: int, run_dir: str) -> list[str]:
    """SEVERITY, KIND, PARTITION, DETAIL (expected vs actual) lines; a last line for the rest."""
    if total == 0:
        return ["no findings"]
    table = [
        [
            str(r.get("severity")),
            str(r.get("kind")),
            _partition(r),
            _cut(f"expected {r.get('expected')}, actual {r.get('actual')}"),
        ]
        for r in rows
    ]
    lines = format_table(table, ["SEVERITY", "KIND", "PARTITION", "DETAIL"])
    if total > len(rows):
        lines.append(f"... and {total - len(rows)} more in {run_dir}/findings")
    return lines


def format_table(rows: list[list[str]], header: list[str]) -> list[str]:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in [header, *rows]]


def spark_start_line(spark_start_s: float | None, total_s: float, created: bool) -> str:
    """One line on Spark's start-up: how long, and what share of the whole run it was."""
    if not created or spark_start_s is None:
        return "Spark: the running session was used (no start-up)"
    share = 100.0 * spark_start_s / total_s if total_s > 0 else 0.0
    most = "; most of the run went to starting Spark" if share >= 50 else ""
    return f"Spark started in {spark_start_s:.1f} s ({share:.0f}% of {total_s:.1f} s){most}"


def verdict_line(by_severity: Mapping[str, int], fail_on: str) -> str:
    """The last line: the counts, and whether they fail the run."""
    counts = ", ".join(f"{by_severity.get(s, 0)} {s}" for s in SEVERITIES)
    if exit_code(by_severity, fail_on):
        return f"findings: {counts}; exit {EXIT_FINDINGS}: findings at or above --fail-on {fail_on}"
    return f"findings: {counts}; --fail-on {fail_on}: ok"
