"""``kafka-controller demo``'s refusals before anything starts: one line, exit 1, nothing created."""

from __future__ import annotations

import importlib.util
import sys
import tempfile
from pathlib import Path

import pytest

from kafka_controller.airflow import demo_home
from kafka_controller.airflow.demo_home import AirflowDemoError, dags_folder
from tests.cli.clirun import run

needs_airflow = pytest.mark.skipif(importlib.util.find_spec("airflow") is None, reason="needs Airflow")


@pytest.fixture
def private_tmp(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Where ``tempfile.mkdtemp`` would put the demo's directory: it must stay empty."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def test_without_airflow_the_default_scenario_says_so_and_names_the_other(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, private_tmp: Path
) -> None:
    monkeypatch.setitem(sys.modules, "airflow", None)  # what find_spec sees when it is not installed
    r = run(capsys, "demo")
    assert r.code == 1
    assert r.error_line.startswith("kafka-controller demo: error: Airflow is not installed")
    assert "--scenario scripted" in r.error_line
    assert list(private_tmp.iterdir()) == []


@needs_airflow
def test_a_dags_folder_without_the_demo_dags_is_refused(
    capsys: pytest.CaptureFixture[str], private_tmp: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    empty = tmp_path_factory.mktemp("no-dags")
    (empty / "controller_failover_drill.py").write_text("# only one of the two\n")
    r = run(capsys, "demo", "--dags-folder", str(empty), "--json")
    assert r.code == 1
    assert r.error_line == (
        f"kafka-controller demo: error: bad --dags-folder {empty}: no rolling_controlled_shutdown.py in it"
    )
    assert r.out == "" and list(private_tmp.iterdir()) == []


def test_an_install_without_the_checkouts_dags_points_to_the_ways_out(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(demo_home, "source_root", lambda: tmp_path)  # site-packages: no dags/
    with pytest.raises(AirflowDemoError) as e:
        dags_folder()
    message = str(e.value)
    assert "\n" not in message and str(tmp_path / "dags") in message
    assert "--dags-folder" in message and "--scenario scripted" in message


def test_the_checkouts_dags_are_found_by_default() -> None:
    assert dags_folder() == Path(__file__).resolve().parents[2] / "dags"


def test_help_names_both_scenarios(capsys: pytest.CaptureFixture[str]) -> None:
    r = run(capsys, "demo", "--help")
    text = " ".join(r.out.split())
    assert r.code == 0
    assert "--scenario {airflow,scripted}" in text and "--dags-folder" in text
    assert "controller_failover_drill" in text and "rolling_controlled_shutdown" in text
