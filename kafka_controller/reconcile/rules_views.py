"""The rules comparing ZooKeeper with what the brokers and the controller hold: each broker's own view
of its replicas (leadership, and high watermarks against the leader's log end) and the active
controller's context."""

from __future__ import annotations

from functools import reduce

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from kafka_controller.reconcile.frames import Prepared
from kafka_controller.reconcile.rule_evidence import as_text, finding, json_list, leadership
from kafka_controller.reconcile.rules_catalog import CRITICAL, ERROR

c = F.col


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
    zk_side = F.concat(leadership("z_leader", "z_epoch"), F.lit(" is_leader="), as_text(z_is_leader))
    broker_side = F.concat(leadership("b_leader", "b_epoch"), F.lit(" is_leader="), as_text("b_is_leader"))
    expected = F.when(c("assigned"), zk_side).otherwise(F.lit("not assigned"))
    actual = F.when(c("hosted"), broker_side).otherwise(F.lit("no replica"))
    return finding(df, "broker_view_mismatch", ERROR, expected, actual, "leo", "hw", broker=c("broker_id"))


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
            leadership(leader, epoch),
            F.lit(" isr="),
            json_list(isr),
            F.lit(" replicas="),
            json_list(replicas),
        )
        return F.when(c(present), text).otherwise(F.lit("absent"))

    return finding(
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
    return finding(
        per,
        "hw_regression",
        CRITICAL,
        F.concat(
            F.lit("leader log_end_offset >= "),
            as_text("max_hw"),
            F.lit(" (high watermark on broker "),
            as_text("hw_broker"),
            F.lit(")"),
        ),
        F.concat(F.lit("leader "), as_text("z_leader"), F.lit(" log_end_offset="), as_text("leader_leo")),
        "leader_leo",
        "max_hw",
        "hw_broker",
        broker=c("z_leader"),
    )
