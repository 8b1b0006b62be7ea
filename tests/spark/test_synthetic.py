"""Synthetic fleets and the pandas baseline (no Spark): each plant yields exactly its findings."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from bench import pandas_reconcile
from kafka_controller.domain.errors import InvalidArgumentError
from kafka_controller.reconcile import synthetic
from kafka_controller.reconcile.rules_catalog import RULE_SEVERITY

from .helpers import finding_keys


def test_a_healthy_fleet_has_ten_audit_rows_per_partition_and_no_findings(
    healthy_fleet: synthetic.SyntheticFleet,
) -> None:
    fleet = healthy_fleet
    assert fleet.audit_rows == synthetic.AUDIT_ROWS_PER_PARTITION * fleet.partitions
    zk = pq.read_table(fleet.snapshot / "zk_partitions").to_pylist()
    assert len(zk) == fleet.partitions
    assert all(len(set(r["replicas"])) == 3 and r["isr"] == r["replicas"] for r in zk)
    views = pq.read_table(fleet.snapshot / "broker_replicas")
    assert views.num_rows == 3 * fleet.partitions
    findings, timings = pandas_reconcile.run(fleet.snapshot, fleet.audit)
    assert findings.empty, findings.head()
    assert timings["total"] >= timings["rules"] > 0


@pytest.mark.parametrize("plant", synthetic.PLANTS)
def test_each_plant_alone_yields_exactly_its_findings(tmp_path: Path, plant: str) -> None:
    fleet = synthetic.generate(tmp_path / "f", 400, plants=[plant])
    findings, _ = pandas_reconcile.run(fleet.snapshot, fleet.audit)
    assert finding_keys(findings) == finding_keys(
        [dict(zip(("kind", "topic", "partition", "broker"), e, strict=True)) for e in fleet.expected]
    )
    assert set(findings.severity) <= {RULE_SEVERITY[k] for k in findings.kind}
    if plant != "reassignment_in_progress":
        assert plant.removesuffix("_unclean") in set(findings.kind)


def test_planted_fleet_matches_its_expectations(planted_fleet: synthetic.SyntheticFleet) -> None:
    findings, _ = pandas_reconcile.run(planted_fleet.snapshot, planted_fleet.audit)
    expected = [
        dict(zip(("kind", "topic", "partition", "broker"), e, strict=True)) for e in planted_fleet.expected
    ]
    assert finding_keys(findings) == finding_keys(expected)
    assert {k for k, *_ in planted_fleet.expected} == set(RULE_SEVERITY)


def test_generator_refuses_bad_requests(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="unknown plants"):
        synthetic.generate(tmp_path / "a", 100, plants=["meteor_strike"])
    with pytest.raises(InvalidArgumentError, match="needs at least"):
        synthetic.generate(tmp_path / "b", 100, plants=synthetic.PLANTS)
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "x").write_text("")
    with pytest.raises(InvalidArgumentError, match="not empty"):
        synthetic.generate(tmp_path / "c", 100)
