"""The reconciliation rules again, in pandas and numpy on one process: the benchmark's baseline and the
tests' cross-check of the Spark job (``rules.py``, whose docstrings define each rule).

Same inputs, same semantics (null handling included), same ``FINDING_COLUMNS`` and the same
``expected``/``actual`` evidence text, so the two engines' findings compare exactly. List columns
stay in Arrow: membership tests and list equality work on flattened values and parent indices,
never on per-row Python lists; only the evidence of the findings themselves is formatted in Python.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from kafka_controller.domain.errors import InvalidArgumentError
from kafka_controller.domain.states import PartitionState, ReplicaState
from kafka_controller.reconcile import snapshot as S

FINDING_COLUMNS = ("kind", "severity", "topic", "partition", "broker", "expected", "actual")
NULL = -(2**31)  # stands for SQL NULL in integer columns
MIN_ISR, UNCLEAN = "min.insync.replicas", "unclean.leader.election.enable"


@dataclass(frozen=True, slots=True)
class Params:
    now_ms: int | None = None
    stuck_reassignment_ms: int = 30 * 60_000
    leader_imbalance_percentage: int = 10


# -- Arrow list helpers ---------------------------------------------------------------------------
def _ints(arr: pa.Array | pa.ChunkedArray) -> np.ndarray:
    out: np.ndarray = pc.fill_null(arr, NULL).to_numpy().astype(np.int64)
    return out


def _lens(lists: pa.ChunkedArray) -> np.ndarray:
    out: np.ndarray = pc.fill_null(pc.list_value_length(lists), 0).to_numpy().astype(np.int64)
    return out


def _flat(lists: pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    return (
        pc.list_flatten(lists).to_numpy().astype(np.int64),
        pc.list_parent_indices(lists).to_numpy().astype(np.int64),
    )


def _contains(lists: pa.ChunkedArray, values: np.ndarray) -> np.ndarray:
    flat, parent = _flat(lists)
    out = np.zeros(len(values), dtype=bool)
    out[parent[flat == values[parent]]] = True
    return out


def _lists_equal(a: pa.ChunkedArray, b: pa.ChunkedArray) -> np.ndarray:
    """Null-safe per-row equality of two list columns (both null = equal)."""
    an, bn = pc.is_null(a).to_numpy(zero_copy_only=False), pc.is_null(b).to_numpy(zero_copy_only=False)
    la, lb = _lens(a), _lens(b)
    eq = (an == bn) & (la == lb)
    fa, pa_ = _flat(a)
    fb, _ = _flat(b)
    same_len = eq & ~an
    keep_a = same_len[pa_]
    fb_parent = pc.list_parent_indices(b).to_numpy().astype(np.int64)
    keep_b = same_len[fb_parent]
    diff = fa[keep_a] != fb[keep_b]
    eq[pa_[keep_a][diff]] = False
    result: np.ndarray = eq
    return result


def _fmt(v: Any) -> str:
    if v is None or (isinstance(v, (int, np.integer)) and v == NULL):
        return "null"
    if isinstance(v, (bool, np.bool_)):
        return "true" if v else "false"
    if isinstance(v, list):
        return json.dumps(v, separators=(",", ":"))
    return str(int(v)) if isinstance(v, (int, np.integer, float)) else str(v)


def _lists(table: pa.Table, column: str, rows: np.ndarray) -> list[Any]:
    values: list[Any] = table.column(column).take(pa.array(rows, type=pa.int64())).to_pylist()
    return values


# -- loading ---------------------------------------------------------------------------------------
#: Only the columns the rules read (``None`` = all); topics of the big tables stay dictionary-encoded.
_COLUMNS: dict[str, tuple[str, ...] | None] = {
    "meta": None,
    "brokers": None,
    "zk_partitions": (
        "topic",
        "partition",
        "replicas",
        "adding_replicas",
        "removing_replicas",
        "leader",
        "leader_epoch",
        "isr",
        "queued_for_deletion",
    ),
    "broker_replicas": (
        "topic",
        "partition",
        "broker_id",
        "leader",
        "leader_epoch",
        "is_leader",
        "log_end_offset",
        "high_watermark",
    ),
    "controller_partitions": (
        "topic",
        "partition",
        "leader",
        "leader_epoch",
        "isr",
        "replicas",
        "adding_replicas",
        "removing_replicas",
        "queued_for_deletion",
    ),
    "reassignments": None,
    "topic_configs": None,
    "partition_transitions": (
        "id",
        "controller_epoch",
        "sequence",
        "topic",
        "partition",
        "from_state",
        "to_state",
        "leader_after",
        "leader_epoch_before",
        "leader_epoch_after",
        "outcome",
        "timestamp_ms",
    ),
    "replica_transitions": (
        "id",
        "controller_epoch",
        "sequence",
        "topic",
        "partition",
        "replica",
        "from_state",
        "to_state",
        "leader_after",
        "leader_epoch_before",
        "leader_epoch_after",
        "outcome",
        "timestamp_ms",
    ),
}
_DICTIONARY = {
    "broker_replicas": ["topic"],
    "partition_transitions": ["topic", "from_state", "to_state", "outcome"],
    "replica_transitions": ["topic", "from_state", "to_state", "outcome"],
}


def _read(root: str | Path, table: str) -> pa.Table:
    import pyarrow.parquet as pq

    if not (Path(root) / table).is_dir():
        raise InvalidArgumentError(f"{root} has no {table!r} table")
    columns = _COLUMNS[table]
    return pq.read_table(
        Path(root) / table,
        columns=None if columns is None else list(columns),
        read_dictionary=_DICTIONARY.get(table),
    )


def load(snapshot: str | Path, audit: str | Path | None = None) -> dict[str, Any]:
    """The tables the rules read (not ``controller_replicas``), as Arrow, pruned to the columns used."""
    S.read_meta(snapshot)
    t = {name: _read(snapshot, name) for name in S.TABLES if name != "controller_replicas"}
    meta = t.pop("meta").to_pylist()[0]
    if audit is not None:
        for name in S.AUDIT_TABLES:
            t[name] = _read(audit, name)
    return {"meta": meta, **t}


def _zk(d: dict[str, Any]) -> tuple[pd.DataFrame, pa.Table]:
    meta, z = d["meta"], d["zk_partitions"]
    live = set(d["brokers"].column("broker_id").to_pylist())
    cfg = d["topic_configs"].to_pandas()
    min_isr = {
        r.topic: int(r.value)
        for r in cfg[cfg.key == MIN_ISR].itertuples()
        if r.value.strip().lstrip("-").isdigit()
    }
    unclean = {r.topic: r.value.strip().lower() == "true" for r in cfg[cfg.key == UNCLEAN].itertuples()}
    leader = _ints(z.column("leader"))
    has_state = leader != NULL
    first = pc.list_element(
        pc.if_else(
            pc.greater(pc.list_value_length(z.column("replicas")), 0),
            z.column("replicas"),
            pa.scalar([NULL], pa.list_(pa.int32())),
        ),
        0,
    )
    preferred = _ints(first)
    adding, isr = z.column("adding_replicas"), z.column("isr")
    reassigned = (_lens(adding) > 0) | (_lens(z.column("removing_replicas")) > 0)
    pending = reassigned & _contains(adding, preferred) & ~_contains(isr, preferred)
    topics = z.column("topic").to_pandas()
    pz = pd.DataFrame(
        {
            "topic": topics,
            "partition": z.column("partition").to_numpy(),
            "leader": leader,
            "leader_epoch": _ints(z.column("leader_epoch")),
            "has_state": has_state,
            "leader_live": np.isin(leader, list(live)),
            "preferred": preferred,
            "rf": _lens(z.column("replicas")) - _lens(adding),
            "isr_size": _lens(isr),
            "min_isr": topics.map(min_isr)
            .fillna(meta["default_min_insync_replicas"])
            .astype(np.int64)
            .to_numpy(),
            "unclean_enabled": np.array(
                [unclean.get(t, meta["default_unclean_leader_election_enable"]) for t in topics.unique()]
            )
            .take(pd.factorize(topics)[0])
            .astype(bool)
            if len(topics)
            else np.zeros(0, dtype=bool),
            "queued": z.column("queued_for_deletion").to_numpy(zero_copy_only=False),
            "not_preferred": has_state & (leader != preferred) & ~pending,
            "leader_in_isr": _contains(isr, leader),
            "row": np.arange(z.num_rows),
        }
    )
    flat, parent = _flat(isr)
    rflat, rparent = _flat(z.column("replicas"))
    k = int(max(flat.max(initial=0), rflat.max(initial=0))) + 1
    outside = ~np.isin(parent * k + flat, rparent * k + rflat)
    pz["isr_outside"] = np.bincount(parent[outside], minlength=len(pz)) > 0
    return pz, z


def _out(
    df: pd.DataFrame,
    kind: str,
    severity: str,
    expected: list[str],
    actual: list[str],
    broker: Any = None,
    tp: bool = True,
) -> pd.DataFrame:
    n = len(df)
    return pd.DataFrame(
        {
            "kind": [kind] * n,
            "severity": [severity] * n,
            "topic": df["topic"].tolist() if tp else [None] * n,
            "partition": df["partition"].tolist() if tp else [None] * n,
            "broker": [
                None if b is None or b == NULL else int(b)
                for b in (broker if broker is not None else [None] * n)
            ],
            "expected": expected,
            "actual": actual,
        }
    )


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
    from kafka_controller.reconcile import pandas_rules as R

    ctx = R.Context(d, params, *_zk(d))
    frames = [rule(ctx) for rule in R.rules_for(ctx)]
    findings = (
        pd.concat([f for f in frames if len(f)], ignore_index=True)
        if any(len(f) for f in frames)
        else pd.DataFrame({c: [] for c in FINDING_COLUMNS})
    )
    timings["rules"] = time.perf_counter() - t1
    timings["total"] = time.perf_counter() - t0
    return findings, timings


def valid_pairs() -> set[tuple[str, str, str]]:
    pairs = {
        ("partition", p.kafka_name, s.kafka_name) for s in PartitionState for p in s.valid_previous_states
    }
    pairs |= {("replica", p.kafka_name, s.kafka_name) for s in ReplicaState for p in s.valid_previous_states}
    return pairs
