"""The audit report as one self-contained HTML file: inline CSS and hand-drawn SVG, no scripts.

Nothing is fetched from elsewhere (no CDN, no JavaScript), so the file opens the same from a mail
attachment, an Airflow log or an air-gapped host. Every value is HTML-escaped: topic names and
error messages come from outside.
"""

from __future__ import annotations

from html import escape
from typing import Any

from kafka_controller.audit.reports import SECTIONS, SOURCE_WORDS, format_ms, format_value

COLORS = {"ok": "#3a8f5c", "invalid": "#d99a1e", "failed": "#c0392b"}
#: The report's style, shared with the plugin's pages so that both read alike.
CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222;max-width:1100px}
h1{font-size:1.5em}h2{font-size:1.15em;margin-top:2em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:12px;margin:.5em 0}
th,td{border:1px solid #ddd;padding:3px 6px;text-align:left;white-space:nowrap}
th{background:#f4f4f4}.note{color:#666}.legend span{display:inline-block;margin-right:1em}
.sw{display:inline-block;width:10px;height:10px;margin-right:4px}
svg text{font:11px system-ui,sans-serif;fill:#333}
.warn{background:#fff4e0;border-left:4px solid #d99a1e;padding:.4em .8em}
.plan{background:#eef3fb;border-left:4px solid #4a6fa5;padding:.4em .8em}
pre{background:#f7f7f7;border:1px solid #ddd;padding:.6em;font-size:12px;overflow:auto}
nav a{margin-right:1em}
"""


def document(title: str, body: list[str]) -> str:
    """A whole page: the report's style, ``title`` (escaped here) as its heading, then ``body``
    (already-escaped HTML)."""
    head = (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(title)}</title><style>{CSS}</style></head><body><h1>{escape(title)}</h1>"
    )
    return head + "".join(body) + "</body></html>\n"


def _svg(width: int, height: int, body: list[str], label: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(label)}">' + "".join(body) + "</svg>"
    )


def transitions_chart(
    points: list[dict[str, Any]], bucket_ms: int, width: int = 900, height: int = 260
) -> str:
    """Stacked bars per time bucket: ok, invalid, failed."""
    if not points:
        return '<p class="note">No transitions in this window.</p>'
    left, bottom, top = 50, 30, 10
    plot_w, plot_h = width - left - 10, height - bottom - top
    first, last = points[0]["start_ms"], points[-1]["start_ms"]
    slots = (last - first) // bucket_ms + 1
    bar_w = plot_w / slots
    peak = max(p["ok"] + p["invalid"] + p["failed"] for p in points) or 1
    body = [
        f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" stroke="#999"/>',
        f'<text x="{left - 6}" y="{top + 8}" text-anchor="end">{peak}</text>',
        f'<text x="{left - 6}" y="{top + plot_h}" text-anchor="end">0</text>',
        f'<text x="{left}" y="{height - 8}">{escape(format_ms(first))}</text>',
        f'<text x="{left + plot_w}" y="{height - 8}" text-anchor="end">'
        f"{escape(format_ms(last + bucket_ms))}</text>",
    ]
    for p in points:
        x = left + (p["start_ms"] - first) // bucket_ms * bar_w
        y = top + plot_h
        for outcome in ("ok", "invalid", "failed"):
            h = p[outcome] / peak * plot_h
            if h <= 0:
                continue
            y -= h
            body.append(
                f'<rect x="{x:.1f}" y="{y:.1f}" width="{max(bar_w - 1, 1):.1f}" height="{h:.1f}" '
                f'fill="{COLORS[outcome]}"><title>{escape(format_ms(p["start_ms"]))}: '
                f"{p[outcome]} {outcome}</title></rect>"
            )
    legend = "".join(f'<span><i class="sw" style="background:{c}"></i>{o}</span>' for o, c in COLORS.items())
    return _svg(width, height, body, "transitions over time") + f'<div class="legend">{legend}</div>'


def bar_chart(
    rows: list[dict[str, Any]], label_key: str, value_key: str, label: str, width: int = 600
) -> str:
    """Horizontal bars, one per row (e.g. partitions led per broker)."""
    if not rows:
        return '<p class="note">Nothing to draw.</p>'
    row_h, left = 22, 90
    height = row_h * len(rows) + 10
    peak = max(r[value_key] for r in rows) or 1
    body = []
    for i, r in enumerate(rows):
        y = 5 + i * row_h
        w = r[value_key] / peak * (width - left - 60)
        body += [
            f'<text x="{left - 6}" y="{y + 14}" text-anchor="end">'
            f"{escape(label)} {escape(str(r[label_key]))}</text>",
            f'<rect x="{left}" y="{y + 3}" width="{w:.1f}" height="{row_h - 6}" fill="#4a6fa5"/>',
            f'<text x="{left + w + 4:.1f}" y="{y + 14}">{r[value_key]}</text>',
        ]
    return _svg(width, height, body, f"{value_key} per {label}")


def table(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return '<p class="note">None.</p>'
    columns = list(rows[0])
    head = "".join(f"<th>{escape(c)}</th>" for c in columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{escape(format_value(c, r.get(c)))}</td>" for c in columns) + "</tr>"
        for r in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _duration(ms: int) -> str:
    for unit, size in (("day", 86_400_000), ("hour", 3_600_000), ("minute", 60_000), ("second", 1_000)):
        if ms >= size and ms % size == 0:
            n = ms // size
            return f"{n} {unit}{'s' if n > 1 else ''}" if n > 1 else unit
    return f"{ms} ms"


def render_html(report: dict[str, Any]) -> str:
    title = f"Kafka controller audit: {report['database']}"
    parts = [f'<p class="note">Generated {escape(format_ms(report["generated_ms"]))}']
    filters = report["filters"]
    if filters["since_ms"] is not None:
        parts.append(f"; since {escape(format_ms(filters['since_ms']))}")
    if filters["operation_id"]:
        parts.append(f"; operation {escape(filters['operation_id'])}")
    if filters.get("cluster_id"):
        parts.append(f"; cluster {escape(filters['cluster_id'])}")
    parts.append("</p>")
    s = report.get("summary") or {}
    if filters.get("dry_runs"):
        parts.append(
            '<p class="plan">Dry runs included: what they planned is counted with what happened.</p>'
        )
    elif s.get("dry_run_rows"):
        parts.append(
            f'<p class="note">Left out: {s["dry_run_rows"]} rows planned by dry runs (not history).</p>'
        )
    if report["empty"]:
        parts.append("<p><strong>Nothing recorded yet</strong>: no transitions, events or operations.</p>")
        return document(title, parts)
    parts.append(
        table(
            [
                {
                    "partition transitions": s["partition_transitions"],
                    "replica transitions": s["replica_transitions"],
                    "ok": s["ok"],
                    "invalid": s["invalid"],
                    "failed": s["failed"],
                    "controller events": s["controller_events"],
                    "operations": s["operations"],
                    **{
                        f"operations {SOURCE_WORDS[k]}": n
                        for k, n in (s.get("operations_by_source") or {}).items()
                        if n
                    },
                    "first_ms": s["first_ms"],
                    "last_ms": s["last_ms"],
                }
            ]
        )
    )
    charts = report["charts"]
    parts += [
        f"<h2>Transitions over time (per {_duration(charts['bucket_ms'])})</h2>",
        transitions_chart(charts["transitions_over_time"], charts["bucket_ms"]),
        "<h2>Leaders per broker</h2>",
        '<p class="note">The latest known leader of each partition.</p>',
        bar_chart(charts["leaders_per_broker"], "broker_id", "partitions", "broker"),
    ]
    for section in SECTIONS:
        data = report["sections"][section.key]
        shown = len(data["rows"])
        more = f" (showing {shown} of {data['total']})" if shown < data["total"] else ""
        parts += [f"<h2>{escape(data['title'])}: {data['total']}{escape(more)}</h2>", table(data["rows"])]
    return document(title, parts)
