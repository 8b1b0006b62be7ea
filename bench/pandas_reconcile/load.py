"""Loading a snapshot and audit history for the pandas baseline: Arrow tables pruned to the columns
the rules read, and ZooKeeper's partitions as one frame with what the rules ask of each (as
``kafka_controller.reconcile.frames`` prepares them for Spark)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from kafka_controller.domain.config_keys import MIN_INSYNC_REPLICAS, UNCLEAN_LEADER_ELECTION_ENABLE
from kafka_controller.domain.errors import InvalidArgumentError
from kafka_controller.reconcile import snapshot as S
from kafka_controller.reconcile import snapshot_schema as SS

from .arrow import NULL, contains, flatten, ints, list_lengths

# -- loading ---------------------------------------------------------------------------------------
#: Only the columns the rules read (``None`` = all); topics of the big tables stay dictionary-encoded.
_COLUMNS: dict[str, tuple[str, ...] | None] = {
    "meta": None,
    "brokers": None,
    "zk_partitions": (
        "topic",
        "partition",
        "replicas",
        "adding_replicas",
        "removing_replicas",
        "leader",
        "leader_epoch",
        "isr",
        "queued_for_deletion",
    ),
    "broker_replicas": (
        "topic",
        "partition",
        "broker_id",
        "leader",
        "leader_epoch",
        "is_leader",
        "log_end_offset",
        "high_watermark",
    ),
    "controller_partitions": (
        "topic",
        "partition",
        "leader",
        "leader_epoch",
        "isr",
        "replicas",
        "adding_replicas",
        "removing_replicas",
        "queued_for_deletion",
    ),
    "reassignments": None,
    "topic_configs": None,
    "partition_transitions": (
        "id",
        "controller_epoch",
        "sequence",
        "topic",
        "partition",
        "from_state",
        "to_state",
        "leader_after",
        "leader_epoch_before",
        "leader_epoch_after",
        "outcome",
        "timestamp_ms",
    ),
    "replica_transitions": (
        "id",
        "controller_epoch",
        "sequence",
        "topic",
        "partition",
        "replica",
        "from_state",
        "to_state",
        "leader_after",
        "leader_epoch_before",
        "leader_epoch_after",
        "outcome",
        "timestamp_ms",
    ),
}
_DICTIONARY = {
    "broker_replicas": ["topic"],
    "partition_transitions": ["topic", "from_state", "to_state", "outcome"],
    "replica_transitions": ["topic", "from_state", "to_state", "outcome"],
}


def _read(root: str | Path, table: str) -> pa.Table:
    import pyarrow.parquet as pq

    if not (Path(root) / table).is_dir():
        raise InvalidArgumentError(f"{root} has no {table!r} table")
    columns = _COLUMNS[table]
    return pq.read_table(
        Path(root) / table,
        columns=None if columns is None else list(columns),
        read_dictionary=_DICTIONARY.get(table),
    )


def load(snapshot: str | Path, audit: str | Path | None = None) -> dict[str, Any]:
    """The tables the rules read (not ``controller_replicas``), as Arrow, pruned to the columns used."""
    S.read_meta(snapshot)
    t = {name: _read(snapshot, name) for name in SS.TABLES if name != "controller_replicas"}
    meta = t.pop("meta").to_pylist()[0]
    if audit is not None:
        for name in SS.AUDIT_TABLES:
            t[name] = _read(audit, name)
    return {"meta": meta, **t}


def zk_frame(d: dict[str, Any]) -> tuple[pd.DataFrame, pa.Table]:
    meta, z = d["meta"], d["zk_partitions"]
    live = set(d["brokers"].column("broker_id").to_pylist())
    cfg = d["topic_configs"].to_pandas()
    min_isr = {
        r.topic: int(r.value)
        for r in cfg[cfg.key == MIN_INSYNC_REPLICAS].itertuples()
        if r.value.strip().lstrip("-").isdigit()
    }
    unclean = {
        r.topic: r.value.strip().lower() == "true"
        for r in cfg[cfg.key == UNCLEAN_LEADER_ELECTION_ENABLE].itertuples()
    }
    leader = ints(z.column("leader"))
    has_state = leader != NULL
    first = pc.list_element(
        pc.if_else(
            pc.greater(pc.list_value_length(z.column("replicas")), 0),
            z.column("replicas"),
            pa.scalar([NULL], pa.list_(pa.int32())),
        ),
        0,
    )
    preferred = ints(first)
    adding, isr = z.column("adding_replicas"), z.column("isr")
    reassigned = (list_lengths(adding) > 0) | (list_lengths(z.column("removing_replicas")) > 0)
    pending = reassigned & contains(adding, preferred) & ~contains(isr, preferred)
    topics = z.column("topic").to_pandas()
    pz = pd.DataFrame(
        {
            "topic": topics,
            "partition": z.column("partition").to_numpy(),
            "leader": leader,
            "leader_epoch": ints(z.column("leader_epoch")),
            "has_state": has_state,
            "leader_live": np.isin(leader, list(live)),
            "preferred": preferred,
            "rf": list_lengths(z.column("replicas")) - list_lengths(adding),
            "isr_size": list_lengths(isr),
            "min_isr": topics.map(min_isr)
            .fillna(meta["default_min_insync_replicas"])
            .astype(np.int64)
            .to_numpy(),
            "unclean_enabled": np.array(
                [unclean.get(t, meta["default_unclean_leader_election_enable"]) for t in topics.unique()]
            )
            .take(pd.factorize(topics)[0])
            .astype(bool)
            if len(topics)
            else np.zeros(0, dtype=bool),
            "queued": z.column("queued_for_deletion").to_numpy(zero_copy_only=False),
            "not_preferred": has_state & (leader != preferred) & ~pending,
            "leader_in_isr": contains(isr, leader),
            "row": np.arange(z.num_rows),
        }
    )
    flat, parent = flatten(isr)
    rflat, rparent = flatten(z.column("replicas"))
    k = int(max(flat.max(initial=0), rflat.max(initial=0))) + 1
    outside = ~np.isin(parent * k + flat, rparent * k + rflat)
    pz["isr_outside"] = np.bincount(parent[outside], minlength=len(pz)) > 0
    return pz, z
