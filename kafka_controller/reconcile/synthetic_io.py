"""Writing a synthetic fleet (``synthetic_fleet.Fleet``) as a snapshot and an audit history, vectorised.

Everything is built column at a time with numpy and written in chunks of partitions through
pyarrow's ``ParquetWriter``, so memory stays bounded at millions of partitions. Padded matrices
(-1 = empty slot, always trailing) become Arrow list arrays without a Python loop.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from kafka_controller.reconcile import snapshot_schema as SS

if TYPE_CHECKING:
    from kafka_controller.reconcile.synthetic_fleet import Fleet

TAKEN_MS = 1_700_000_000_000
HOUR_MS = 3_600_000
FINAL_EPOCH = 2
CONTROLLER_ID = 1
PARTITION, REPLICA = "partition", "replica"
_AUDIT_TABLE = {PARTITION: "partition_transitions", REPLICA: "replica_transitions"}
#: One partition's audit history: (table, from_state, to_state, replica position for replica rows).
TEMPLATE = (
    (PARTITION, "NonExistentPartition", "NewPartition", -1),
    (REPLICA, "NonExistentReplica", "NewReplica", 0),
    (REPLICA, "NonExistentReplica", "NewReplica", 1),
    (REPLICA, "NonExistentReplica", "NewReplica", 2),
    (PARTITION, "NewPartition", "OnlinePartition", -1),
    (REPLICA, "NewReplica", "OnlineReplica", 0),
    (REPLICA, "NewReplica", "OnlineReplica", 1),
    (REPLICA, "NewReplica", "OnlineReplica", 2),
    (PARTITION, "OnlinePartition", "OnlinePartition", -1),
    (PARTITION, "OnlinePartition", "OnlinePartition", -1),
)
ROWS_PER_PARTITION = len(TEMPLATE)


def _list(mat: np.ndarray) -> pa.ListArray:
    present = mat != -1
    offsets = np.zeros(len(mat) + 1, dtype=np.int32)
    np.cumsum(present.sum(axis=1), out=offsets[1:])
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(mat[present].astype(np.int32)))


def _int(values: np.ndarray, null: np.ndarray | None = None) -> pa.Array:
    return pa.array(values, type=pa.int32(), mask=null)


def _topics(f: Fleet, idx: np.ndarray) -> pa.Array:
    return pa.array(np.char.add("t", np.char.zfill((idx // f.ppt).astype(str), 6)))


def _text(parts: list[np.ndarray]) -> np.ndarray:
    """``[a,b,c]`` JSON text from integer columns, vectorised."""
    out = np.char.add("[", parts[0].astype(str))
    for p in parts[1:]:
        out = np.char.add(np.char.add(out, ","), p.astype(str))
    return np.char.add(out, "]")


class _Tables:
    def __init__(self, root: Path, tables: dict[str, tuple[SS.Field, ...]]) -> None:
        root.mkdir(parents=True)
        self.schemas = {t: SS.arrow_schema(f) for t, f in tables.items()}
        self.writers: dict[str, pq.ParquetWriter] = {}
        self.root = root

    def write(self, table: str, columns: dict[str, Any]) -> None:
        """A nullable column the generator does not make (an audit row's ``cluster_id``) is null."""
        schema = self.schemas[table]
        size = len(next(iter(columns.values())))
        data = pa.table(
            {
                n: columns[n]
                if n in columns or not schema.field(n).nullable
                else pa.nulls(size, schema.field(n).type)
                for n in schema.names
            }
        ).cast(schema)
        if table not in self.writers:
            (self.root / table).mkdir()
            self.writers[table] = pq.ParquetWriter(self.root / table / "part-00000.parquet", schema)
        self.writers[table].write_table(data)

    def close(self) -> None:
        for t, schema in self.schemas.items():
            if t not in self.writers and t != "meta":
                self.write(t, {n: pa.array([], type=schema.field(n).type) for n in schema.names})
        for w in self.writers.values():
            w.close()


def write_snapshot(f: Fleet, root: Path, chunk: int) -> None:
    out = _Tables(root, SS.TABLES)
    b = f.brokers
    ids = np.arange(1, b + 1, dtype=np.int32)
    out.write(
        "brokers",
        {
            "broker_id": ids,
            "broker_epoch": (ids + 100).astype(np.int64),
            "host": [f"broker-{i}" for i in ids],
            "port": np.full(b, 9092, dtype=np.int32),
            "rack": [f"rack-{i % 3}" for i in ids],
            "view_reported": np.ones(b, dtype=bool),
        },
    )
    for a in range(0, f.n, chunk):
        idx = np.arange(a, min(f.n, a + chunk))
        _write_partitions(f, out, idx)
        _write_views(f, out, idx)
    if f.reassignments:
        out.write(
            "reassignments",
            {
                "topic": [f.topic(r["i"]) for r in f.reassignments],
                "partition": [r["i"] % f.ppt for r in f.reassignments],
                "target_replicas": [r["target"] for r in f.reassignments],
                "source": ["topic_znode"] * len(f.reassignments),
                "started_ms": pa.nulls(len(f.reassignments), pa.int64()),
            },
        )
    configs = list(f.configs) + [
        (f"t{t:06d}", "retention.ms", "604800000") for t in range(0, f.n // f.ppt, 10)
    ]
    out.write("topic_configs", {k: [c[i] for c in configs] for i, k in enumerate(("topic", "key", "value"))})
    out.write(
        "meta",
        {
            k: [v]
            for k, v in {
                "schema_version": SS.SNAPSHOT_VERSION,
                "snapshot_id": f"synthetic-{f.n}",
                "taken_ms": TAKEN_MS,
                "source": "synthetic",
                "cluster_id": "synthetic",
                "controller_id": CONTROLLER_ID,
                "controller_epoch": 1,
                "controller_epoch_zk_version": 1,
                "broker_views": True,
                "controller_view": True,
                "controller_view_error": None,
                "default_min_insync_replicas": 1,
                "default_unclean_leader_election_enable": False,
            }.items()
        },
    )
    out.close()


def _write_partitions(f: Fleet, out: _Tables, idx: np.ndarray) -> None:
    m = len(idx)
    topics, part = _topics(f, idx), (idx % f.ppt).astype(np.int32)
    rep, add, rem, isr = _list(f.rep[idx]), _list(f.adding[idx]), _list(f.removing[idx]), _list(f.isr[idx])
    common = {
        "topic": topics,
        "partition": part,
        "replicas": rep,
        "adding_replicas": add,
        "removing_replicas": rem,
        "isr": isr,
        "controller_epoch": np.ones(m, dtype=np.int32),
        "zk_version": np.full(m, 3, dtype=np.int32),
        "queued_for_deletion": np.zeros(m, dtype=bool),
    }
    out.write(
        "zk_partitions",
        {
            **common,
            "topic_id": pa.nulls(m, pa.string()),
            "leader": f.leader[idx],
            "leader_epoch": f.epoch[idx],
            "state_error": pa.nulls(m, pa.string()),
        },
    )
    out.write(
        "controller_partitions",
        {
            **common,
            "state": pa.array(f.c_state[idx], pa.string()),
            "leader": f.c_leader[idx],
            "leader_epoch": f.c_epoch[idx],
        },
    )
    # controller replica states: Online, New while being added, Offline on unregistered brokers
    pos = np.nonzero(f.rep[idx] != -1)
    rows, brokers = idx[pos[0]], f.rep[idx][pos]
    state = np.where(brokers > f.brokers, "OfflineReplica", "OnlineReplica").astype(object)
    state[brokers == f.adding[rows, 0]] = "NewReplica"
    out.write(
        "controller_replicas",
        {
            "topic": _topics(f, rows),
            "partition": (rows % f.ppt).astype(np.int32),
            "replica": brokers.astype(np.int32),
            "state": pa.array(state, pa.string()),
        },
    )


def _write_views(f: Fleet, out: _Tables, idx: np.ndarray) -> None:
    pos = np.nonzero((f.rep[idx] != -1) & (f.rep[idx] <= f.brokers))
    rows, brokers = idx[pos[0]], f.rep[idx][pos].astype(np.int32)
    leader, epoch = f.leader[rows], f.epoch[rows].copy()
    leo = f.leo[rows].copy()
    hw = leo - rows % 7
    for (i, b), change in f.view_overrides.items():
        hit = np.flatnonzero((rows == i) & (brokers == b))
        for name, value in change.items():
            {"leader_epoch": epoch, "log_end_offset": leo, "high_watermark": hw}[name][hit] = value
    m = len(rows)
    out.write(
        "broker_replicas",
        {
            "broker_id": brokers,
            "broker_epoch": (brokers + 100).astype(np.int64),
            "topic": _topics(f, rows),
            "partition": (rows % f.ppt).astype(np.int32),
            "leader": leader,
            "leader_epoch": epoch,
            "isr": _list(f.isr[rows]),
            "zk_version": np.full(m, 3, dtype=np.int32),
            "replicas": _list(f.rep[rows]),
            "is_leader": brokers == leader,
            "log_end_offset": leo,
            "high_watermark": hw,
        },
    )


def write_audit(f: Fleet, root: Path, chunk: int) -> int:
    out = _Tables(root, SS.AUDIT_TABLES)
    total_rows = f.n * ROWS_PER_PARTITION
    counts = {PARTITION: 0, REPLICA: 0}
    for a in range(0, f.n, chunk):
        idx = np.arange(a, min(f.n, a + chunk))
        for table, cols in _audit_chunk(f, idx, total_rows).items():
            out.write(_AUDIT_TABLE[table], cols)
            counts[table] += len(cols["id"])
    for j, row in enumerate(f.audit_extra):
        i, table = row["i"], row["table"]
        counts[table] += 1
        cols = {
            "id": [counts[table]],
            "controller_id": [CONTROLLER_ID],
            "controller_epoch": [1],
            "sequence": [total_rows + j + 1],
            "topic": [f.topic(i)],
            "partition": [i % f.ppt],
            "replica": [row["replica"]],
            "from_state": [row["from_state"]],
            "to_state": [row["to_state"]],
            "leader_before": [None],
            "leader_after": [row["leader_after"]],
            "isr_before": [None],
            "isr_after": [row["isr_after"]],
            "leader_epoch_before": [None],
            "leader_epoch_after": [row["leader_epoch_after"]],
            "outcome": ["ok"],
            "timestamp_ms": [row["timestamp_ms"]],
            "unclean": [False],
        }
        out.write(_AUDIT_TABLE[table], cols)
    out.close()
    return counts[PARTITION] + counts[REPLICA]


def _audit_chunk(f: Fleet, idx: np.ndarray, total_rows: int) -> dict[str, dict[str, Any]]:
    m = len(idx)
    r = [f.a_rep[idx, k] for k in range(3)]
    isr0 = _text(r)
    none_i, none_s = np.ones(m, dtype=bool), pa.nulls(m, pa.string())
    zeros = np.zeros(m, dtype=np.int32)
    # leadership (leader_before, epoch_before, isr_before, leader_after, epoch_after, isr_after) per row
    lead = {
        4: (None, None, None, r[0], zeros, isr0),
        8: (r[0], zeros, isr0, r[1], zeros + 1, _text([r[1], r[2]])),
        9: (r[1], zeros + 1, isr0, f.a_leader[idx], zeros + FINAL_EPOCH, isr0),
    }
    for k in (5, 6, 7):
        lead[k] = (r[0], zeros, isr0, r[0], zeros, isr0)
    topics, part = _topics(f, idx), (idx % f.ppt).astype(np.int32)
    per_table: dict[str, list[dict[str, Any]]] = {PARTITION: [], REPLICA: []}
    p_k = r_k = 0
    for k, (table, frm, to, position) in enumerate(TEMPLATE):
        seq = idx * ROWS_PER_PARTITION + k + 1
        lb, eb, ib, la, ea, ia = lead.get(k, (None,) * 6)
        cols: dict[str, Any] = {
            "controller_id": np.full(m, CONTROLLER_ID, dtype=np.int32),
            "controller_epoch": np.ones(m, dtype=np.int32),
            "sequence": seq,
            "topic": topics,
            "partition": part,
            "from_state": np.full(m, frm, dtype=object),
            "to_state": np.full(m, to, dtype=object),
            "leader_before": _int(zeros, none_i) if lb is None else _int(lb),
            "leader_after": _int(zeros, none_i) if la is None else _int(la.copy()),
            "leader_epoch_before": _int(zeros, none_i) if eb is None else _int(eb),
            "leader_epoch_after": _int(zeros, none_i) if ea is None else _int(ea.copy()),
            "isr_before": none_s if ib is None else pa.array(ib),
            "isr_after": none_s if ia is None else pa.array(ia),
            "outcome": np.full(m, "ok", dtype=object),
            "timestamp_ms": TAKEN_MS - 3 * HOUR_MS + (seq * HOUR_MS) // total_rows,
        }
        if table == PARTITION:
            cols["id"] = idx * 4 + p_k + 1
            cols["unclean"] = np.zeros(m, dtype=bool)
            p_k += 1
        else:
            cols["id"] = idx * 6 + r_k + 1
            cols["replica"] = r[position]
            r_k += 1
        _apply_overrides(f, idx, k, cols)
        per_table[table].append(cols)
    return {t: _concat(parts) for t, parts in per_table.items()}


def _apply_overrides(f: Fleet, idx: np.ndarray, k: int, cols: dict[str, Any]) -> None:
    for (i, kk), change in f.audit_overrides.items():
        if kk != k or not idx[0] <= i <= idx[-1]:
            continue
        at = i - idx[0]
        for name, value in change.items():
            column = cols[name]
            if isinstance(column, pa.Array):
                values = column.to_numpy(zero_copy_only=False).copy()
                values[at] = value
                cols[name] = pa.array(values, type=column.type)
            else:
                column[at] = value


def _concat(parts: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in parts[0]:
        arrays = [p[name] if isinstance(p[name], pa.Array) else pa.array(p[name]) for p in parts]
        common = (
            arrays[0].type
            if not pa.types.is_null(arrays[0].type)
            else next((a.type for a in arrays if not pa.types.is_null(a.type)), pa.null())
        )
        out[name] = pa.concat_arrays([a.cast(common) for a in arrays])
    return out
