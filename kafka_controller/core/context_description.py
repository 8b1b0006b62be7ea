"""The controller's context as one columnar document: the answer of ``DescribeControllerContext``.

``describe_context`` runs on the controller's event thread, so the document is one consistent
moment of the context; it only copies plain values, and encoding (orjson) happens on the request
thread. It is **columnar** like the transport's control requests: one array per field, with topic
names, replica lists and state names dictionary-encoded (``topics``, ``replica_sets``, ``states``
tables; the columns hold indexes). Measured at 100,000 partitions and 300,000 replicas (2 cores,
orjson): one JSON object per row is a 46.5 MB body that takes ~1 s to build on the event thread and
~1.7 s to parse and check on the client; the columns are 6.9 MB, ~0.24 s to build, and ~0.16 s to
encode, parse and check.

``description_rows`` turns a checked document into the rows of the reconciliation snapshot's
``controller_partitions``, ``controller_replicas`` and ``reassignments`` tables, the same rows
``reconcile.sources.describe_controller_context`` gives. ``check_description`` validates a
document from the wire with C-speed type scans and raises ``ValueError`` in one line.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import chain
from typing import Any

from kafka_controller.core.context import ControllerContext
from kafka_controller.domain.errors import brief
from kafka_controller.domain.values import TopicPartition
from kafka_controller.hotpath import values_at

#: Version of the document's layout; readers refuse others.
DESCRIPTION_VERSION = 1

#: ``partitions`` columns: name -> (dictionary table or "" for a plain value, value type, nullable).
PARTITION_COLUMNS: dict[str, tuple[str, type, bool]] = {
    "topic": ("topics", int, False),
    "partition": ("", int, False),
    "state": ("states", int, True),
    "leader": ("", int, True),
    "leader_epoch": ("", int, True),
    "isr": ("replica_sets", int, True),
    "controller_epoch": ("", int, True),
    "zk_version": ("", int, True),
    "replicas": ("replica_sets", int, False),
    "adding_replicas": ("replica_sets", int, False),
    "removing_replicas": ("replica_sets", int, False),
    "queued_for_deletion": ("", bool, False),
}
REPLICA_COLUMNS: dict[str, tuple[str, type, bool]] = {
    "topic": ("topics", int, False),
    "partition": ("", int, False),
    "replica": ("", int, False),
    "state": ("states", int, False),
}
REASSIGNMENT_COLUMNS: dict[str, tuple[str, type, bool]] = {
    "topic": ("topics", int, False),
    "partition": ("", int, False),
    "target_replicas": ("replica_sets", int, False),
}
TABLE_COLUMNS = {
    "partitions": PARTITION_COLUMNS,
    "replicas": REPLICA_COLUMNS,
    "reassignments": REASSIGNMENT_COLUMNS,
}
_HEADER = ("controller_id", "epoch", "epoch_zk_version")


def describe_context(ctx: ControllerContext, controller_id: int) -> dict[str, Any]:
    """The whole context as a JSON-ready columnar document (call it on the event thread).

    Partitions come in the context's assignment order, replicas in its replica-state order,
    reassignments sorted: the order of ``reconcile.sources``' rows."""
    topics: dict[str, int] = {}
    sets: dict[tuple[int, ...], int] = {}
    names: dict[str, int] = {}
    states = ctx.partition_states
    leadership = ctx.partitions_leadership_info
    queued = ctx.topics_to_be_deleted
    t_col: list[int] = []
    p_col: list[int] = []
    state_col: list[int | None] = []
    leader: list[int | None] = []
    leader_epoch: list[int | None] = []
    isr: list[int | None] = []
    controller_epoch: list[int | None] = []
    zk_version: list[int | None] = []
    replicas: list[int] = []
    adding: list[int] = []
    removing: list[int] = []
    queued_col: list[bool] = []
    for topic, parts in ctx.partition_assignments.items():
        ti = topics.setdefault(topic, len(topics))
        is_queued = topic in queued
        for p, a in parts.items():
            tp = TopicPartition(topic, p)
            t_col.append(ti)
            p_col.append(p)
            s = states.get(tp)
            state_col.append(None if s is None else names.setdefault(s.kafka_name, len(names)))
            info = leadership.get(tp)
            if info is None:
                leader.append(None)
                leader_epoch.append(None)
                isr.append(None)
                controller_epoch.append(None)
                zk_version.append(None)
            else:
                lai = info.leader_and_isr
                leader.append(lai.leader)
                leader_epoch.append(lai.leader_epoch)
                isr.append(sets.setdefault(tuple(lai.isr), len(sets)))
                controller_epoch.append(info.controller_epoch)
                zk_version.append(lai.zk_version)
            replicas.append(sets.setdefault(a.replicas, len(sets)))
            adding.append(sets.setdefault(a.adding_replicas, len(sets)))
            removing.append(sets.setdefault(a.removing_replicas, len(sets)))
            queued_col.append(is_queued)
    r_topic: list[int] = []
    r_partition: list[int] = []
    r_replica: list[int] = []
    r_state: list[int] = []
    for ((topic, p), replica), rs in ctx.replica_states.items():
        r_topic.append(topics.setdefault(topic, len(topics)))
        r_partition.append(p)
        r_replica.append(replica)
        r_state.append(names.setdefault(rs.kafka_name, len(names)))
    moving = sorted(ctx.partitions_being_reassigned)
    targets = [ctx.partition_full_replica_assignment(tp).target_replicas for tp in moving]
    return {
        "version": DESCRIPTION_VERSION,
        "controller_id": controller_id,
        "epoch": ctx.epoch,
        "epoch_zk_version": ctx.epoch_zk_version,
        "partitions": {
            "topic": t_col,
            "partition": p_col,
            "state": state_col,
            "leader": leader,
            "leader_epoch": leader_epoch,
            "isr": isr,
            "controller_epoch": controller_epoch,
            "zk_version": zk_version,
            "replicas": replicas,
            "adding_replicas": adding,
            "removing_replicas": removing,
            "queued_for_deletion": queued_col,
        },
        "replicas": {"topic": r_topic, "partition": r_partition, "replica": r_replica, "state": r_state},
        "reassignments": {
            "topic": [topics.setdefault(tp.topic, len(topics)) for tp in moving],
            "partition": [tp.partition for tp in moving],
            "target_replicas": [sets.setdefault(t, len(sets)) for t in targets],
        },
        "topics": list(topics),
        "replica_sets": [list(s) for s in sets],
        "states": list(names),
    }


