"""The trial plan itself: CI's default trials cover every fault kind at least twice, a fault tied
to workloads gets only those, and the soak splits its seeds without gaps or overlaps."""

from __future__ import annotations

from collections import Counter

from bench.fault_soak import _ranges
from tests.faults.conftest import DEFAULT_TRIALS
from tests.faults.faults import FAULT_KINDS, FAULT_WORKLOADS
from tests.faults.trial import TrialSpec


def test_default_trials_cover_every_kind_twice_from_any_first_seed() -> None:
    for start in (0, 7, 123_400):
        kinds = Counter(TrialSpec.of(s)[0].fault for s in range(start, start + DEFAULT_TRIALS))
        assert set(kinds) == set(FAULT_KINDS) and min(kinds.values()) >= 2


def test_a_slow_link_runs_only_under_a_controlled_shutdown_or_a_reassignment() -> None:
    specs = [TrialSpec.of(s)[0] for s in range(2_000)]
    workloads = {s.workload for s in specs if s.fault == "slow_link"}
    assert workloads == set(FAULT_WORKLOADS["slow_link"]) == {"reassignment", "rolling_shutdown"}
    assert {s.workload for s in specs if s.fault == "kill_controller"} > workloads


def test_soak_ranges_are_consecutive_and_complete() -> None:
    ranges = _ranges(500, 3, 1_000)
    assert ranges == [(1_000, 167), (1_167, 167), (1_334, 166)]
    assert _ranges(1, 4, 5) == [(5, 1)]
