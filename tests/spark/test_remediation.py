"""The remediation plan format the recovery DAG consumes (no Spark)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kafka_controller.domain.errors import InvalidArgumentError
from kafka_controller.reconcile import remediation as R


def test_build_sorts_keeps_documented_keys_and_round_trips(tmp_path: Path) -> None:
    plan = R.build_plan(
        [{"topic": "b", "partition": 1, "leader": 3, "preferred": 1}, {"topic": "a", "partition": 2}],
        [{"topic": "c", "partition": 0, "expected_leader": 2}],
        [{"topic": "d", "partition": 5, "candidate": 4, "live_replicas": [4], "unclean_enabled": False}],
    )
    assert plan["preferred_election"] == [{"topic": "a", "partition": 2}, {"topic": "b", "partition": 1}]
    assert set(plan) == {"version", *R.PLAN_LISTS}
    path = R.write_plan(plan, tmp_path)
    assert path.name == R.PLAN_FILE and R.load_plan(path) == plan
    assert R.election_json(plan) == {
        "partitions": [{"topic": "a", "partition": 2}, {"topic": "b", "partition": 1}]
    }


@pytest.mark.parametrize(
    ("plan", "message"),
    [
        ([], "expected a JSON object"),
        ({"version": 2}, "unsupported version 2"),
        (
            {"version": 1, "preferred_election": {}, "online_transition": [], "unclean_candidates": []},
            "'preferred_election' must be a list",
        ),
        (
            {
                "version": 1,
                "preferred_election": [{"topic": "", "partition": 0}],
                "online_transition": [],
                "unclean_candidates": [],
            },
            r"preferred_election\[0\].topic",
        ),
        (
            {
                "version": 1,
                "preferred_election": [{"topic": "t", "partition": -1}],
                "online_transition": [],
                "unclean_candidates": [],
            },
            r"preferred_election\[0\].partition",
        ),
        (
            {
                "version": 1,
                "preferred_election": [{"topic": "t", "partition": 0}],
                "online_transition": [{"topic": "t", "partition": 0}],
                "unclean_candidates": [],
            },
            "t-0 is in both preferred_election and online_transition",
        ),
    ],
)
def test_validation_names_the_first_problem(plan: object, message: str) -> None:
    with pytest.raises(InvalidArgumentError, match=message):
        R.validate_plan(plan)


def test_load_reports_missing_and_corrupt_files(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="does not exist"):
        R.load_plan(tmp_path / "none.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(InvalidArgumentError, match="not readable JSON"):
        R.load_plan(bad)
    with pytest.raises(InvalidArgumentError, match="unknown plan list"):
        R.election_json(json.loads('{"preferred_election": []}'), "everything")
