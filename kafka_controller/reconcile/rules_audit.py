"""The rules over the audit log: its last leadership per partition against ZooKeeper, transitions the
state machines reject, and leader epochs going down (on ``frames``' audit chain, which replays each
controller's decisions in order)."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from kafka_controller.reconcile.frames import Prepared, valid_transitions
from kafka_controller.reconcile.rule_evidence import as_text, finding, leadership
from kafka_controller.reconcile.rules_catalog import ERROR, WARNING

c = F.col


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
    return finding(
        df,
        "audit_state_mismatch",
        WARNING,
        leadership("leader", "leader_epoch"),
        leadership("leader_after", "leader_epoch_after"),
        "controller_epoch",
        "sequence",
        "audit_table",
    )


def illegal_transition(p: Prepared) -> DataFrame:
    assert p.audit is not None
    valid = F.broadcast(valid_transitions(p.spark))
    df = p.audit.join(valid, ["table", "from_state", "to_state"], "left_anti")
    return finding(
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
    return finding(
        df,
        "leader_epoch_regression",
        ERROR,
        F.concat(F.lit("leader_epoch >= "), as_text("floor")),
        F.concat(F.lit("leader_epoch="), as_text("leader_epoch_after")),
        c("table").alias("audit_table"),
        "id",
        "controller_epoch",
        "sequence",
    )
