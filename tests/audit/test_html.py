"""The HTML report: one self-contained file, charts drawn from the data, everything escaped."""

from __future__ import annotations

import re
from pathlib import Path

from kafka_controller.audit.html import render_html
from kafka_controller.audit.migrate import upgrade_database
from kafka_controller.audit.reports import build_report
from kafka_controller.audit.writer import AuditWriter
from tests.audit.factories import scenario


def _report(tmp_path: Path) -> dict[str, object]:
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    parts, reps, events = scenario([])
    with AuditWriter(url, spool_dir=tmp_path / "spool") as w:
        w.record([*parts, *reps, *events])
        assert w.flush(60)
    return build_report(url)


def test_self_contained_with_both_charts(tmp_path: Path) -> None:
    report = _report(tmp_path)
    page = render_html(report)
    assert page.startswith("<!DOCTYPE html>")
    for forbidden in ("<script", "src=", "href=", "@import", "url("):
        assert forbidden not in page
    svgs = re.findall(r"<svg .*?</svg>", page, flags=re.S)
    assert len(svgs) == 2
    over_time, leaders = svgs
    points = report["charts"]["transitions_over_time"]  # type: ignore[index]
    bars = sum(1 for p in points for o in ("ok", "invalid", "failed") if p[o])
    assert over_time.count("<rect") == bars
    assert leaders.count("<rect") == len(report["charts"]["leaders_per_broker"])  # type: ignore[index]
    for row in report["charts"]["leaders_per_broker"]:  # type: ignore[index]
        assert f"broker {row['broker_id']}</text>" in leaders


def test_values_from_outside_are_escaped(tmp_path: Path) -> None:
    page = render_html(_report(tmp_path))
    assert "&lt;b&gt;clicks&amp;co&lt;/b&gt;" in page
    assert "<b>clicks" not in page


def test_tables_list_every_section(tmp_path: Path) -> None:
    report = _report(tmp_path)
    page = render_html(report)
    for section in report["sections"].values():  # type: ignore[attr-defined]
        assert f"{section['title']}: {section['total']}" in page
    failed = report["sections"]["failed_transitions"]  # type: ignore[index]
    shown = len(failed["rows"])
    assert page.count("<td>failed</td>") + page.count("<td>invalid</td>") >= shown > 0


def test_empty_database_says_nothing_yet(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'empty.db'}"
    upgrade_database(url)
    page = render_html(build_report(url))
    assert "Nothing recorded yet" in page and "<svg" not in page
