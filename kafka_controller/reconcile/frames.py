"""Spark inputs of the reconciliation: the snapshot and audit history as DataFrames, and the few
derived frames every rule shares (built once, cached by the job).

* ``pz``: one row per ZooKeeper partition with what the rules ask of it: leader liveness, the
  preferred replica, the replication factor Kafka uses for under-replication (origin replicas while
  a reassignment adds replicas), ``min.insync.replicas`` and unclean election from topic configs.
* ``bz``: every (partition, broker) pair seen by ZooKeeper's assignment or by a broker's own view,
  full-outer-joined, so one shuffle serves both the broker-view and the high-watermark rules.
* ``cz``: the controller's partitions full-outer-joined with ZooKeeper's.
* ``audit``: both transition tables as one normalised frame (``table`` = partition | replica).
* ``audit_chain``: the audit rows that carry leadership, ordered per partition by
  ``(controller_epoch, sequence, timestamp_ms, table, id)`` — sequences are per controller and
  shared by both tables, so this replays each controller's decisions in order — reduced to the rows
  the rules need (epoch regressions and each partition's last row) with one window sort.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from kafka_controller.domain.config_keys import MIN_INSYNC_REPLICAS, UNCLEAN_LEADER_ELECTION_ENABLE
from kafka_controller.domain.states import PartitionState, ReplicaState

NEW_PARTITION = PartitionState.NEW_PARTITION.kafka_name
NEW_REPLICA = ReplicaState.NEW_REPLICA.kafka_name


@dataclass(frozen=True, slots=True)
class Params:
    now_ms: int
    stuck_reassignment_ms: int = 30 * 60_000
    leader_imbalance_percentage: int = 10


@dataclass(slots=True)
class Inputs:
    """The raw tables (audit frames normalised by ``normalise_audit``; None when not given)."""

    meta: dict[str, Any]
    brokers: DataFrame
    zk_partitions: DataFrame
    broker_replicas: DataFrame
    controller_partitions: DataFrame
    reassignments: DataFrame
    topic_configs: DataFrame
    audit: DataFrame | None


@dataclass(slots=True)
class Prepared:
    spark: SparkSession
    meta: dict[str, Any]
    params: Params
    live: DataFrame
    pz: DataFrame
    bz: DataFrame | None
    cz: DataFrame | None
    audit: DataFrame | None
    audit_chain: DataFrame | None
    reassignments: DataFrame

    def persist(self) -> list[DataFrame]:
        """Cache the shared frames; returns them so the caller can unpersist."""
        frames = [f for f in (self.pz, self.bz, self.cz, self.audit_chain) if f is not None]
        for f in frames:
            f.persist()
        return frames


def valid_transitions(spark: SparkSession) -> DataFrame:
    """(table, from_state, to_state) for every transition the state machines accept, from the domain."""
    rows = [
        ("partition", prev.kafka_name, state.kafka_name)
        for state in PartitionState
        for prev in state.valid_previous_states
    ]
    rows += [
        ("replica", prev.kafka_name, state.kafka_name)
        for state in ReplicaState
        for prev in state.valid_previous_states
    ]
    return spark.createDataFrame(rows, "table STRING, from_state STRING, to_state STRING")


def normalise_audit(
    partition_transitions: DataFrame, replica_transitions: DataFrame, cluster_id: str | None = None
) -> DataFrame:
    """Both transition tables in one shape, typed as the rules expect whatever the source's types.

    Rows a dry run planned (``dry_run`` true, from revision 0003 on) are not history: left out.
    With ``cluster_id`` (the snapshot's), so are other clusters' rows: one audit store may serve
    several clusters, and their controllers' rows must not be checked against this one's state.
    Rows without a cluster id (older than the column) are kept: with one cluster in the store
    they are its own, as before."""

    def shape(df: DataFrame, table: str, replica: Column) -> DataFrame:
        c = F.col
        if "dry_run" in df.columns:
            df = df.where(~c("dry_run").cast("boolean"))
        if cluster_id is not None and "cluster_id" in df.columns:
            df = df.where(c("cluster_id").isNull() | (c("cluster_id") == F.lit(cluster_id)))
        return df.select(
            F.lit(table).alias("table"),
            c("id").cast("bigint").alias("id"),
            c("controller_id").cast("int").alias("controller_id"),
            c("controller_epoch").cast("int").alias("controller_epoch"),
            c("sequence").cast("bigint").alias("sequence"),
            c("topic").cast("string").alias("topic"),
            c("partition").cast("int").alias("partition"),
            replica.cast("int").alias("replica"),
            c("from_state").cast("string").alias("from_state"),
            c("to_state").cast("string").alias("to_state"),
            c("leader_after").cast("int").alias("leader_after"),
            c("leader_epoch_before").cast("int").alias("leader_epoch_before"),
            c("leader_epoch_after").cast("int").alias("leader_epoch_after"),
            c("outcome").cast("string").alias("outcome"),
            c("timestamp_ms").cast("bigint").alias("timestamp_ms"),
        )

    return shape(partition_transitions, "partition", F.lit(None)).unionByName(
        shape(replica_transitions, "replica", F.col("replica"))
    )


def prepare(spark: SparkSession, inputs: Inputs, params: Params) -> Prepared:
    meta = inputs.meta
    live = inputs.brokers.select("broker_id", "view_reported")
    pz = _enrich_zk(
        inputs,
        live,
        int(meta["default_min_insync_replicas"]),
        bool(meta["default_unclean_leader_election_enable"]),
    )
    bz = _broker_join(pz, inputs.broker_replicas, live) if meta["broker_views"] else None
    cz = _controller_join(pz, inputs.controller_partitions) if meta["controller_view"] else None
    audit = inputs.audit.filter(F.col("outcome") == "ok") if inputs.audit is not None else None
    chain = _audit_chain(audit) if audit is not None else None
    return Prepared(spark, meta, params, live, pz, bz, cz, audit, chain, inputs.reassignments)


def _enrich_zk(inputs: Inputs, live: DataFrame, default_min_isr: int, default_unclean: bool) -> DataFrame:
    c = F.col
    configs = inputs.topic_configs
    min_isr = configs.filter(c("key") == MIN_INSYNC_REPLICAS).select(
        "topic", c("value").try_cast("int").alias("cfg_min_isr")
    )
    unclean = configs.filter(c("key") == UNCLEAN_LEADER_ELECTION_ENABLE).select(
        "topic", (F.lower(F.trim(c("value"))) == "true").alias("cfg_unclean")
    )
    leaders = live.select(c("broker_id").alias("leader"), F.lit(True).alias("leader_live"))
    being_reassigned = (F.size("adding_replicas") > 0) | (F.size("removing_replicas") > 0)
    preferred = F.get(c("replicas"), 0)
    # docs/controller-behaviour.md §5.5: a new preferred replica still being added counts as
    # preferred until it joins the ISR.
    pref_pending = (
        being_reassigned
        & F.array_contains("adding_replicas", preferred)
        & ~F.coalesce(F.array_contains("isr", preferred), F.lit(False))
    )
    return (
        inputs.zk_partitions.join(F.broadcast(min_isr), "topic", "left")
        .join(F.broadcast(unclean), "topic", "left")
        .join(F.broadcast(leaders), "leader", "left")
        .select(
            "topic",
            "partition",
            "replicas",
            "adding_replicas",
            "removing_replicas",
            "leader",
            "leader_epoch",
            "isr",
            "state_error",
            c("queued_for_deletion").alias("queued"),
            c("leader").isNotNull().alias("has_state"),
            F.coalesce(c("leader_live"), F.lit(False)).alias("leader_live"),
            preferred.alias("preferred"),
            (F.size("replicas") - F.size("adding_replicas")).alias("rf"),
            F.coalesce(c("cfg_min_isr"), F.lit(default_min_isr)).alias("min_isr"),
            F.coalesce(c("cfg_unclean"), F.lit(default_unclean)).alias("unclean_enabled"),
            being_reassigned.alias("being_reassigned"),
            ((c("leader") != preferred) & ~pref_pending).alias("not_preferred"),
        )
    )


def _broker_join(pz: DataFrame, broker_replicas: DataFrame, live: DataFrame) -> DataFrame:
    """Assigned replicas on reporting brokers vs the replicas those brokers report, full outer."""
    c = F.col
    reporting = F.broadcast(live.filter(c("view_reported")).select("broker_id"))
    assigned = (
        pz.filter(c("has_state") & ~c("queued"))
        .select(
            "topic",
            "partition",
            F.explode("replicas").alias("broker_id"),
            c("leader").alias("z_leader"),
            c("leader_epoch").alias("z_epoch"),
        )
        .join(reporting, "broker_id", "left_semi")
        .withColumn("assigned", F.lit(True))
    )
    reported = broker_replicas.join(reporting, "broker_id", "left_semi").select(
        "topic",
        "partition",
        "broker_id",
        c("leader").alias("b_leader"),
        c("leader_epoch").alias("b_epoch"),
        c("is_leader").alias("b_is_leader"),
        c("log_end_offset").alias("leo"),
        c("high_watermark").alias("hw"),
        F.lit(True).alias("hosted"),
    )
    queued = pz.filter(c("queued")).select("topic").distinct()
    joined = assigned.join(reported, ["topic", "partition", "broker_id"], "full_outer")
    # Replicas of topics being deleted, and of partitions without a state znode, are other rules' business.
    stateless = pz.filter(~c("has_state")).select("topic", "partition")
    return (
        joined.join(F.broadcast(queued), "topic", "left_anti")
        .join(stateless, ["topic", "partition"], "left_anti")
        .fillna(False, ["assigned", "hosted"])
    )


def _controller_join(pz: DataFrame, controller_partitions: DataFrame) -> DataFrame:
    c = F.col
    ctl = controller_partitions.select(
        "topic",
        "partition",
        c("state").alias("c_state"),
        c("leader").alias("c_leader"),
        c("leader_epoch").alias("c_epoch"),
        c("isr").alias("c_isr"),
        c("replicas").alias("c_replicas"),
        c("adding_replicas").alias("c_adding"),
        c("removing_replicas").alias("c_removing"),
        c("queued_for_deletion").alias("c_queued"),
        F.lit(True).alias("in_controller"),
    )
    zk = pz.select(
        "topic",
        "partition",
        "leader",
        "leader_epoch",
        "isr",
        "replicas",
        "adding_replicas",
        "removing_replicas",
        "queued",
        F.lit(True).alias("in_zk"),
    )
    return (
        zk.join(ctl, ["topic", "partition"], "full_outer")
        .fillna(False, ["in_zk", "in_controller", "queued", "c_queued"])
        .filter(~c("queued") & ~c("c_queued"))
    )


def chain_order() -> list[Column]:
    return [F.col("controller_epoch"), F.col("sequence"), F.col("timestamp_ms"), F.col("table"), F.col("id")]


def _audit_chain(audit: DataFrame) -> DataFrame:
    c = F.col
    is_new = (c("table") == "partition") & (c("to_state") == NEW_PARTITION)
    rows = audit.filter(c("leader_epoch_after").isNotNull() | is_new).withColumn(
        "epoch_key", F.when(is_new, F.lit(-1)).otherwise(c("leader_epoch_after"))
    )
    w = Window.partitionBy("topic", "partition").orderBy(*chain_order())
    keyed = rows.withColumn("prev_epoch", F.lag("epoch_key").over(w)).withColumn(
        "is_last", F.lead("id").over(w).isNull()
    )
    regression = (~is_new & c("prev_epoch").isNotNull() & (c("epoch_key") < c("prev_epoch"))) | (
        c("leader_epoch_after") < c("leader_epoch_before")
    )
    return keyed.withColumn("regression", F.coalesce(regression, F.lit(False))).filter(
        c("regression") | c("is_last")
    )
