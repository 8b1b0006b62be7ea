"""The reconciliation snapshot: its Parquet schema (versioned, in this one place) and a pyarrow writer.

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

import json
import os
import shutil
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
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


# -- writing -------------------------------------------------------------------------------------
class SnapshotWriter:
    """Writes a snapshot into a fresh temporary directory and renames it into place on ``commit``.

    Nothing appears at ``path`` unless every table was written: a failed export leaves no
    half-snapshot behind. ``write`` may be called many times per table (each call appends one
    row group), so an exporter can stream millions of partitions in bounded memory.
    """

    def __init__(self, path: str | os.PathLike[str], *, overwrite: bool = False) -> None:
        self.path = Path(path)
        if self.path.exists() and not overwrite and (not self.path.is_dir() or any(self.path.iterdir())):
            raise InvalidArgumentError(f"snapshot directory {self.path} already exists and is not empty")
        if not self.path.parent.is_dir():
            raise InvalidArgumentError(
                f"cannot write snapshot {self.path}: {self.path.parent} is not a directory"
            )
        self._overwrite = overwrite
        self._tmp = self.path.parent / f".{self.path.name}.tmp-{uuid.uuid4().hex[:8]}"
        self._tmp.mkdir()
        self._writers: dict[str, Any] = {}
        self.rows: dict[str, int] = dict.fromkeys(TABLES, 0)

    def write(self, table: str, columns: Mapping[str, Sequence[Any]] | pa.Table) -> None:
        """Append rows to ``table`` given as columns (name -> values) or a pyarrow table."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        if table not in TABLES or table == "meta":
            raise InvalidArgumentError(f"unknown snapshot table {table!r}")
        schema = arrow_schema(TABLES[table])
        if isinstance(columns, pa.Table):
            data = columns.select(schema.names).cast(schema)
        else:
            missing = [n for n in schema.names if n not in columns]
            if missing:
                raise InvalidArgumentError(f"snapshot table {table}: missing columns {missing}")
            try:
                data = pa.table({n: pa.array(columns[n], type=schema.field(n).type) for n in schema.names})
                data = data.cast(schema)
            except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError) as e:
                raise InvalidArgumentError(f"snapshot table {table}: {str(e).splitlines()[0]}") from None
        writer = self._writers.get(table)
        if writer is None:
            (self._tmp / table).mkdir()
            writer = pq.ParquetWriter(self._tmp / table / "part-00000.parquet", schema, compression="zstd")
            self._writers[table] = writer
        writer.write_table(data)
        self.rows[table] += data.num_rows

    def commit(self, meta: Mapping[str, Any]) -> Path:
        """Write ``meta`` and empty datasets for unwritten tables, then move the snapshot into place."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        row = {"schema_version": SNAPSHOT_VERSION, **meta}
        check_row("meta", row, "snapshot meta")
        try:
            for table, fields in TABLES.items():
                if table == "meta":
                    continue
                if table not in self._writers:
                    self.write(table, arrow_schema(fields).empty_table())
                self._writers.pop(table).close()
            (self._tmp / "meta").mkdir()
            schema = arrow_schema(TABLES["meta"])
            pq.write_table(
                pa.Table.from_pylist([row], schema=schema), self._tmp / "meta" / "part-00000.parquet"
            )
            self.rows["meta"] = 1
            if self.path.exists() and self._overwrite:
                shutil.rmtree(self.path) if self.path.is_dir() else self.path.unlink()
            elif self.path.exists():
                self.path.rmdir()  # empty, checked in __init__
            self._tmp.rename(self.path)
        except BaseException:
            self.abort()
            raise
        return self.path

    def abort(self) -> None:
        for w in self._writers.values():
            w.close()
        self._writers.clear()
        shutil.rmtree(self._tmp, ignore_errors=True)

    def __enter__(self) -> SnapshotWriter:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is not None or self._tmp.exists():
            self.abort()


# -- reading -------------------------------------------------------------------------------------
def read_meta(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The snapshot's one meta row, checked: missing tables or a newer version fail in one line."""
    import pyarrow.parquet as pq

    root = Path(path)
    if not root.is_dir():
        raise InvalidArgumentError(f"snapshot {root} does not exist or is not a directory")
    missing = [t for t in TABLES if not (root / t).is_dir()]
    if missing:
        raise InvalidArgumentError(f"snapshot {root} is incomplete: missing tables {missing}")
    try:
        rows = pq.read_table(root / "meta").to_pylist()
    except Exception as e:  # pyarrow raises several unrelated types for a corrupt file
        raise InvalidArgumentError(f"snapshot {root}: cannot read meta: {str(e).splitlines()[0]}") from None
    if len(rows) != 1:
        raise InvalidArgumentError(f"snapshot {root}: meta must have exactly one row, has {len(rows)}")
    meta = rows[0]
    version = meta.get("schema_version")
    if not isinstance(version, int) or not 1 <= version <= SNAPSHOT_VERSION:
        raise InvalidArgumentError(
            f"snapshot {root}: schema version {version} is not supported "
            f"(this reader knows 1..{SNAPSHOT_VERSION})"
        )
    return dict(meta)


def read_arrow(path: str | os.PathLike[str], table: str) -> pa.Table:
    """One table of a snapshot (or of an audit Parquet copy) with its declared schema."""
    import pyarrow.dataset as ds

    fields = TABLES.get(table) or AUDIT_TABLES.get(table)
    if fields is None:
        raise InvalidArgumentError(f"unknown table {table!r}")
    schema = arrow_schema(fields)
    location = Path(path) / table
    if not location.exists():
        raise InvalidArgumentError(f"{location} does not exist")
    return ds.dataset(location, format="parquet", schema=schema).to_table()


def write_audit_parquet(
    out_dir: str | os.PathLike[str], table: str, batches: Iterable[pa.Table | Mapping[str, Sequence[Any]]]
) -> int:
    """Write an audit table's Parquet copy (``<out>/<table>/part-*.parquet``); returns the row count."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = arrow_schema(AUDIT_TABLES[table])
    target = Path(out_dir) / table
    target.mkdir(parents=True, exist_ok=False)
    rows = 0
    with pq.ParquetWriter(target / "part-00000.parquet", schema, compression="zstd") as writer:
        for batch in batches:
            if isinstance(batch, pa.Table):
                data = batch.select(schema.names).cast(schema)
            else:
                data = pa.table({n: pa.array(batch[n], type=schema.field(n).type) for n in schema.names})
                data = data.cast(schema)
            writer.write_table(data)
            rows += data.num_rows
    return rows


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


def dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True)
