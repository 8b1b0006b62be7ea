"""What every rule returns: findings with the same columns, and the evidence text they carry.

``FINDING_COLUMNS``: ``kind, severity, topic, partition, broker, expected, actual, detail``.
``broker`` is the broker (or replica) the finding is about, when there is one; ``expected`` and
``actual`` are short human-readable evidence (nulls spelled ``null``, lists as JSON, so any other
implementation of the rules, such as ``bench/pandas_reconcile``, can be compared with them exactly);
``detail`` is JSON with the rest of the evidence.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

__all__ = ["FINDINGS_DDL", "FINDING_COLUMNS", "as_text", "finding", "json_list", "leadership"]

FINDING_COLUMNS = ("kind", "severity", "topic", "partition", "broker", "expected", "actual", "detail")
FINDINGS_DDL = (
    "kind STRING, severity STRING, topic STRING, partition INT, broker INT, "
    "expected STRING, actual STRING, detail STRING"
)

c = F.col


def as_text(col: Column | str) -> Column:
    col = c(col) if isinstance(col, str) else col
    return F.coalesce(col.cast("string"), F.lit("null"))


def json_list(col: str) -> Column:
    return F.coalesce(F.to_json(c(col)), F.lit("null"))


def leadership(leader: str, epoch: str) -> Column:
    return F.concat(F.lit("leader="), as_text(leader), F.lit(" leader_epoch="), as_text(epoch))


def finding(
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
