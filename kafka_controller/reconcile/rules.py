"""The reconciliation rules, each defined once: one Spark function per finding kind, from the prepared
frames (``frames.Prepared``) to findings with ``rule_evidence.FINDING_COLUMNS``.

The functions live with the input they read (``rules_zk``, ``rules_views``, ``rules_audit``); this
module pairs each with its ``rules_catalog`` entry (severity, input, meaning) and runs those whose
input the snapshot holds. The pandas copy in ``bench/pandas_reconcile`` is the benchmark's
baseline and the tests' cross-check, not a second definition in the product.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import reduce

from pyspark.sql import DataFrame

from kafka_controller.reconcile import rules_audit as A
from kafka_controller.reconcile import rules_views as V
from kafka_controller.reconcile import rules_zk as Z
from kafka_controller.reconcile.frames import Prepared
from kafka_controller.reconcile.rule_evidence import FINDINGS_DDL
from kafka_controller.reconcile.rules_catalog import CATALOG

__all__ = ["RULES", "Rule", "applicable", "run_rules"]


@dataclass(frozen=True, slots=True)
class Rule:
    kind: str
    severity: str
    needs: str  # zk | brokers | controller | audit
    fn: Callable[[Prepared], DataFrame]
    doc: str


_FUNCTIONS: dict[str, Callable[[Prepared], DataFrame]] = {
    "offline_partition": Z.offline_partition,
    "leader_on_dead_broker": Z.leader_on_dead_broker,
    "leader_not_in_isr": Z.leader_not_in_isr,
    "isr_not_subset_of_replicas": Z.isr_not_subset_of_replicas,
    "under_replicated": Z.under_replicated,
    "under_min_isr": Z.under_min_isr,
    "not_on_preferred_leader": Z.not_on_preferred_leader,
    "leader_skew": Z.leader_skew,
    "reassignment_stuck": Z.reassignment_stuck,
    "broker_view_mismatch": V.broker_view_mismatch,
    "controller_view_mismatch": V.controller_view_mismatch,
    "audit_state_mismatch": A.audit_state_mismatch,
    "illegal_transition": A.illegal_transition,
    "leader_epoch_regression": A.leader_epoch_regression,
    "hw_regression": V.hw_regression,
}
RULES: tuple[Rule, ...] = tuple(
    Rule(kind, severity, needs, _FUNCTIONS[kind], doc) for kind, (severity, needs, doc) in CATALOG.items()
)


def applicable(p: Prepared) -> list[Rule]:
    have = {
        "zk": True,
        "brokers": p.bz is not None,
        "controller": p.cz is not None,
        "audit": p.audit is not None,
    }
    return [r for r in RULES if have[r.needs]]


def run_rules(p: Prepared, kinds: set[str] | None = None) -> DataFrame:
    """Every applicable rule's findings, as one DataFrame."""
    frames = [r.fn(p) for r in applicable(p) if kinds is None or r.kind in kinds]
    if not frames:
        return p.spark.createDataFrame([], FINDINGS_DDL)
    return reduce(DataFrame.unionByName, frames)