def check_description(doc: Any) -> dict[str, Any]:
    """``doc`` if it is a well-formed document of this version; else ``ValueError`` in one line."""
    if type(doc) is not dict:
        raise ValueError(f"expected a JSON object, got {type(doc).__name__}")
    if doc.get("version") != DESCRIPTION_VERSION:
        raise ValueError(
            f"unsupported version {brief(doc.get('version'), 20)} (expected {DESCRIPTION_VERSION})"
        )
    for name in _HEADER:
        if type(doc.get(name)) is not int:
            raise ValueError(f"{name!r} must be an integer")
    tables = {
        "topics": _table(doc, "topics", str),
        "states": _table(doc, "states", str),
        "replica_sets": _table(doc, "replica_sets", list),
    }
    if not set(map(type, chain.from_iterable(tables["replica_sets"]))) <= {int}:
        raise ValueError("'replica_sets' must be a list of lists of integers")
    for table, columns in TABLE_COLUMNS.items():
        _check_columns(doc, table, columns, {k: len(v) for k, v in tables.items()})
    return doc


def _table(doc: Mapping[str, Any], key: str, item: type) -> list[Any]:
    values = doc.get(key)
    if type(values) is not list or not set(map(type, values)) <= {item}:
        raise ValueError(f"{key!r} must be a list of {item.__name__}")
    return values


def _check_columns(
    doc: Mapping[str, Any], table: str, columns: Mapping[str, tuple[str, type, bool]], sizes: dict[str, int]
) -> None:
    cols = doc.get(table)
    if type(cols) is not dict:
        raise ValueError(f"{table!r} must be an object of columns")
    n = -1
    for name, (lookup, kind, nullable) in columns.items():
        col = cols.get(name)
        if type(col) is not list or (n >= 0 and len(col) != n):
            raise ValueError(f"column {table}.{name} must be a list of {max(n, 0)} values")
        n = len(col)
        allowed = {kind, type(None)} if nullable else {kind}
        if not set(map(type, col)) <= allowed:
            raise ValueError(
                f"column {table}.{name} must hold {kind.__name__} values{' or null' if nullable else ''}"
            )
        if lookup and col:
            present = [i for i in col if i is not None] if nullable else col
            if present and (min(present) < 0 or max(present) >= sizes[lookup]):
                raise ValueError(f"column {table}.{name} has indexes outside its {lookup!r} table")


def expand_description(doc: Mapping[str, Any]) -> dict[str, dict[str, list[Any]]]:
    """The tables of a checked document with the dictionary indexes replaced by their values.

    Replica lists are shared between rows (one list per distinct value): read them, do not
    change them. Columnar writers (Parquet) take these directly."""
    tables: dict[str, Any] = {
        "topics": doc["topics"],
        "states": doc["states"],
        "replica_sets": doc["replica_sets"],
    }
    out: dict[str, dict[str, list[Any]]] = {}
    for table, columns in TABLE_COLUMNS.items():
        expanded: dict[str, list[Any]] = {}
        for name, (lookup, _, nullable) in columns.items():
            col = doc[table][name]
            if not lookup:
                expanded[name] = col
            elif nullable:
                values = tables[lookup]
                expanded[name] = [None if i is None else values[i] for i in col]
            else:
                expanded[name] = list(values_at(tables[lookup], col))
        out[table] = expanded
    return out


def description_rows(
    doc: Mapping[str, Any],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """The snapshot rows (partitions, replicas, reassignments) of a checked document, each row with
    its own lists."""
    tables = expand_description(doc)

    def rows(table: str) -> list[dict[str, Any]]:
        cols = tables[table]
        names = tuple(cols)
        copied = [
            [None if v is None else list(v) for v in col]
            if TABLE_COLUMNS[table][n][0] == "replica_sets"
            else col
            for n, col in cols.items()
        ]
        return [dict(zip(names, row, strict=True)) for row in zip(*copied, strict=True)]

    reassignments = [{**r, "source": "controller", "started_ms": None} for r in rows("reassignments")]
    return rows("partitions"), rows("replicas"), reassignments
