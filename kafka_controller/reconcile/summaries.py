"""Per-partition and per-broker summaries of a run, and the partitions the remediation plan lists.

The summaries are the run's Parquet outputs next to the findings: one row per ZooKeeper partition
(its flags and how many findings it has) and one per broker (registered or merely named by an
assignment), so a dashboard can answer "which brokers are hot" without re-running the rules.

Remediation mirrors Kafka's own elections (docs/controller-behaviour.md §2.2), so the plan only
proposes what the controller would actually do: a preferred election where the preferred replica
is live and in the ISR; an online transition (clean election) where a live ISR replica exists —
or, for a partition with no state znode, any live replica (initialisation); otherwise an unclean
candidate, the first live replica in assignment order.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from kafka_controller.reconcile.frames import Prepared
from kafka_controller.reconcile.rules_catalog import SEVERITY_RANK

c = F.col


def _max_severity(rank: str) -> Column:
    expr = F.lit(None).cast("string")
    for name, value in SEVERITY_RANK.items():
        expr = F.when(c(rank) == value, F.lit(name)).otherwise(expr)
    return expr


def _severity_rank() -> Column:
    expr = F.lit(0)
    for name, value in SEVERITY_RANK.items():
        expr = F.when(c("severity") == name, F.lit(value)).otherwise(expr)
    return expr


def _offline() -> Column:
    return ~c("queued") & (~c("has_state") | (c("leader") == -1) | ((c("leader") >= 0) & ~c("leader_live")))


def partition_summary(p: Prepared, findings: DataFrame) -> DataFrame:
    per = (
        findings.filter(c("partition").isNotNull())
        .groupBy("topic", "partition")
        .agg(F.count(F.lit(1)).alias("findings"), F.max(_severity_rank()).alias("rank"))
    )
    live = ~c("queued") & c("leader_live")
    return (
        p.pz.select(
            "topic",
            "partition",
            "leader",
            "leader_epoch",
            "leader_live",
            c("preferred").alias("preferred_leader"),
            F.size("isr").alias("isr_size"),
            c("rf").alias("replication_factor"),
            "min_isr",
            _offline().alias("offline"),
            (live & (F.size("isr") < c("rf"))).alias("under_replicated"),
            (live & (F.size("isr") < c("min_isr"))).alias("under_min_isr"),
            (live & ~c("not_preferred")).alias("on_preferred_leader"),
            "being_reassigned",
            c("queued").alias("queued_for_deletion"),
        )
        .join(per, ["topic", "partition"], "left")
        .select("*", _max_severity("rank").alias("max_severity"))
        .drop("rank")
        .fillna(0, ["findings"])
    )


def broker_summary(p: Prepared, findings: DataFrame) -> DataFrame:
    """One aggregation over every (partition, broker, role) triple, then small per-broker joins."""
    pz = p.pz.filter(~c("queued"))

    def role(
        broker: Column, replica: int, leader: int, preferred: int, elsewhere: Column | int = 0
    ) -> Column:
        return F.struct(
            broker.cast("int").alias("broker_id"),
            F.lit(replica).alias("replica"),
            F.lit(leader).alias("leader"),
            F.lit(preferred).alias("preferred"),
            (elsewhere if isinstance(elsewhere, Column) else F.lit(elsewhere)).alias("elsewhere"),
        )

    elsewhere = F.when(c("has_state") & (c("leader") != c("preferred")), 1).otherwise(0)
    roles = F.concat(
        F.transform("replicas", lambda b: role(b, 1, 0, 0)),
        F.filter(
            F.array(role(c("leader"), 0, 1, 0), role(c("preferred"), 0, 0, 1, elsewhere)),
            lambda r: r["broker_id"].isNotNull() & (r["broker_id"] >= 0),
        ),
    )
    counts = (
        pz.select(F.explode(roles).alias("r"))
        .groupBy(c("r.broker_id").alias("broker_id"))
        .agg(
            F.sum("r.replica").alias("replicas"),
            F.sum("r.leader").alias("leaders"),
            F.sum("r.preferred").alias("preferred_partitions"),
            F.sum("r.elsewhere").alias("led_elsewhere"),
        )
    )
    per_finding = (
        findings.filter(c("broker").isNotNull())
        .groupBy(c("broker").alias("broker_id"))
        .agg(F.count(F.lit(1)).alias("findings"))
    )
    registered = p.live.select("broker_id", F.lit(True).alias("registered"), "view_reported")
    out = registered.join(counts, "broker_id", "full_outer").join(per_finding, "broker_id", "full_outer")
    if p.bz is not None:
        views = p.bz.filter(c("hosted")).groupBy("broker_id").agg(F.count(F.lit(1)).alias("view_replicas"))
        out = out.join(views, "broker_id", "left")
    else:
        out = out.withColumn("view_replicas", F.lit(None).cast("bigint"))
    counts_cols = ["replicas", "leaders", "preferred_partitions", "led_elsewhere", "findings"]
    return (
        out.fillna(False, ["registered", "view_reported"])
        .fillna(0, counts_cols)
        .withColumn(
            "imbalance_pct",
            F.when(c("preferred_partitions") > 0, c("led_elsewhere") * 100.0 / c("preferred_partitions")),
        )
        .select(
            "broker_id",
            "registered",
            "view_reported",
            *counts_cols[:4],
            "imbalance_pct",
            "view_replicas",
            "findings",
        )
    )


def preferred_elections(p: Prepared) -> DataFrame:
    live = F.broadcast(p.live.select(c("broker_id").alias("preferred")))
    return (
        p.pz.filter(
            ~c("queued") & c("leader_live") & c("not_preferred") & F.array_contains("isr", c("preferred"))
        )
        .join(live, "preferred", "left_semi")
        .select("topic", "partition", "leader", "preferred")
    )


def offline_recovery(p: Prepared) -> DataFrame:
    """Offline partitions with the clean leader a controller would elect, or else an unclean candidate."""
    offline = p.pz.filter(_offline())
    live = F.broadcast(p.live.select("broker_id"))
    positions = (
        offline.select(
            "topic", "partition", "isr", "has_state", F.posexplode("replicas").alias("pos", "broker_id")
        )
        .join(live, "broker_id", "left_semi")
        .groupBy("topic", "partition")
        .agg(
            F.min(
                F.when(
                    ~c("has_state") | F.coalesce(F.array_contains("isr", c("broker_id")), F.lit(False)),
                    c("pos"),
                )
            ).alias("clean_pos"),
            F.min("pos").alias("any_pos"),
            F.sort_array(F.collect_list(F.struct("pos", "broker_id"))).alias("live"),
        )
    )
    return offline.join(positions, ["topic", "partition"], "left").select(
        "topic",
        "partition",
        "leader",
        "isr",
        "unclean_enabled",
        F.get(c("replicas"), c("clean_pos")).alias("clean_leader"),
        F.get(c("replicas"), c("any_pos")).alias("unclean_candidate"),
        F.coalesce(F.transform("live", lambda s: s["broker_id"]), F.array().cast("array<int>")).alias(
            "live_replicas"
        ),
    )
