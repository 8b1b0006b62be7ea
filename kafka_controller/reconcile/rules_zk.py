"""The rules over ZooKeeper alone: partition health, preferred leadership, leader skew, stuck
reassignments. Partition rules skip topics queued for deletion. Rules about a live partition
(under-replication, min ISR, preferred leader, leader not in ISR) apply only when its leader is a
registered broker, as Kafka's own metrics are reported by leaders: a partition without one is
reported once, as ``offline_partition`` (no leader recorded) or ``leader_on_dead_broker`` (leader
not registered)."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from kafka_controller.reconcile.frames import NEW_REPLICA, Prepared
from kafka_controller.reconcile.rule_evidence import FINDINGS_DDL, as_text, finding, json_list
from kafka_controller.reconcile.rules_catalog import CRITICAL, ERROR, INFO, WARNING

c = F.col


def _live_partitions(p: Prepared) -> DataFrame:
    return p.pz.filter(~c("queued") & c("leader_live"))


def offline_partition(p: Prepared) -> DataFrame:
    df = p.pz.filter(~c("queued") & (~c("has_state") | (c("leader") == -1)))
    actual = F.when(c("has_state"), F.lit("leader=-1")).otherwise(F.lit("no state znode"))
    return finding(
        df, "offline_partition", CRITICAL, F.lit("a live leader"), actual, "replicas", "isr", "state_error"
    )


def leader_on_dead_broker(p: Prepared) -> DataFrame:
    df = p.pz.filter(~c("queued") & (c("leader") >= 0) & ~c("leader_live"))
    return finding(
        df,
        "leader_on_dead_broker",
        CRITICAL,
        F.lit("leader registered in /brokers/ids"),
        F.concat(F.lit("leader="), as_text("leader"), F.lit(" not registered")),
        "replicas",
        "isr",
        "leader_epoch",
        broker=c("leader"),
    )


def leader_not_in_isr(p: Prepared) -> DataFrame:
    df = _live_partitions(p).filter(~F.array_contains("isr", c("leader")))
    return finding(
        df,
        "leader_not_in_isr",
        ERROR,
        F.concat(F.lit("isr contains "), as_text("leader")),
        F.concat(F.lit("isr="), json_list("isr")),
        "leader_epoch",
        "replicas",
        broker=c("leader"),
    )


def isr_not_subset_of_replicas(p: Prepared) -> DataFrame:
    df = p.pz.filter(~c("queued") & c("has_state") & (F.size(F.array_except("isr", "replicas")) > 0))
    return finding(
        df,
        "isr_not_subset_of_replicas",
        ERROR,
        F.concat(F.lit("isr within replicas="), json_list("replicas")),
        F.concat(F.lit("isr="), json_list("isr")),
        F.array_except("isr", "replicas").alias("extra"),
    )


def under_replicated(p: Prepared) -> DataFrame:
    df = _live_partitions(p).filter(F.size("isr") < c("rf"))
    return finding(
        df,
        "under_replicated",
        WARNING,
        F.concat(F.lit("isr size >= "), as_text("rf")),
        F.concat(F.lit("isr="), json_list("isr")),
        "replicas",
        "leader",
    )


def under_min_isr(p: Prepared) -> DataFrame:
    df = _live_partitions(p).filter(F.size("isr") < c("min_isr"))
    return finding(
        df,
        "under_min_isr",
        ERROR,
        F.concat(F.lit("isr size >= "), as_text("min_isr"), F.lit(" (min.insync.replicas)")),
        F.concat(F.lit("isr="), json_list("isr")),
        "replicas",
        "leader",
    )


def not_on_preferred_leader(p: Prepared) -> DataFrame:
    df = _live_partitions(p).filter(c("not_preferred"))
    return finding(
        df,
        "not_on_preferred_leader",
        INFO,
        F.concat(F.lit("leader="), as_text("preferred")),
        F.concat(F.lit("leader="), as_text("leader")),
        "replicas",
        "isr",
        broker=c("preferred"),
    )


def leader_skew(p: Prepared) -> DataFrame:
    """Kafka's auto-rebalance check: per preferred broker, the share of its partitions led elsewhere."""
    pct = p.params.leader_imbalance_percentage
    per_broker = (
        p.pz.filter(~c("queued") & c("preferred").isNotNull())
        .groupBy(c("preferred").alias("broker_id"))
        .agg(
            F.count(F.lit(1)).alias("preferred_partitions"),
            F.sum(F.when(c("has_state") & (c("leader") != c("preferred")), 1).otherwise(0)).alias(
                "led_elsewhere"
            ),
        )
        .join(F.broadcast(p.live.select("broker_id")), "broker_id", "left_semi")
        .filter(c("led_elsewhere") * 100 > c("preferred_partitions") * pct)
    )
    return finding(
        per_broker,
        "leader_skew",
        WARNING,
        F.lit(f"<= {pct}% of preferred partitions led elsewhere"),
        F.concat(as_text("led_elsewhere"), F.lit(" of "), as_text("preferred_partitions")),
        "preferred_partitions",
        "led_elsewhere",
        broker=c("broker_id"),
        tp=False,
    )


def reassignment_stuck(p: Prepared) -> DataFrame:
    """Age from the snapshot's start time, else from the audit: when the adding replicas became New.

    Reassignments in progress are few, so they are collected first: a fleet with none costs no
    scan of the audit history.
    """
    now, limit = p.params.now_ms, p.params.stuck_reassignment_ms
    rows = (
        p.reassignments.groupBy("topic", "partition")
        .agg(F.min("started_ms").alias("started_ms"), F.first("target_replicas").alias("target_replicas"))
        .collect()
    )
    if not rows:
        return p.spark.createDataFrame([], FINDINGS_DDL)
    r = p.spark.createDataFrame(
        rows, "topic STRING, partition INT, started_ms BIGINT, target_replicas ARRAY<INT>"
    )
    unknown = r.filter(c("started_ms").isNull()).select("topic", "partition")
    if p.audit is not None and any(row["started_ms"] is None for row in rows):
        adding = p.pz.join(F.broadcast(unknown), ["topic", "partition"], "left_semi").select(
            "topic", "partition", F.explode("adding_replicas").alias("replica")
        )
        started = (
            p.audit.filter((c("table") == "replica") & (c("to_state") == NEW_REPLICA))
            .join(F.broadcast(adding), ["topic", "partition", "replica"], "left_semi")
            .groupBy("topic", "partition")
            .agg(F.max("timestamp_ms").alias("audit_started_ms"))
        )
        r = r.join(started, ["topic", "partition"], "left").select(
            "topic",
            "partition",
            "target_replicas",
            F.coalesce(c("started_ms"), c("audit_started_ms")).alias("started_ms"),
        )
    df = r.withColumn("age_ms", F.lit(now) - c("started_ms")).filter(c("age_ms") > limit)
    return finding(
        df,
        "reassignment_stuck",
        WARNING,
        F.lit(f"complete within {limit} ms"),
        F.concat(F.lit("age_ms="), as_text("age_ms")),
        "target_replicas",
        "started_ms",
    )
