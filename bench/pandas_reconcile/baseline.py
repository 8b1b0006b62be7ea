"""Running the pandas baseline: every applicable rule over one snapshot (and audit history), timed by
stage, as ``kafka_controller.reconcile.job`` runs the Spark rules."""

from __future__ import annotations

import time
from pathlib import Path

import pandas as pd

from . import audit_rules as A
from . import rules as R
from .arrow import FINDING_COLUMNS, Params
from .load import load, zk_frame


def rules_for(c: R.Context) -> list[R.RuleFn]:
    """The rules whose inputs the snapshot has, in the Spark job's catalog order of inputs."""
    out: list[R.RuleFn] = [
        R.offline_partition,
        R.leader_on_dead_broker,
        R.leader_not_in_isr,
        R.isr_not_subset_of_replicas,
        R.under_replicated,
        R.under_min_isr,
        R.not_on_preferred_leader,
        R.leader_skew,
    ]
    if "partition_transitions" in c.d:
        c.cache["audit"] = A.audit_frame(c.d)
        out += [A.audit_state_mismatch, A.illegal_transition, A.leader_epoch_regression]
    out.append(R.reassignment_stuck)
    if c.meta["broker_views"]:
        out += [R.broker_view_mismatch, R.hw_regression]
    if c.meta["controller_view"]:
        out.append(R.controller_view_mismatch)
    return out


def run(
    snapshot: str | Path, audit: str | Path | None = None, params: Params | None = None
) -> tuple[pd.DataFrame, dict[str, float]]:
    """All findings (``FINDING_COLUMNS``) and the time of each stage in seconds."""
    params = params or Params()
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    d = load(snapshot, audit)
    timings["load"] = time.perf_counter() - t0
    t1 = time.perf_counter()
    ctx = R.Context(d, params, *zk_frame(d))
    frames = [rule(ctx) for rule in rules_for(ctx)]
    findings = (
        pd.concat([f for f in frames if len(f)], ignore_index=True)
        if any(len(f) for f in frames)
        else pd.DataFrame({c: [] for c in FINDING_COLUMNS})
    )
    timings["rules"] = time.perf_counter() - t1
    timings["total"] = time.perf_counter() - t0
    return findings, timings
