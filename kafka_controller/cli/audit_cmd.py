"""``kafka-controller audit``: read and maintain the audit store.

``audit report`` prints readable tables (or ``--json``) and can write a self-contained HTML report;
``audit upgrade`` creates or upgrades the schema in place. The URL comes from ``--url`` or the
``KAFKA_CONTROLLER_AUDIT_URL`` environment variable. SQLAlchemy is imported only when a subcommand
runs, so ``kafka-controller --help`` stays fast.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kafka_controller.domain.errors import InvalidArgumentError

URL_ENV = "KAFKA_CONTROLLER_AUDIT_URL"
_RELATIVE = re.compile(r"^(\d+)\s*(s|m|h|d)$")
_UNIT_MS = {"s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def register(subparsers: Any, summary: str) -> None:
    p = subparsers.add_parser("audit", help=summary)
    sub = p.add_subparsers(dest="audit_command", metavar="ACTION", required=True)

    r = sub.add_parser("report", help="print the audit report (tables, --json, or --html FILE)")
    _url(r)
    r.add_argument("--json", action="store_true", help="print the report as JSON")
    r.add_argument(
        "--html", metavar="FILE", type=Path, help="also write a self-contained HTML report to FILE"
    )
    r.add_argument("--operation", metavar="ID", help="only what this operation caused")
    r.add_argument(
        "--cluster-id",
        metavar="ID",
        help="only this cluster's rows (ZooKeeper's /cluster/id), for a store several clusters audit to",
    )
    r.add_argument(
        "--since",
        metavar="WHEN",
        help="only records from WHEN on: ISO-8601 time (UTC unless it says), epoch milliseconds, "
        "or a duration ago such as 90s, 15m, 2h, 7d",
    )
    r.add_argument("--limit", type=int, default=100, help="rows per table (default: %(default)s)")
    r.add_argument(
        "--dry-runs",
        action="store_true",
        help="count what dry runs planned with what happened (left out by default)",
    )
    r.set_defaults(func=run_report)

    u = sub.add_parser("upgrade", help="create or upgrade the audit schema in place")
    _url(u)
    u.set_defaults(func=run_upgrade)


def _cluster_id(value: str | None) -> str | None:
    # Imported on use: SQLAlchemy is optional (the 'audit' extra).
    from kafka_controller.audit.schema import checked_cluster_id

    return checked_cluster_id(value) if value is not None else None


def _url(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--url",
        default=os.environ.get(URL_ENV),
        help=f"SQLAlchemy URL of the audit store (default: ${URL_ENV})",
    )


def _require_url(args: argparse.Namespace) -> str:
    if not args.url:
        raise InvalidArgumentError(f"no audit database: pass --url or set {URL_ENV}")
    return str(args.url)


def parse_since(value: str, now_ms: int) -> int:
    """``--since`` as epoch milliseconds; ``InvalidArgumentError`` naming the value otherwise."""
    text = value.strip()
    if text.isdigit():
        return int(text)
    m = _RELATIVE.match(text)
    if m:
        return now_ms - int(m.group(1)) * _UNIT_MS[m.group(2)]
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidArgumentError(
            f"bad --since {value!r}: use an ISO-8601 time, epoch milliseconds, or e.g. 15m, 2h, 7d"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return int(when.timestamp() * 1000)


def run_report(args: argparse.Namespace) -> int:
    # Imported on use: SQLAlchemy is optional (the 'audit' extra).
    import orjson

    from kafka_controller.audit.html import render_html
    from kafka_controller.audit.reports import build_report, render_text

    url = _require_url(args)
    if args.limit < 1:
        raise InvalidArgumentError(f"bad --limit {args.limit}: must be at least 1")
    now_ms = int(datetime.now(UTC).timestamp() * 1000)
    since_ms = parse_since(args.since, now_ms) if args.since else None
    if args.html is not None and not args.html.parent.is_dir():
        raise InvalidArgumentError(f"bad --html {args.html}: directory {args.html.parent} does not exist")
    report = build_report(
        url,
        since_ms=since_ms,
        operation_id=args.operation,
        limit=args.limit,
        now_ms=now_ms,
        dry_runs=args.dry_runs,
        cluster_id=_cluster_id(args.cluster_id),
    )
    if args.html is not None:
        tmp = args.html.with_name(f".{args.html.name}.tmp")
        tmp.write_text(render_html(report), encoding="utf-8")
        tmp.replace(args.html)  # all or nothing: a reader never sees half a report
    if args.json:
        sys.stdout.write(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        sys.stdout.write(render_text(report))
    if args.html is not None:
        print(f"wrote {args.html}", file=sys.stderr)
    return 0


def run_upgrade(args: argparse.Namespace) -> int:
    # Imported on use: SQLAlchemy is optional (the 'audit' extra).
    from kafka_controller.audit.engine import redacted
    from kafka_controller.audit.migrate import upgrade_database

    url = _require_url(args)
    revision = upgrade_database(url)
    print(f"audit database {redacted(url)} is at revision {revision}")
    return 0
