"""Arrow and numpy helpers shared by the pandas baseline's rules: list columns stay in Arrow and are
tested on flattened values and parent indices, never as per-row Python lists; only the evidence of
the findings themselves is formatted in Python, as the Spark rules format it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from kafka_controller.domain.states import PartitionState, ReplicaState

FINDING_COLUMNS = ("kind", "severity", "topic", "partition", "broker", "expected", "actual")
NULL = -(2**31)  # stands for SQL NULL in integer columns


@dataclass(frozen=True, slots=True)
class Params:
    now_ms: int | None = None
    stuck_reassignment_ms: int = 30 * 60_000
    leader_imbalance_percentage: int = 10


# -- Arrow list helpers ------------------------------------------------------------------------
def ints(arr: pa.Array | pa.ChunkedArray) -> np.ndarray:
    out: np.ndarray = pc.fill_null(arr, NULL).to_numpy().astype(np.int64)
    return out


def list_lengths(lists: pa.ChunkedArray) -> np.ndarray:
    out: np.ndarray = pc.fill_null(pc.list_value_length(lists), 0).to_numpy().astype(np.int64)
    return out


def flatten(lists: pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    return (
        pc.list_flatten(lists).to_numpy().astype(np.int64),
        pc.list_parent_indices(lists).to_numpy().astype(np.int64),
    )


def contains(lists: pa.ChunkedArray, values: np.ndarray) -> np.ndarray:
    flat, parent = flatten(lists)
    out = np.zeros(len(values), dtype=bool)
    out[parent[flat == values[parent]]] = True
    return out


def lists_equal(a: pa.ChunkedArray, b: pa.ChunkedArray) -> np.ndarray:
    """Null-safe per-row equality of two list columns (both null = equal)."""
    an, bn = pc.is_null(a).to_numpy(zero_copy_only=False), pc.is_null(b).to_numpy(zero_copy_only=False)
    la, lb = list_lengths(a), list_lengths(b)
    eq = (an == bn) & (la == lb)
    fa, pa_ = flatten(a)
    fb, _ = flatten(b)
    same_len = eq & ~an
    keep_a = same_len[pa_]
    fb_parent = pc.list_parent_indices(b).to_numpy().astype(np.int64)
    keep_b = same_len[fb_parent]
    diff = fa[keep_a] != fb[keep_b]
    eq[pa_[keep_a][diff]] = False
    result: np.ndarray = eq
    return result


def fmt(v: Any) -> str:
    if v is None or (isinstance(v, (int, np.integer)) and v == NULL):
        return "null"
    if isinstance(v, (bool, np.bool_)):
        return "true" if v else "false"
    if isinstance(v, list):
        return json.dumps(v, separators=(",", ":"))
    return str(int(v)) if isinstance(v, (int, np.integer, float)) else str(v)


def take_lists(table: pa.Table, column: str, rows: np.ndarray) -> list[Any]:
    values: list[Any] = table.column(column).take(pa.array(rows, type=pa.int64())).to_pylist()
    return values


def findings_frame(
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


def valid_pairs() -> set[tuple[str, str, str]]:
    pairs = {
        ("partition", p.kafka_name, s.kafka_name) for s in PartitionState for p in s.valid_previous_states
    }
    pairs |= {("replica", p.kafka_name, s.kafka_name) for s in ReplicaState for p in s.valid_previous_states}
    return pairs
