"""The audit-log rules for the pandas baseline: the same ordering and semantics as Spark's
``kafka_controller.reconcile.frames`` audit chain."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from kafka_controller.reconcile.rules_catalog import ERROR, WARNING

from .arrow import NULL, findings_frame, fmt, ints, valid_pairs
from .rules import Context

_INTS = (
    "id",
    "controller_epoch",
    "sequence",
    "leader_after",
    "leader_epoch_before",
    "leader_epoch_after",
    "timestamp_ms",
)
_CATEGORIES = ("topic", "from_state", "to_state")


def audit_frame(d: dict[str, Any]) -> pd.DataFrame:
    """Both transition tables, ``ok`` rows only, integers with ``NULL`` for SQL NULL, strings as
    categoricals sharing one set of categories. The Arrow tables are dropped once converted."""
    parts = []
    for code, table in enumerate(("partition_transitions", "replica_transitions")):
        t = d.pop(table)
        t = t.filter(pc.equal(pc.cast(t.column("outcome"), pa.string()), "ok"))
        n = t.num_rows
        cols: dict[str, Any] = {
            "table": pd.Categorical.from_codes(np.full(n, code, dtype=np.int8), ["partition", "replica"])
        }
        for col in _INTS:
            cols[col] = ints(t.column(col))
        cols["partition"] = t.column("partition").to_numpy()
        cols["replica"] = ints(t.column("replica")) if code else np.full(n, NULL, dtype=np.int64)
        for col in _CATEGORIES:
            cols[col] = t.column(col).to_pandas()
        del t
        parts.append(pd.DataFrame(cols))
    for col in _CATEGORIES:
        union = pd.api.types.union_categoricals([p[col] for p in parts]).categories
        for p in parts:
            p[col] = p[col].cat.set_categories(union)
    return pd.concat(parts, ignore_index=True)


def _chain(c: Context) -> pd.DataFrame:
    """Leadership rows in replay order, reduced to regressions and each partition's last row."""
    if "chain" in c.cache:
        return c.cache["chain"]
    a = c.cache["audit"]
    is_new_all = ((a.table == "partition") & (a.to_state == "NewPartition")).to_numpy()
    idx = np.flatnonzero((a.leader_epoch_after.to_numpy() != NULL) | is_new_all)
    topic_code = a.topic.cat.codes.to_numpy()[idx]
    part = a.partition.to_numpy()[idx]
    order = np.lexsort(
        (
            a.id.to_numpy()[idx],
            a.table.cat.codes.to_numpy()[idx],
            a.timestamp_ms.to_numpy()[idx],
            a.sequence.to_numpy()[idx],
            a.controller_epoch.to_numpy()[idx],
            part,
            topic_code,
        )
    )
    idx, topic_code, part = idx[order], topic_code[order], part[order]
    is_new = is_new_all[idx]
    same_prev = np.zeros(len(idx), dtype=bool)
    same_prev[1:] = (topic_code[1:] == topic_code[:-1]) & (part[1:] == part[:-1])
    after, before = a.leader_epoch_after.to_numpy()[idx], a.leader_epoch_before.to_numpy()[idx]
    key = np.where(is_new, -1, after)
    prev = np.full(len(idx), NULL, dtype=np.int64)
    prev[1:] = np.where(same_prev[1:], key[:-1], NULL)
    is_last = np.append(~same_prev[1:], True)
    regression = (~is_new & (prev != NULL) & (key < prev)) | (
        (after != NULL) & (before != NULL) & (after < before)
    )
    keep = regression | is_last
    chain = a.iloc[idx[keep]].reset_index(drop=True)
    chain["prev_epoch"], chain["is_last"], chain["regression"] = prev[keep], is_last[keep], regression[keep]
    c.cache["chain"] = chain
    return chain


def audit_state_mismatch(c: Context) -> pd.DataFrame:
    chain = _chain(c)
    last = chain[chain.is_last & (chain.leader_after != NULL)]
    last = last.assign(topic=last.topic.astype(str))
    m = last.merge(
        c.pz[~c.pz.queued][["topic", "partition", "leader", "leader_epoch"]], on=["topic", "partition"]
    )
    zk_leader = m.leader.where(m.leader != NULL, -1)
    higher = (m.leader_epoch != NULL) & (m.leader_epoch_after > m.leader_epoch)
    df = m[(m.leader_after != zk_leader) | higher]
    return findings_frame(
        df,
        "audit_state_mismatch",
        WARNING,
        [f"leader={fmt(a)} leader_epoch={fmt(b)}" for a, b in zip(df.leader, df.leader_epoch, strict=True)],
        [
            f"leader={fmt(a)} leader_epoch={fmt(b)}"
            for a, b in zip(df.leader_after, df.leader_epoch_after, strict=True)
        ],
    )


def illegal_transition(c: Context) -> pd.DataFrame:
    a = c.cache["audit"]
    valid = valid_pairs()
    states_from, states_to = a.from_state.cat.categories, a.to_state.cat.categories
    nf, nt = len(states_from) + 1, len(states_to) + 1
    combo = (
        a.table.cat.codes.to_numpy().astype(np.int64) * nf + a.from_state.cat.codes.to_numpy() + 1
    ) * nt + (a.to_state.cat.codes.to_numpy() + 1)
    bad = [
        v
        for v in pd.unique(combo)
        if (
            ("partition", "replica")[v // nt // nf],
            None if v // nt % nf == 0 else states_from[v // nt % nf - 1],
            None if v % nt == 0 else states_to[v % nt - 1],
        )
        not in valid
    ]
    df = a[np.isin(combo, bad)]
    return findings_frame(
        df,
        "illegal_transition",
        ERROR,
        [f"a valid previous state of {s}" for s in df.to_state],
        [f"{f} -> {s}" for f, s in zip(df.from_state, df.to_state, strict=True)],
        [None if r == NULL else r for r in df.replica],
    )


def leader_epoch_regression(c: Context) -> pd.DataFrame:
    chain = _chain(c)
    df = chain[chain.regression]
    floor = np.maximum(
        np.where(df.prev_epoch == NULL, -1, df.prev_epoch),
        np.where(df.leader_epoch_before == NULL, -1, df.leader_epoch_before),
    )
    return findings_frame(
        df,
        "leader_epoch_regression",
        ERROR,
        [f"leader_epoch >= {int(v)}" for v in floor],
        [f"leader_epoch={fmt(v)}" for v in df.leader_epoch_after],
    )


__all__ = ["audit_frame", "audit_state_mismatch", "illegal_transition", "leader_epoch_regression"]
