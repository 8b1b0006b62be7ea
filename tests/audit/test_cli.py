"""``kafka-controller audit``: readable tables, JSON, HTML, and one-line errors with a non-zero exit."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from kafka_controller.audit.migrate import head_revision, upgrade_database
from kafka_controller.audit.writer import AuditWriter
from kafka_controller.cli.audit_cmd import URL_ENV, parse_since
from kafka_controller.cli.main import main
from kafka_controller.testing.postgres import free_port
from tests.audit.factories import BASE_MS, scenario


@pytest.fixture
def filled_url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    parts, reps, events = scenario([])
    with AuditWriter(url, spool_dir=tmp_path / "spool") as w:
        w.record([*parts, *reps, *events])
        assert w.flush(60)
    return url


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["audit", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_report_prints_readable_tables(filled_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "report", "--url", filled_url, "--limit", "5")
    assert code == 0, err
    titles = (
        "Unclean leader elections",
        "Failed and invalid transitions",
        "Transitions per operation",
        "Leader moves per broker",
        "Time to recover per controller failover",
        "Leaders per broker",
    )
    for title in titles:
        assert title in out
    assert "broker_id  leaderships_gained  leaderships_lost" in out
    assert "2023-11-14T" not in out and "2023-11-14 22:" in out  # times are readable, in UTC


def test_report_json_and_html(filled_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    html = tmp_path / "report.html"
    code, out, err = run(capsys, "report", "--url", filled_url, "--json", "--html", str(html))
    assert code == 0, err
    report = orjson.loads(out)
    assert (
        report["summary"]["partition_transitions"] == 400 and report["summary"]["replica_transitions"] == 150
    )
    assert set(report["sections"]) == {
        "unclean_elections", "failed_transitions", "transitions_per_operation",
        "leader_moves_per_broker", "failover_recovery",
    }  # fmt: skip
    assert html.read_text().startswith("<!DOCTYPE html>") and f"wrote {html}" in err
    assert not list(tmp_path.glob(".*.tmp"))


def test_since_filters(filled_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    since = BASE_MS + 15 * 60_000
    code, out, _ = run(capsys, "report", "--url", filled_url, "--json", "--since", str(since))
    assert code == 0
    report = orjson.loads(out)
    assert report["filters"]["since_ms"] == since
    assert report["summary"]["first_ms"] >= since
    assert 0 < report["summary"]["partition_transitions"] < 400


def test_parse_since() -> None:
    now = 1_700_000_000_000
    assert parse_since("1699999999000", now) == 1_699_999_999_000
    assert parse_since("90s", now) == now - 90_000
    assert parse_since("2h", now) == now - 7_200_000
    assert parse_since("7d", now) == now - 7 * 86_400_000
    assert parse_since("2023-11-14T22:13:20Z", now) == now
    assert parse_since("2023-11-14T22:13:20", now) == now  # naive means UTC
    assert parse_since("2023-11-15T00:13:20+02:00", now) == now


def test_empty_database_exits_zero_saying_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'empty.db'}"
    upgrade_database(url)
    code, out, _ = run(capsys, "report", "--url", url)
    assert code == 0 and "Nothing recorded yet" in out
    code, out, _ = run(capsys, "report", "--url", url, "--json")
    assert code == 0 and orjson.loads(out)["empty"] is True


@pytest.mark.parametrize(
    "argv, message",
    [
        (["report", "--url", "nonsense"], "bad audit database URL"),
        (["report", "--url", "oracle://db/x"], "backend 'oracle' is not supported"),
        (["report", "--url", "sqlite:////nonexistent/dir/audit.db"], "no audit database at"),
        (["report", "--url", "sqlite:///{tmp}/audit.db", "--since", "yesterday"], "bad --since 'yesterday'"),
        (["report", "--url", "sqlite:///{tmp}/audit.db", "--limit", "0"], "bad --limit 0"),
        (["report", "--url", "sqlite:///{tmp}/audit.db", "--html", "/nonexistent/dir/r.html"], "bad --html"),
        (
            ["report", "--url", "postgresql+psycopg://postgres@127.0.0.1:{port}/x"],
            "cannot read the audit database",
        ),
        (
            ["upgrade", "--url", "postgresql+psycopg://postgres@127.0.0.1:{port}/x"],
            "cannot upgrade the audit database",
        ),
    ],
)
def test_bad_input_is_one_line_and_non_zero(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    upgrade_database(f"sqlite:///{tmp_path}/audit.db")
    argv = [a.format(tmp=tmp_path, port=free_port()) for a in argv]
    code, out, err = run(capsys, *argv)
    assert code != 0
    assert out == ""
    assert message in err
    assert err.count("\n") == 1 and err.startswith("kafka-controller audit: error: ")


def test_missing_url_names_the_environment_variable(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv(URL_ENV, raising=False)
    code, _, err = run(capsys, "report")
    assert code != 0 and URL_ENV in err


def test_upgrade_then_report_through_the_console_script(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'new.db'}"
    env = {**os.environ, URL_ENV: url}
    script = Path(sys.executable).with_name("kafka-controller")
    done = subprocess.run(
        [str(script), "audit", "upgrade"], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert f"is at revision {head_revision()}" in done.stdout
    done = subprocess.run(
        [str(script), "audit", "report"], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0 and "Nothing recorded yet" in done.stdout
