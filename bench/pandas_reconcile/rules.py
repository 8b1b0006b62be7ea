"""The partition, broker-view and controller-view rules of ``kafka_controller.reconcile`` (``rules_zk``,
``rules_views``) in pandas: a second implementation kept only as the benchmark's baseline and the
tests' cross-check (the Spark rules are the definition; their docstrings say what each finding
means)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from kafka_controller.reconcile.rules_catalog import CRITICAL, ERROR, INFO, WARNING

from .arrow import NULL, Params, findings_frame, fmt, ints, lists_equal, take_lists


@dataclass
class Context:
    d: dict[str, Any]
    params: Params
    pz: pd.DataFrame
    z: pa.Table
    cache: dict[str, Any] = field(default_factory=dict)

    @property
    def meta(self) -> dict[str, Any]:
        meta: dict[str, Any] = self.d["meta"]
        return meta

    def live_ids(self) -> np.ndarray:
        ids: np.ndarray = self.d["brokers"].column("broker_id").to_numpy()
        return ids

    def live_partitions(self) -> pd.DataFrame:
        return self.pz[~self.pz.queued & self.pz.leader_live]

    def lists(self, df: pd.DataFrame, column: str) -> list[str]:
        return [fmt(v) for v in take_lists(self.z, column, df["row"].to_numpy())]


def offline_partition(c: Context) -> pd.DataFrame:
    df = c.pz[~c.pz.queued & (~c.pz.has_state | (c.pz.leader == -1))]
    actual = ["leader=-1" if s else "no state znode" for s in df.has_state]
    return findings_frame(df, "offline_partition", CRITICAL, ["a live leader"] * len(df), actual)


def leader_on_dead_broker(c: Context) -> pd.DataFrame:
    df = c.pz[~c.pz.queued & c.pz.has_state & (c.pz.leader >= 0) & ~c.pz.leader_live]
    return findings_frame(
        df,
        "leader_on_dead_broker",
        CRITICAL,
        ["leader registered in /brokers/ids"] * len(df),
        [f"leader={fmt(v)} not registered" for v in df.leader],
        df.leader.tolist(),
    )


def leader_not_in_isr(c: Context) -> pd.DataFrame:
    lp = c.live_partitions()
    df = lp[~lp.leader_in_isr]
    return findings_frame(
        df,
        "leader_not_in_isr",
        ERROR,
        [f"isr contains {fmt(v)}" for v in df.leader],
        ["isr=" + s for s in c.lists(df, "isr")],
        df.leader.tolist(),
    )


def isr_not_subset_of_replicas(c: Context) -> pd.DataFrame:
    df = c.pz[~c.pz.queued & c.pz.has_state & c.pz.isr_outside]
    return findings_frame(
        df,
        "isr_not_subset_of_replicas",
        ERROR,
        ["isr within replicas=" + s for s in c.lists(df, "replicas")],
        ["isr=" + s for s in c.lists(df, "isr")],
    )


def under_replicated(c: Context) -> pd.DataFrame:
    lp = c.live_partitions()
    df = lp[lp.isr_size < lp.rf]
    return findings_frame(
        df,
        "under_replicated",
        WARNING,
        [f"isr size >= {v}" for v in df.rf],
        ["isr=" + s for s in c.lists(df, "isr")],
    )


def under_min_isr(c: Context) -> pd.DataFrame:
    lp = c.live_partitions()
    df = lp[lp.isr_size < lp.min_isr]
    return findings_frame(
        df,
        "under_min_isr",
        ERROR,
        [f"isr size >= {v} (min.insync.replicas)" for v in df.min_isr],
        ["isr=" + s for s in c.lists(df, "isr")],
    )


def not_on_preferred_leader(c: Context) -> pd.DataFrame:
    lp = c.live_partitions()
    df = lp[lp.not_preferred]
    return findings_frame(
        df,
        "not_on_preferred_leader",
        INFO,
        [f"leader={fmt(v)}" for v in df.preferred],
        [f"leader={fmt(v)}" for v in df.leader],
        df.preferred.tolist(),
    )


def leader_skew(c: Context) -> pd.DataFrame:
    pct = c.params.leader_imbalance_percentage
    pz = c.pz[~c.pz.queued & (c.pz.preferred != NULL)]
    g = pd.DataFrame({"broker": pz.preferred, "elsewhere": pz.has_state & (pz.leader != pz.preferred)})
    agg = g.groupby("broker").agg(total=("elsewhere", "size"), elsewhere=("elsewhere", "sum")).reset_index()
    agg = agg[agg.broker.isin(c.live_ids()) & (agg.elsewhere * 100 > agg.total * pct)]
    return findings_frame(
        agg,
        "leader_skew",
        WARNING,
        [f"<= {pct}% of preferred partitions led elsewhere"] * len(agg),
        [f"{e} of {t}" for e, t in zip(agg.elsewhere, agg.total, strict=True)],
        agg.broker.tolist(),
        tp=False,
    )


def reassignment_stuck(c: Context) -> pd.DataFrame:
    now = c.params.now_ms if c.params.now_ms is not None else c.meta["taken_ms"]
    limit = c.params.stuck_reassignment_ms
    r = c.d["reassignments"].select(["topic", "partition", "started_ms"]).to_pandas()
    r = r.groupby(["topic", "partition"], as_index=False).agg(started_ms=("started_ms", "min"))
    audit = c.cache.get("audit")
    if audit is not None and len(r):
        keys = r[["topic", "partition"]].merge(c.pz[["topic", "partition", "row"]], on=["topic", "partition"])
        adding_lists = take_lists(c.z, "adding_replicas", keys.row.to_numpy())
        counts = [len(a) for a in adding_lists]
        adding = pd.DataFrame(
            {
                "topic": keys.topic.repeat(counts).to_numpy(),
                "partition": keys.partition.repeat(counts).to_numpy(),
                "replica": [x for a in adding_lists for x in a],
            }
        )
        new = audit[
            (audit.table == "replica")
            & (audit.to_state == "NewReplica")
            & audit.topic.isin(set(adding.topic))
        ]
        new = new[["topic", "partition", "replica", "timestamp_ms"]].astype({"topic": str})
        started = (
            new.merge(adding.astype({"topic": str}), on=["topic", "partition", "replica"])
            .groupby(["topic", "partition"], as_index=False)
            .agg(audit_started_ms=("timestamp_ms", "max"))
        )
        r = r.merge(started, on=["topic", "partition"], how="left")
        r["started_ms"] = r.started_ms.fillna(r.audit_started_ms)
    r = r.dropna(subset=["started_ms"])
    r["age_ms"] = now - r.started_ms.astype(np.int64)
    df = r[r.age_ms > limit]
    return findings_frame(
        df,
        "reassignment_stuck",
        WARNING,
        [f"complete within {limit} ms"] * len(df),
        [f"age_ms={int(v)}" for v in df.age_ms],
    )


def _bz(c: Context) -> pd.DataFrame:
    """Assigned replicas on reporting brokers, full-outer-merged with what those brokers report.

    Topics are categoricals over one shared set of categories, so the merge compares small codes.
    """
    if "bz" in c.cache:
        return c.cache["bz"]
    b = c.d["brokers"].to_pandas()
    reporting = b.broker_id[b.view_reported].to_numpy()
    st = c.pz[c.pz.has_state & ~c.pz.queued]
    reps = c.z.column("replicas").take(pa.array(st.row.to_numpy(), type=pa.int64()))
    lengths = pc.list_value_length(reps).to_numpy()
    br = c.d.pop("broker_replicas").to_pandas()
    br = br[np.isin(br.broker_id, reporting)].rename(
        columns={
            "leader": "b_leader",
            "leader_epoch": "b_epoch",
            "is_leader": "b_is_leader",
            "log_end_offset": "leo",
            "high_watermark": "hw",
        }
    )
    topics = pd.Index(c.pz.topic.unique()).union(pd.Index(br.topic.cat.categories.astype(str)))
    br["topic"] = br.topic.cat.set_categories(topics)
    br["hosted"] = True
    assigned = pd.DataFrame(
        {
            "topic": pd.Categorical(st.topic.repeat(lengths).to_numpy(), categories=topics),
            "partition": st.partition.repeat(lengths).to_numpy(),
            "broker_id": pc.list_flatten(reps).to_numpy(),
            "z_leader": st.leader.repeat(lengths).to_numpy(),
            "z_epoch": st.leader_epoch.repeat(lengths).to_numpy(),
        }
    )
    assigned = assigned[np.isin(assigned.broker_id, reporting)].assign(assigned=True)
    bz = assigned.merge(br, on=["topic", "partition", "broker_id"], how="outer")
    drop = bz.topic.isin(set(c.pz.topic[c.pz.queued])).to_numpy()
    stateless = c.pz[~c.pz.has_state]
    if len(stateless):
        keys = pd.MultiIndex.from_arrays([stateless.topic.to_numpy(), stateless.partition.to_numpy()])
        drop |= pd.MultiIndex.from_arrays([bz.topic.astype(str).to_numpy(), bz.partition.to_numpy()]).isin(
            keys
        )
    bz = bz[~drop]
    bz["assigned"] = bz.assigned.astype("boolean").fillna(False).astype(bool)
    bz["hosted"] = bz.hosted.astype("boolean").fillna(False).astype(bool)
    c.cache["bz"] = bz
    return bz


def broker_view_mismatch(c: Context) -> pd.DataFrame:
    bz = _bz(c)
    both = bz.assigned & bz.hosted
    z_is_leader = bz.broker_id == bz.z_leader
    differs = both & (
        (bz.b_leader != bz.z_leader) | (bz.b_epoch != bz.z_epoch) | (bz.b_is_leader != z_is_leader)
    )
    df = bz[differs | (bz.assigned != bz.hosted)]
    zl = df.broker_id == df.z_leader
    expected = [
        f"leader={fmt(_i(a))} leader_epoch={fmt(_i(b))} is_leader={fmt(bool(s))}" if asg else "not assigned"
        for asg, a, b, s in zip(df.assigned, df.z_leader, df.z_epoch, zl, strict=True)
    ]
    actual = [
        f"leader={fmt(_i(a))} leader_epoch={fmt(_i(b))} is_leader={fmt(bool(s))}" if h else "no replica"
        for h, a, b, s in zip(df.hosted, df.b_leader, df.b_epoch, df.b_is_leader, strict=True)
    ]
    return findings_frame(df, "broker_view_mismatch", ERROR, expected, actual, df.broker_id.tolist())


def _i(v: Any) -> Any:
    return None if v is None or (isinstance(v, float) and np.isnan(v)) or v is pd.NA else int(v)


def controller_view_mismatch(c: Context) -> pd.DataFrame:
    cp = c.d["controller_partitions"]
    ctl = pd.DataFrame(
        {
            "topic": cp.column("topic").to_pandas(),
            "partition": cp.column("partition").to_numpy(),
            "c_row": np.arange(cp.num_rows),
            "c_queued": cp.column("queued_for_deletion").to_numpy(zero_copy_only=False),
        }
    )
    m = c.pz[["topic", "partition", "row", "queued"]].merge(ctl, on=["topic", "partition"], how="outer")
    m = m[~m.queued.astype("boolean").fillna(False) & ~m.c_queued.astype("boolean").fillna(False)]
    both = m.dropna(subset=["row", "c_row"])
    zr, cr = pa.array(both.row.astype(np.int64)), pa.array(both.c_row.astype(np.int64))
    same = np.ones(len(both), dtype=bool)
    for zc, cc in (("leader", "leader"), ("leader_epoch", "leader_epoch")):
        same &= ints(c.z.column(zc).take(zr)) == ints(cp.column(cc).take(cr))
    for col in ("isr", "replicas", "adding_replicas", "removing_replicas"):
        same &= lists_equal(c.z.column(col).take(zr), cp.column(col).take(cr))
    bad = pd.concat([m[m.row.isna() | m.c_row.isna()], both[~same]])

    def side(table: pa.Table, rows: Any) -> list[str]:
        out = []
        for r in rows:
            if pd.isna(r):
                out.append("absent")
                continue
            v = table.slice(int(r), 1).to_pylist()[0]
            out.append(
                f"leader={fmt(v['leader'])} leader_epoch={fmt(v['leader_epoch'])} "
                f"isr={fmt(v['isr'])} replicas={fmt(v['replicas'])}"
            )
        return out

    return findings_frame(bad, "controller_view_mismatch", ERROR, side(c.z, bad.row), side(cp, bad.c_row))


def hw_regression(c: Context) -> pd.DataFrame:
    bz = _bz(c)
    both = bz[bz.assigned & bz.hosted].copy()
    both["leader_leo"] = both.leo.where(both.broker_id == both.z_leader)
    both = both.sort_values(["topic", "partition", "hw", "broker_id"])
    g = (
        both.groupby(["topic", "partition"], sort=False, observed=True)
        .agg(
            leader_leo=("leader_leo", "max"),
            z_leader=("z_leader", "first"),
            max_hw=("hw", "max"),
            hw_broker=("broker_id", "last"),
        )
        .reset_index()
    )
    df = g[g.leader_leo.notna() & (g.max_hw > g.leader_leo)]
    return findings_frame(
        df,
        "hw_regression",
        CRITICAL,
        [
            f"leader log_end_offset >= {int(h)} (high watermark on broker {int(b)})"
            for h, b in zip(df.max_hw, df.hw_broker, strict=True)
        ],
        [
            f"leader {fmt(_i(z))} log_end_offset={int(v)}"
            for z, v in zip(df.z_leader, df.leader_leo, strict=True)
        ],
        df.z_leader.tolist(),
    )


RuleFn = Callable[[Context], pd.DataFrame]

__all__ = [
    "Context",
    "RuleFn",
    "broker_view_mismatch",
    "controller_view_mismatch",
    "hw_regression",
    "isr_not_subset_of_replicas",
    "leader_not_in_isr",
    "leader_on_dead_broker",
    "leader_skew",
    "not_on_preferred_leader",
    "offline_partition",
    "reassignment_stuck",
    "under_min_isr",
    "under_replicated",
]
