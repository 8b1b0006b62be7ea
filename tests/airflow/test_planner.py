"""Dry runs: the project's controller on an in-memory copy of a cluster's metadata."""

from __future__ import annotations

import pytest

from kafka_controller.airflow.plan_model import ClusterSnapshot
from kafka_controller.airflow.planner import DryRun, DryRunError, plan_rolling_restart
from kafka_controller.domain.audit_records import PartitionTransition
from tests.airflow.views import memory_cluster, tp

LAYOUT = {
    "t-0": ((1, 2), 1, (1, 2)),
    "t-1": ((2, 3), 3, (2, 3)),  # led by its second replica
    "t-2": ((3, 1), 3, (3,)),  # ISR shrunk to 3
    "solo-0": ((2,), 2, (2,)),
}


@pytest.fixture
def live():
    admin, sessions = memory_cluster([1, 2, 3], LAYOUT, configs={"t": {"min.insync.replicas": "1"}})
    yield admin
    for s in (*sessions.values(), admin):
        s.close()


def _tree(store) -> dict:
    return {p: store.tree.get(p)[0] for p in store.tree.paths()}


def test_the_snapshot_is_what_describe_shows(live) -> None:
    snap = ClusterSnapshot.read(live)
    v = snap.view()
    assert v.summary["partitions"] == 4 and v.summary["brokers"] == 3
    assert snap.configs["t"] == {"min.insync.replicas": "1"}
    assert v.partition("t", 2).isr == (3,)


def test_controlled_shutdown_plan_moves_leadership_and_shows_what_goes_offline(live) -> None:
    before = _tree(live)
    with DryRun(ClusterSnapshot.read(live), operation_id="op-1") as run:
        assert run.baseline.leaders_moved == {}  # every leader is alive: a failover changes none
        change = run.controlled_shutdown(3)
    assert change.leaders_moved == {"t-1": (3, 2), "t-2": (3, -1)}
    assert change.offline_after == ["t-2"]
    assert change.unclean_needed == {"t-2": [1]}  # 1 is alive but out of the ISR
    assert change.unclean_elected == []
    records = change.transitions
    assert records and {r.operation_id for r in records} == {"op-1"}
    assert all(r.controller_id == -1 and r.sequence == -1 and r.event.startswith("dry-run:") for r in records)
    assert _tree(live) == before  # nothing touched the live tree


def test_an_rf1_partition_goes_offline_with_its_broker_even_after_controlled_shutdown(live) -> None:
    with DryRun(ClusterSnapshot.read(live)) as run:
        change = run.controlled_shutdown(2)
    assert "solo-0" in change.offline_after and change.unclean_needed == {}
    assert change.leaders_moved["solo-0"] == (2, -1)


def test_unclean_election_is_planned_only_when_asked_and_recorded_as_unclean(live) -> None:
    with DryRun(ClusterSnapshot.read(live)) as run:
        run.stop_broker(3)
        change = run.elect_leaders("unclean", [tp("t-2")])
    assert change.answer == {"t-2": 1}
    assert change.unclean_elected == ["t-2"] and change.offline_after == []
    unclean = [r for r in change.transitions if isinstance(r, PartitionTransition) and r.unclean]
    assert [(r.topic, r.partition, r.leader_after) for r in unclean] == [("t", 2, 1)]


def test_preferred_election_plan(live) -> None:
    with DryRun(ClusterSnapshot.read(live)) as run:
        change = run.elect_leaders("preferred", None)
    assert change.leaders_moved == {"t-1": (3, 2)}
    assert change.answer["t-0"] == "ELECTION_NOT_NEEDED"
    assert change.answer["t-2"] == "ELECTION_NOT_NEEDED"  # led by 3, its preferred replica


def test_broker_defaults_reach_the_dry_run_controller(live) -> None:
    snap = ClusterSnapshot.read(live)
    with DryRun(snap, broker_defaults={"unclean.leader.election.enable": "true"}) as run:
        change = run.stop_broker(3)  # t-2's only in-sync replica: unclean is allowed by default now
    assert change.offline_after == [] and change.unclean_elected == ["t-2"]


def test_reassignment_plan_starts_the_reassignment_in_memory(live) -> None:
    with DryRun(ClusterSnapshot.read(live)) as run:
        change = run.reassign({tp("t-0"): (2, 3)})
        assert change.answer == {"t-0": "NONE"}
        p = run.view().partition("t", 0)
    assert p.reassigning and p.adding_replicas == (3,) and set(p.removing_replicas) == {1}


def test_rolling_restart_plan_is_one_step_per_broker_from_the_same_start(live) -> None:
    steps = plan_rolling_restart(ClusterSnapshot.read(live), [1, 2, 3], operation_id="op-2")
    assert [s.action for s in steps] == [
        "controlled-shutdown:1",
        "controlled-shutdown:2",
        "controlled-shutdown:3",
    ]
    assert steps[0].offline_after == []
    assert steps[1].offline_after == ["solo-0"] and steps[2].offline_after == ["t-2"]


def test_unknown_broker_is_refused(live) -> None:
    with (
        DryRun(ClusterSnapshot.read(live)) as run,
        pytest.raises(DryRunError, match="broker 9 is not registered"),
    ):
        run.controlled_shutdown(9)
