"""Synthetic fleet snapshots and audit histories of N partitions (RF 3), with optional planted problems.

Built with numpy and pyarrow, column at a time (a 3,000,000-partition fleet with 30,000,000 audit
rows takes about a minute), so the benchmark can scale and the tests can plant each finding once.

A healthy fleet is consistent across every source: each partition is led by its preferred replica
at leader epoch 2 with a full ISR, every broker's view and the controller's context agree, and
its audit history is exactly 10 rows that replay how it got there
(transitions of docs/controller-behaviour.md §1 only)::

    P  NonExistentPartition -> NewPartition          R x3  NonExistentReplica -> NewReplica
    P  NewPartition -> OnlinePartition (epoch 0)     R x3  NewReplica -> OnlineReplica
    P  OnlinePartition -> OnlinePartition (controlled shutdown of r0: r1 leads, epoch 1)
    P  OnlinePartition -> OnlinePartition (preferred election: r0 leads again, epoch 2)

``PLANTS`` maps each plant to what it changes; ``generate`` returns the findings each plant must
produce (``expected``) and the remediation plan they imply (``expected_plan``), written down per
plant here, independently of the rules, so tests compare the job against them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kafka_controller.domain.errors import InvalidArgumentError
from kafka_controller.reconcile import snapshot as S
from kafka_controller.reconcile.synthetic_fleet import Fleet
from kafka_controller.reconcile.synthetic_io import (
    FINAL_EPOCH,
    HOUR_MS,
    REPLICA,
    ROWS_PER_PARTITION,
    TAKEN_MS,
    write_audit,
    write_snapshot,
)

AUDIT_ROWS_PER_PARTITION = ROWS_PER_PARTITION
PLANTS = (
    "offline_partition",
    "offline_partition_unclean",
    "leader_on_dead_broker",
    "leader_not_in_isr",
    "isr_not_subset_of_replicas",
    "under_replicated",
    "under_min_isr",
    "not_on_preferred_leader",
    "leader_skew",
    "reassignment_stuck",
    "reassignment_in_progress",
    "broker_view_mismatch",
    "controller_view_mismatch",
    "audit_state_mismatch",
    "illegal_transition",
    "leader_epoch_regression",
    "hw_regression",
)


@dataclass(slots=True)
class SyntheticFleet:
    snapshot: Path
    audit: Path
    partitions: int
    brokers: int
    audit_rows: int
    expected: list[tuple[str, str | None, int | None, int | None]]
    expected_plan: dict[str, Any]


def generate(
    out: str | Path,
    partitions: int,
    *,
    brokers: int | None = None,
    partitions_per_topic: int = 50,
    plants: Sequence[str] = (),
    seed: int = 0,
    chunk: int = 500_000,
) -> SyntheticFleet:
    """Write ``<out>/snapshot`` and ``<out>/audit`` (Parquet) for a fleet of ``partitions`` partitions."""
    unknown = [p for p in plants if p not in PLANTS]
    if unknown:
        raise InvalidArgumentError(f"unknown plants {unknown}: choose from {', '.join(PLANTS)}")
    n = partitions
    b = brokers or max(6, math.ceil(3 * n / 4000))
    if b < 5:
        raise InvalidArgumentError(f"a synthetic fleet needs at least 5 brokers, got {b}")
    if n < 40 * max(1, len(plants)) and plants:
        raise InvalidArgumentError(
            f"planting {len(plants)} problems needs at least {40 * len(plants)} partitions"
        )
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise InvalidArgumentError(f"output directory {out} already exists and is not empty")
    fleet = _healthy(n, b, partitions_per_topic, np.random.default_rng(seed))
    used: set[int] = set()
    for j, plant in enumerate(plants):
        _PLANTERS[plant](fleet, _pick(fleet, j, len(plants), used), used)
    out.mkdir(parents=True, exist_ok=True)
    write_snapshot(fleet, out / "snapshot", chunk)
    rows = write_audit(fleet, out / "audit", chunk)
    plan = {
        "version": 1,
        **{k: sorted(v, key=lambda r: (r["topic"], r["partition"])) for k, v in fleet.plan.items()},
    }
    return SyntheticFleet(out / "snapshot", out / "audit", n, b, rows, sorted(fleet.expected, key=str), plan)


def _healthy(n: int, b: int, ppt: int, rng: np.random.Generator) -> Fleet:
    i = np.arange(n, dtype=np.int64)
    r0 = i % b
    step = 1 + (i // b) % max(1, (b - 1) // 2)
    rep = np.full((n, 4), -1, dtype=np.int32)
    rep[:, 0], rep[:, 1], rep[:, 2] = r0 + 1, (r0 + step) % b + 1, (r0 + 2 * step) % b + 1
    leader = rep[:, 0].copy()
    epoch = np.full(n, FINAL_EPOCH, dtype=np.int32)
    isr = rep.copy()
    return Fleet(
        n,
        b,
        ppt,
        rep,
        np.full((n, 1), -1, dtype=np.int32),
        np.full((n, 1), -1, dtype=np.int32),
        leader,
        epoch,
        isr,
        leader.copy(),
        epoch.copy(),
        np.full(n, "OnlinePartition", dtype=object),
        rng.integers(1_000, 1_000_000, size=n, dtype=np.int64),
        rep[:, :3].copy(),
        leader.copy(),
    )


def _pick(f: Fleet, j: int, count: int, used: set[int]) -> int:
    """Spread plants over the fleet (and so over preferred brokers); never two on one partition."""
    stride = f.n // (count + 1)
    i = (j + 1) * stride + j
    while i in used:
        i = (i + 1) % f.n
    used.add(i)
    return i


def _isr(f: Fleet, i: int, members: Iterable[int]) -> None:
    m = list(members)
    f.isr[i] = -1
    f.isr[i, : len(m)] = m


# -- plants: each changes one partition (leader_skew: one broker) and says what must be found ---------
def _offline(f: Fleet, i: int, _: set[int]) -> None:
    r0 = f.r(i, 0)
    f.leader[i] = f.c_leader[i] = -1
    f.epoch[i] = f.c_epoch[i] = FINAL_EPOCH + 1
    _isr(f, i, [r0])
    f.c_state[i] = "OfflinePartition"
    f.audit_extra.append(_replica_row(f, i, r0, "OnlineReplica", "OfflineReplica", -1, FINAL_EPOCH + 1, [r0]))
    f.expect("offline_partition", i)
    f.plan["online_transition"].append({"topic": f.topic(i), "partition": i % f.ppt, "expected_leader": r0})


def _offline_unclean(f: Fleet, i: int, _: set[int]) -> None:
    dead = f.dead_broker()
    f.rep[i, 0] = f.a_rep[i, 0] = f.a_leader[i] = dead
    f.leader[i] = f.c_leader[i] = -1
    f.epoch[i] = f.c_epoch[i] = FINAL_EPOCH + 1
    _isr(f, i, [dead])
    f.c_state[i] = "OfflinePartition"
    f.audit_extra.append(
        _replica_row(f, i, dead, "OnlineReplica", "OfflineReplica", -1, FINAL_EPOCH + 1, [dead])
    )
    f.expect("offline_partition", i)
    f.plan["unclean_candidates"].append(
        {
            "topic": f.topic(i),
            "partition": i % f.ppt,
            "candidate": f.r(i, 1),
            "live_replicas": [f.r(i, 1), f.r(i, 2)],
            "unclean_enabled": False,
        }
    )


def _dead_leader(f: Fleet, i: int, _: set[int]) -> None:
    dead = f.dead_broker()
    f.rep[i, 0] = f.leader[i] = f.c_leader[i] = f.a_rep[i, 0] = f.a_leader[i] = dead
    f.isr[i, 0] = dead
    f.expect("leader_on_dead_broker", i, dead)
    f.plan["online_transition"].append(
        {"topic": f.topic(i), "partition": i % f.ppt, "expected_leader": f.r(i, 1)}
    )


def _not_in_isr(f: Fleet, i: int, _: set[int]) -> None:
    _isr(f, i, [f.r(i, 1), f.r(i, 2)])
    f.expect("leader_not_in_isr", i, f.r(i, 0))
    f.expect("under_replicated", i)


def _isr_extra(f: Fleet, i: int, _: set[int]) -> None:
    outsider = next(x for x in range(1, f.brokers + 1) if x not in f.rep[i])
    _isr(f, i, [f.r(i, 0), f.r(i, 1), f.r(i, 2), outsider])
    f.expect("isr_not_subset_of_replicas", i)


def _under_replicated(f: Fleet, i: int, _: set[int]) -> None:
    _isr(f, i, [f.r(i, 0), f.r(i, 1)])
    f.expect("under_replicated", i)


def _under_min_isr(f: Fleet, i: int, _: set[int]) -> None:
    _isr(f, i, [f.r(i, 0)])
    f.configs.append((f.topic(i), "min.insync.replicas", "2"))
    f.expect("under_min_isr", i)
    f.expect("under_replicated", i)


def _lead_elsewhere(f: Fleet, i: int) -> None:
    f.leader[i] = f.c_leader[i] = f.a_leader[i] = f.r(i, 1)
    f.expect("not_on_preferred_leader", i, f.r(i, 0))
    f.plan["preferred_election"].append({"topic": f.topic(i), "partition": i % f.ppt})


def _not_preferred(f: Fleet, i: int, _: set[int]) -> None:
    _lead_elsewhere(f, i)


def _skew(f: Fleet, i: int, used: set[int]) -> None:
    """Broker r0 of ``i`` loses leadership of just over ``10%`` of the partitions it prefers."""
    broker = f.r(i, 0)
    preferred = [int(x) for x in np.flatnonzero(f.rep[:, 0] == broker)]
    need = len(preferred) // 10 + 1
    chosen = [x for x in preferred if x == i or x not in used][:need]
    used.update(chosen)
    for x in chosen:
        _lead_elsewhere(f, x)
    f.expect("leader_skew", None, broker)


def _reassign(f: Fleet, i: int, age_ms: int) -> None:
    """[r0, r1, r2] -> [r0, r2, new]: phase A, the new replica not yet in the ISR; epoch bumped (A1)."""
    r0, r1, r2 = f.r(i, 0), f.r(i, 1), f.r(i, 2)
    new = next(x for x in range(1, f.brokers + 1) if x not in (r0, r1, r2))
    f.rep[i, :4] = [r0, r2, new, r1]
    f.adding[i, 0], f.removing[i, 0] = new, r1
    f.epoch[i] = f.c_epoch[i] = FINAL_EPOCH + 1
    f.reassignments.append({"i": i, "target": [r0, r2, new]})
    f.audit_extra.append(
        {
            **_replica_row(f, i, new, "NonExistentReplica", "NewReplica", None, None, None),
            "timestamp_ms": TAKEN_MS - age_ms,
        }
    )


def _stuck(f: Fleet, i: int, _: set[int]) -> None:
    _reassign(f, i, 2 * HOUR_MS)
    f.expect("reassignment_stuck", i)


def _in_progress(f: Fleet, i: int, _: set[int]) -> None:
    _reassign(f, i, 5 * 60_000)


def _broker_view(f: Fleet, i: int, _: set[int]) -> None:
    f.view_overrides[(i, f.r(i, 1))] = {"leader_epoch": FINAL_EPOCH - 1}
    f.expect("broker_view_mismatch", i, f.r(i, 1))


def _controller_view(f: Fleet, i: int, _: set[int]) -> None:
    f.c_epoch[i] = FINAL_EPOCH - 1
    f.expect("controller_view_mismatch", i)


def _audit_state(f: Fleet, i: int, _: set[int]) -> None:
    f.audit_overrides[(i, 9)] = {"leader_after": f.r(i, 1)}
    f.expect("audit_state_mismatch", i)


def _illegal(f: Fleet, i: int, _: set[int]) -> None:
    f.audit_overrides[(i, 5)] = {"from_state": "NonExistentReplica"}
    f.expect("illegal_transition", i, f.r(i, 0))


def _epoch_regression(f: Fleet, i: int, _: set[int]) -> None:
    f.audit_overrides[(i, 9)] = {"leader_epoch_after": 0}
    f.expect("leader_epoch_regression", i)


def _hw(f: Fleet, i: int, _: set[int]) -> None:
    leo = int(f.leo[i])
    f.view_overrides[(i, f.r(i, 0))] = {"log_end_offset": leo, "high_watermark": leo}
    f.view_overrides[(i, f.r(i, 1))] = {"log_end_offset": leo + 5_000, "high_watermark": leo + 5_000}
    f.expect("hw_regression", i, f.r(i, 0))


_PLANTERS = {
    "offline_partition": _offline,
    "offline_partition_unclean": _offline_unclean,
    "leader_on_dead_broker": _dead_leader,
    "leader_not_in_isr": _not_in_isr,
    "isr_not_subset_of_replicas": _isr_extra,
    "under_replicated": _under_replicated,
    "under_min_isr": _under_min_isr,
    "not_on_preferred_leader": _not_preferred,
    "leader_skew": _skew,
    "reassignment_stuck": _stuck,
    "reassignment_in_progress": _in_progress,
    "broker_view_mismatch": _broker_view,
    "controller_view_mismatch": _controller_view,
    "audit_state_mismatch": _audit_state,
    "illegal_transition": _illegal,
    "leader_epoch_regression": _epoch_regression,
    "hw_regression": _hw,
}


def _replica_row(
    f: Fleet,
    i: int,
    replica: int,
    frm: str,
    to: str,
    leader: int | None,
    epoch: int | None,
    isr: list[int] | None,
) -> dict[str, Any]:
    return {
        "i": i,
        "table": REPLICA,
        "replica": replica,
        "from_state": frm,
        "to_state": to,
        "leader_after": leader,
        "leader_epoch_after": epoch,
        "isr_after": None if isr is None else S.dumps(isr),
        "timestamp_ms": TAKEN_MS - HOUR_MS,
    }
