"""The reconciliation rules: each finding kind is one function from the prepared frames to a DataFrame
of findings with the same columns (``FINDING_COLUMNS``):

``kind, severity, topic, partition, broker, expected, actual, detail``

``broker`` is the broker (or replica) the finding is about, when there is one; ``expected`` and
``actual`` are short human-readable evidence (the same text the pandas baseline produces, so the
two can be compared exactly); ``detail`` is JSON with the rest of the evidence.

Partition rules skip topics queued for deletion. Rules about a live partition (under-replication,
min ISR, preferred leader, leader not in ISR) apply only when its leader is a registered broker,
as Kafka's own metrics are reported by leaders: a partition without one is reported once, as
``offline_partition`` (no leader recorded) or ``leader_on_dead_broker`` (leader not registered).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import reduce

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from kafka_controller.reconcile.frames import NEW_REPLICA, Prepared, valid_transitions
from kafka_controller.reconcile.rules_catalog import CATALOG, CRITICAL, ERROR, INFO, SEVERITY_RANK, WARNING

__all__ = ["FINDING_COLUMNS", "RULES", "SEVERITY_RANK", "Rule", "applicable", "run_rules"]

FINDING_COLUMNS = ("kind", "severity", "topic", "partition", "broker", "expected", "actual", "detail")
FINDINGS_DDL = (
    "kind STRING, severity STRING, topic STRING, partition INT, broker INT, "
    "expected STRING, actual STRING, detail STRING"
)

c = F.col


@dataclass(frozen=True, slots=True)
class Rule:
    kind: str
    severity: str
    needs: str  # zk | brokers | controller | audit
    fn: Callable[[Prepared], DataFrame]
    doc: str


# -- evidence formatting (mirrored by pandas_baseline) -------------------------------------------
def _n(col: Column | str) -> Column:
    col = c(col) if isinstance(col, str) else col
    return F.coalesce(col.cast("string"), F.lit("null"))


def _arr(col: str) -> Column:
    return F.coalesce(F.to_json(c(col)), F.lit("null"))


def _leadership(leader: str, epoch: str) -> Column:
    return F.concat(F.lit("leader="), _n(leader), F.lit(" leader_epoch="), _n(epoch))


def _finding(
    df: DataFrame,
    kind: str,
    severity: str,
    expected: Column,
    actual: Column,
    *detail: Column | str,
    broker: Column | None = None,
    tp: bool = True,
) -> DataFrame:
    return df.select(
        F.lit(kind).alias("kind"),
        F.lit(severity).alias("severity"),
        (c("topic") if tp else F.lit(None)).cast("string").alias("topic"),
        (c("partition") if tp else F.lit(None)).cast("int").alias("partition"),
        (broker if broker is not None else F.lit(None)).cast("int").alias("broker"),
        expected.alias("expected"),
        actual.alias("actual"),
        (F.to_json(F.struct(*detail)) if detail else F.lit("{}")).alias("detail"),
    )


def _live_partitions(p: Prepared) -> DataFrame:
    return p.pz.filter(~c("queued") & c("leader_live"))


# -- ZooKeeper ------------------------------------------------------------------------------------
def offline_partition(p: Prepared) -> DataFrame:
    df = p.pz.filter(~c("queued") & (~c("has_state") | (c("leader") == -1)))
    actual = F.when(c("has_state"), F.lit("leader=-1")).otherwise(F.lit("no state znode"))
    return _finding(
        df, "offline_partition", CRITICAL, F.lit("a live leader"), actual, "replicas", "isr", "state_error"
    )


def leader_on_dead_broker(p: Prepared) -> DataFrame:
    df = p.pz.filter(~c("queued") & (c("leader") >= 0) & ~c("leader_live"))
    return _finding(
        df,
        "leader_on_dead_broker",
        CRITICAL,
        F.lit("leader registered in /brokers/ids"),
        F.concat(F.lit("leader="), _n("leader"), F.lit(" not registered")),
        "replicas",
        "isr",
        "leader_epoch",
        broker=c("leader"),
    )


def leader_not_in_isr(p: Prepared) -> DataFrame:
    df = _live_partitions(p).filter(~F.array_contains("isr", c("leader")))
    return _finding(
        df,
        "leader_not_in_isr",
        ERROR,
        F.concat(F.lit("isr contains "), _n("leader")),
        F.concat(F.lit("isr="), _arr("isr")),
        "leader_epoch",
        "replicas",
        broker=c("leader"),
    )


def isr_not_subset_of_replicas(p: Prepared) -> DataFrame:
    df = p.pz.filter(~c("queued") & c("has_state") & (F.size(F.array_except("isr", "replicas")) > 0))
    return _finding(
        df,
        "isr_not_subset_of_replicas",
        ERROR,
        F.concat(F.lit("isr within replicas="), _arr("replicas")),
        F.concat(F.lit("isr="), _arr("isr")),
        F.array_except("isr", "replicas").alias("extra"),
    )


def under_replicated(p: Prepared) -> DataFrame:
    df = _live_partitions(p).filter(F.size("isr") < c("rf"))
    return _finding(
        df,
        "under_replicated",
        WARNING,
        F.concat(F.lit("isr size >= "), _n("rf")),
        F.concat(F.lit("isr="), _arr("isr")),
        "replicas",
        "leader",
    )


def under_min_isr(p: Prepared) -> DataFrame:
    df = _live_partitions(p).filter(F.size("isr") < c("min_isr"))
    return _finding(
        df,
        "under_min_isr",
        ERROR,
        F.concat(F.lit("isr size >= "), _n("min_isr"), F.lit(" (min.insync.replicas)")),
        F.concat(F.lit("isr="), _arr("isr")),
        "replicas",
        "leader",
    )


def not_on_preferred_leader(p: Prepared) -> DataFrame:
    df = _live_partitions(p).filter(c("not_preferred"))
    return _finding(
        df,
        "not_on_preferred_leader",
        INFO,
        F.concat(F.lit("leader="), _n("preferred")),
        F.concat(F.lit("leader="), _n("leader")),
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
    return _finding(
        per_broker,
        "leader_skew",
        WARNING,
        F.lit(f"<= {pct}% of preferred partitions led elsewhere"),
        F.concat(_n("led_elsewhere"), F.lit(" of "), _n("preferred_partitions")),
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
    return _finding(
        df,
        "reassignment_stuck",
        WARNING,
        F.lit(f"complete within {limit} ms"),
        F.concat(F.lit("age_ms="), _n("age_ms")),
        "target_replicas",
        "started_ms",
    )


# -- the brokers' and the controller's views ----------------------------------------------------------
def broker_view_mismatch(p: Prepared) -> DataFrame:
    assert p.bz is not None
    z_is_leader = c("broker_id") == c("z_leader")
    differs = (
        c("assigned")
        & c("hosted")
        & (
            (c("b_leader") != c("z_leader"))
            | (c("b_epoch") != c("z_epoch"))
            | (c("b_is_leader") != z_is_leader)
        )
    )
    df = p.bz.filter(differs | (c("assigned") != c("hosted")))
    zk_side = F.concat(_leadership("z_leader", "z_epoch"), F.lit(" is_leader="), _n(z_is_leader))
    broker_side = F.concat(_leadership("b_leader", "b_epoch"), F.lit(" is_leader="), _n("b_is_leader"))
    expected = F.when(c("assigned"), zk_side).otherwise(F.lit("not assigned"))
    actual = F.when(c("hosted"), broker_side).otherwise(F.lit("no replica"))
    return _finding(df, "broker_view_mismatch", ERROR, expected, actual, "leo", "hw", broker=c("broker_id"))


def controller_view_mismatch(p: Prepared) -> DataFrame:
    assert p.cz is not None
    same = [
        c("leader").eqNullSafe(c("c_leader")),
        c("leader_epoch").eqNullSafe(c("c_epoch")),
        c("isr").eqNullSafe(c("c_isr")),
        c("replicas").eqNullSafe(c("c_replicas")),
        c("adding_replicas").eqNullSafe(c("c_adding")),
        c("removing_replicas").eqNullSafe(c("c_removing")),
    ]
    df = p.cz.filter(~c("in_zk") | ~c("in_controller") | ~reduce(lambda a, b: a & b, same))

    def side(present: str, leader: str, epoch: str, isr: str, replicas: str) -> Column:
        text = F.concat(
            _leadership(leader, epoch), F.lit(" isr="), _arr(isr), F.lit(" replicas="), _arr(replicas)
        )
        return F.when(c(present), text).otherwise(F.lit("absent"))

    return _finding(
        df,
        "controller_view_mismatch",
        ERROR,
        side("in_zk", "leader", "leader_epoch", "isr", "replicas"),
        side("in_controller", "c_leader", "c_epoch", "c_isr", "c_replicas"),
        "c_state",
        "adding_replicas",
        "c_adding",
        "removing_replicas",
        "c_removing",
    )


# -- the audit log --------------------------------------------------------------------------------
def audit_state_mismatch(p: Prepared) -> DataFrame:
    """The last audited leadership must name ZooKeeper's leader, with an epoch not above ZooKeeper's
    (epoch bumps without a leader change, e.g. reassignment phase A, are not audited)."""
    assert p.audit_chain is not None
    last = p.audit_chain.filter(c("is_last") & c("leader_after").isNotNull()).select(
        "topic",
        "partition",
        "leader_after",
        "leader_epoch_after",
        "controller_epoch",
        "sequence",
        c("table").alias("audit_table"),
    )
    df = last.join(p.pz.filter(~c("queued")), ["topic", "partition"]).filter(
        (c("leader_after") != F.coalesce(c("leader"), F.lit(-1)))
        | (c("leader_epoch_after") > c("leader_epoch"))
    )
    return _finding(
        df,
        "audit_state_mismatch",
        WARNING,
        _leadership("leader", "leader_epoch"),
        _leadership("leader_after", "leader_epoch_after"),
        "controller_epoch",
        "sequence",
        "audit_table",
    )


def illegal_transition(p: Prepared) -> DataFrame:
    assert p.audit is not None
    valid = F.broadcast(valid_transitions(p.spark))
    df = p.audit.join(valid, ["table", "from_state", "to_state"], "left_anti")
    return _finding(
        df,
        "illegal_transition",
        ERROR,
        F.concat(F.lit("a valid previous state of "), c("to_state")),
        F.concat(c("from_state"), F.lit(" -> "), c("to_state")),
        c("table").alias("audit_table"),
        "id",
        "controller_epoch",
        "sequence",
        broker=c("replica"),
    )


def leader_epoch_regression(p: Prepared) -> DataFrame:
    assert p.audit_chain is not None
    df = p.audit_chain.filter(c("regression")).withColumn(
        "floor",
        F.greatest(F.coalesce(c("prev_epoch"), F.lit(-1)), F.coalesce(c("leader_epoch_before"), F.lit(-1))),
    )
    return _finding(
        df,
        "leader_epoch_regression",
        ERROR,
        F.concat(F.lit("leader_epoch >= "), _n("floor")),
        F.concat(F.lit("leader_epoch="), _n("leader_epoch_after")),
        c("table").alias("audit_table"),
        "id",
        "controller_epoch",
        "sequence",
    )


def hw_regression(p: Prepared) -> DataFrame:
    """Committed data lost: a replica holds a high watermark beyond the current leader's log end."""
    assert p.bz is not None
    per = (
        p.bz.filter(c("assigned") & c("hosted"))
        .groupBy("topic", "partition")
        .agg(
            F.max(F.when(c("broker_id") == c("z_leader"), c("leo"))).alias("leader_leo"),
            F.first("z_leader").alias("z_leader"),
            F.max("hw").alias("max_hw"),
            F.max_by("broker_id", F.struct("hw", "broker_id")).alias("hw_broker"),
        )
        .filter(c("max_hw") > c("leader_leo"))
    )
    return _finding(
        per,
        "hw_regression",
        CRITICAL,
        F.concat(
            F.lit("leader log_end_offset >= "),
            _n("max_hw"),
            F.lit(" (high watermark on broker "),
            _n("hw_broker"),
            F.lit(")"),
        ),
        F.concat(F.lit("leader "), _n("z_leader"), F.lit(" log_end_offset="), _n("leader_leo")),
        "leader_leo",
        "max_hw",
        "hw_broker",
        broker=c("z_leader"),
    )


_FUNCTIONS: dict[str, Callable[[Prepared], DataFrame]] = {
    "offline_partition": offline_partition,
    "leader_on_dead_broker": leader_on_dead_broker,
    "leader_not_in_isr": leader_not_in_isr,
    "isr_not_subset_of_replicas": isr_not_subset_of_replicas,
    "under_replicated": under_replicated,
    "under_min_isr": under_min_isr,
    "not_on_preferred_leader": not_on_preferred_leader,
    "leader_skew": leader_skew,
    "reassignment_stuck": reassignment_stuck,
    "broker_view_mismatch": broker_view_mismatch,
    "controller_view_mismatch": controller_view_mismatch,
    "audit_state_mismatch": audit_state_mismatch,
    "illegal_transition": illegal_transition,
    "leader_epoch_regression": leader_epoch_regression,
    "hw_regression": hw_regression,
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
