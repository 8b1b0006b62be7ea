"""The reconciliation snapshot's Parquet schema, versioned, in this one place (``snapshot`` writes and
reads it).

A snapshot is a directory with one Parquet dataset per table (``<dir>/<table>/part-*.parquet``),
all taken at one moment from up to three sources that are compared against each other:

==========================  ============================================================================
table                       one row per ...
==========================  ============================================================================
``meta``                    snapshot (exactly one row): version, time, controller, which views it holds
``brokers``                 registered broker (``/brokers/ids/<id>``), with whether its own view is here
``zk_partitions``           partition in ZooKeeper: assignment (RS/AR/RR) and state znode (leader, ISR...)
``broker_replicas``         (broker, replica) as that broker sees it: role, leader epoch, LEO, HW
``controller_partitions``   partition in the active controller's context: state and leadership cache
``controller_replicas``     replica state in the controller's context
``reassignments``           reassignment in progress (admin znode, topic znode AR/RR, or the controller)
``topic_configs``           topic config override (``/config/topics/<t>``), key and value as strings
==========================  ============================================================================

Why one row per partition with list columns (``replicas``, ``isr``) rather than one row per
replica: the rules compare whole partitions, lists keep the snapshot at about one row per partition,
and Spark explodes them where a rule needs replicas. Leaders, epochs and broker ids are ``int32``
(Kafka's types); offsets and times (milliseconds since the epoch) are ``int64``.

The JSON row shapes of the two admin APIs the runtime exposes for the exporter (the broker's
``DescribeReplicaStates``, the controller's ``DescribeControllerContext``) are defined here too
(``BROKER_VIEW_FIELDS``, ``CONTROLLER_*_FIELDS``), with checked parsers: a source that returns a
malformed row fails with a one-line error naming the row and field, before anything is written.

``SNAPSHOT_VERSION`` goes up whenever a column is added, removed or retyped; readers refuse newer
versions with a one-line error instead of misreading them, and read older ones with the columns
added since as nulls. Version 2 added ``meta.controller_view_error``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafka_controller.domain.errors import InvalidArgumentError

if TYPE_CHECKING:
    import pyarrow as pa

SNAPSHOT_VERSION = 2


@dataclass(frozen=True, slots=True)
class Field:
    name: str
    type: str  # int32 | int64 | bool | string | list<int32>
    nullable: bool = True
    doc: str = ""


def _f(name: str, type_: str, nullable: bool = True, doc: str = "") -> Field:
    return Field(name, type_, nullable, doc)


_TP = (_f("topic", "string", False), _f("partition", "int32", False))
_LEADERSHIP = (
    _f("leader", "int32", doc="-1 = no leader; null = no state znode / no leadership known"),
    _f("leader_epoch", "int32"),
    _f("isr", "list<int32>"),
    _f("controller_epoch", "int32", doc="epoch of the controller that wrote this leadership"),
    _f("zk_version", "int32", doc="data version of the state znode"),
)

TABLES: dict[str, tuple[Field, ...]] = {
    "meta": (
        _f("schema_version", "int32", False),
        _f("snapshot_id", "string", False),
        _f("taken_ms", "int64", False),
        _f("source", "string", False, "where ZooKeeper's data came from, e.g. zookeeper:host:2181"),
        _f("cluster_id", "string"),
        _f("controller_id", "int32"),
        _f("controller_epoch", "int32"),
        _f("controller_epoch_zk_version", "int32"),
        _f("broker_views", "bool", False, "true when broker_replicas was filled by a broker source"),
        _f("controller_view", "bool", False, "true when controller_* were filled by a controller source"),
        _f(
            "controller_view_error",
            "string",
            doc="why controller_* are empty although the view was asked for (e.g. no answer in time)",
        ),
        _f("default_min_insync_replicas", "int32", False),
        _f("default_unclean_leader_election_enable", "bool", False),
    ),
    "brokers": (
        _f("broker_id", "int32", False),
        _f("broker_epoch", "int64", doc="czxid of /brokers/ids/<id>"),
        _f("host", "string"),
        _f("port", "int32"),
        _f("rack", "string"),
        _f("view_reported", "bool", False, "this broker answered the broker source"),
    ),
    "zk_partitions": (
        *_TP,
        _f("topic_id", "string"),
        _f("replicas", "list<int32>", False),
        _f("adding_replicas", "list<int32>", False),
        _f("removing_replicas", "list<int32>", False),
        *_LEADERSHIP,
        _f("state_error", "string", doc="why the state znode could not be read or decoded"),
        _f("queued_for_deletion", "bool", False, "/admin/delete_topics/<t> exists"),
    ),
    "broker_replicas": (
        _f("broker_id", "int32", False),
        _f("broker_epoch", "int64"),
        *_TP,
        _f("leader", "int32", False),
        _f("leader_epoch", "int32", False),
        _f("isr", "list<int32>", False),
        _f("zk_version", "int32", False),
        _f("replicas", "list<int32>", False),
        _f("is_leader", "bool", False),
        _f("log_end_offset", "int64", False),
        _f("high_watermark", "int64", False),
    ),
    "controller_partitions": (
        *_TP,
        _f("state", "string", doc="Kafka's name, e.g. OnlinePartition; null = no state"),
        *_LEADERSHIP,
        _f("replicas", "list<int32>", False),
        _f("adding_replicas", "list<int32>", False),
        _f("removing_replicas", "list<int32>", False),
        _f("queued_for_deletion", "bool", False),
    ),
    "controller_replicas": (*_TP, _f("replica", "int32", False), _f("state", "string", False)),
    "reassignments": (
        *_TP,
        _f("target_replicas", "list<int32>", False),
        _f("source", "string", False, "admin_znode | topic_znode | controller"),
        _f("started_ms", "int64", doc="null = unknown; the job then uses the audit log"),
    ),
    "topic_configs": (
        _f("topic", "string", False),
        _f("key", "string", False),
        _f("value", "string", False),
    ),
}

#: The audit history as the job reads it (same names as the audit store's tables, ``audit.schema``);
#: an exported Parquet copy has one dataset per table under ``<dir>/<table>/``.
_TRANSITION = (
    _f("id", "int64", False),
    _f("controller_id", "int32", False),
    _f("controller_epoch", "int32", False),
    _f("sequence", "int64"),
    *_TP,
)
_AUDIT_TAIL = (
    _f("cluster_id", "string", doc="ZooKeeper's /cluster/id; null on rows older than the column"),
    _f("from_state", "string", False),
    _f("to_state", "string", False),
    _f("leader_before", "int32"),
    _f("leader_after", "int32"),
    _f("isr_before", "string", doc="JSON array text, as in the audit store"),
    _f("isr_after", "string"),
    _f("leader_epoch_before", "int32"),
    _f("leader_epoch_after", "int32"),
)
AUDIT_TABLES: dict[str, tuple[Field, ...]] = {
    "partition_transitions": (
        *_TRANSITION,
        *_AUDIT_TAIL,
        _f("unclean", "bool", False),
        _f("outcome", "string", False),
        _f("timestamp_ms", "int64", False),
    ),
    "replica_transitions": (
        *_TRANSITION,
        _f("replica", "int32", False),
        *_AUDIT_TAIL,
        _f("outcome", "string", False),
        _f("timestamp_ms", "int64", False),
    ),
}

# -- the admin APIs' JSON rows ------------------------------------------------------------------
#: ``DescribeReplicaStates`` (each broker): ``{"version":1,"broker_id":N,"broker_epoch":E,
#: "replicas":[{...BROKER_VIEW_FIELDS...}]}`` — a broker's own replicas as it sees them.
BROKER_VIEW_FIELDS: tuple[str, ...] = (
    "topic",
    "partition",
    "leader",
    "leader_epoch",
    "isr",
    "zk_version",
    "replicas",
    "is_leader",
    "log_end_offset",
    "high_watermark",
)
#: ``DescribeControllerContext`` (active controller) as rows: ``{"version":1,"controller_id":N,"epoch":E,
#: "epoch_zk_version":V,"partitions":[{...}],"replicas":[{...}],"reassignments":[{...}]}``. The API
#: itself answers the same tables as columns (``core.context_description``).
CONTROLLER_PARTITION_FIELDS: tuple[str, ...] = tuple(f.name for f in TABLES["controller_partitions"])
CONTROLLER_REPLICA_FIELDS: tuple[str, ...] = tuple(f.name for f in TABLES["controller_replicas"])
REASSIGNMENT_FIELDS: tuple[str, ...] = tuple(f.name for f in TABLES["reassignments"])
ADMIN_API_VERSION = 1

_PY_TYPES: dict[str, tuple[type, ...]] = {
    "int32": (int,),
    "int64": (int,),
    "bool": (bool,),
    "string": (str,),
    "list<int32>": (list, tuple),
}


def check_row(table: str, row: Mapping[str, Any], where: str, fields: Sequence[str] | None = None) -> None:
    """Raise ``InvalidArgumentError`` (one line) if ``row`` lacks a field or has a mistyped value."""
    spec = {f.name: f for f in TABLES[table]}
    for name in fields if fields is not None else spec:
        f = spec[name]
        if name not in row:
            raise InvalidArgumentError(f"{where}: missing field {name!r}")
        value = row[name]
        if value is None:
            if not f.nullable:
                raise InvalidArgumentError(f"{where}: field {name!r} must not be null")
            continue
        ok = isinstance(value, _PY_TYPES[f.type]) and not (f.type != "bool" and isinstance(value, bool))
        if ok and f.type == "list<int32>":
            ok = all(isinstance(x, int) and not isinstance(x, bool) for x in value)
        if not ok:
            raise InvalidArgumentError(f"{where}: field {name!r} must be {f.type}, got {value!r}")


# -- pyarrow and Spark types ---------------------------------------------------------------------
def arrow_schema(fields: Sequence[Field]) -> pa.Schema:
    import pyarrow as pa

    types = {
        "int32": pa.int32(),
        "int64": pa.int64(),
        "bool": pa.bool_(),
        "string": pa.string(),
        "list<int32>": pa.list_(pa.int32()),
    }
    return pa.schema([pa.field(f.name, types[f.type], nullable=f.nullable) for f in fields])


def spark_ddl(fields: Sequence[Field]) -> str:
    """A Spark DDL schema string (``"topic STRING NOT NULL, ..."``), so reads never infer types."""
    types = {
        "int32": "INT",
        "int64": "BIGINT",
        "bool": "BOOLEAN",
        "string": "STRING",
        "list<int32>": "ARRAY<INT>",
    }
    return ", ".join(f"`{f.name}` {types[f.type]}" for f in fields)


def describe_schema() -> str:
    """The schema as text (for ``--help`` and docs): one line per column."""
    lines = [f"snapshot schema version {SNAPSHOT_VERSION}"]
    for table, fields in {**TABLES, **AUDIT_TABLES}.items():
        lines.append(f"{table}:")
        lines += [
            f"  {f.name} {f.type}{'' if f.nullable else ' not null'}{'  -- ' + f.doc if f.doc else ''}"
            for f in fields
        ]
    return "\n".join(lines)
