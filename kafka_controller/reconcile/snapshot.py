"""The reconciliation snapshot on disk: a writer that renames a complete snapshot into place, checked
readers, and the audit history's Parquet copy. The schema itself (tables, fields, the Arrow and
Spark forms) is ``snapshot_schema``; callers import it from there."""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kafka_controller.domain.errors import InvalidArgumentError
from kafka_controller.reconcile.snapshot_schema import (
    AUDIT_TABLES,
    SNAPSHOT_VERSION,
    TABLES,
    arrow_schema,
    check_row,
)

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["SnapshotWriter", "dumps", "read_arrow", "read_meta", "write_audit_parquet"]


# -- writing -------------------------------------------------------------------------------------
class SnapshotWriter:
    """Writes a snapshot into a fresh temporary directory and renames it into place on ``commit``.

    Nothing appears at ``path`` unless every table was written: a failed export leaves no
    half-snapshot behind. ``write`` may be called many times per table (each call appends one
    row group), so an exporter can stream millions of partitions in bounded memory.
    """

    def __init__(self, path: str | os.PathLike[str], *, overwrite: bool = False) -> None:
        self.path = Path(path)
        if self.path.name in ("", ".", ".."):
            raise InvalidArgumentError(f"snapshot directory {self.path} names no directory of its own")
        if self.path.exists() and not self.path.is_dir():
            raise InvalidArgumentError(f"snapshot directory {self.path} exists and is not a directory")
        if self.path.exists() and any(self.path.iterdir()):
            if not overwrite:
                raise InvalidArgumentError(f"snapshot directory {self.path} already exists and is not empty")
            if not (self.path / "meta").is_dir():  # --overwrite replaces a snapshot, nothing else
                raise InvalidArgumentError(
                    f"snapshot directory {self.path} is not a snapshot (no meta/); not overwriting it"
                )
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
                shutil.rmtree(self.path)  # a snapshot directory, checked in __init__
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
    """Write an audit table's Parquet copy (``<out>/<table>/part-*.parquet``); returns the row count.
    A nullable column a batch does not have (``cluster_id`` of a source that predates it) is null."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = arrow_schema(AUDIT_TABLES[table])
    target = Path(out_dir) / table
    target.mkdir(parents=True, exist_ok=False)
    rows = 0

    def column(batch: Any, name: str, size: int) -> Any:
        field = schema.field(name)
        present = name in batch.column_names if isinstance(batch, pa.Table) else name in batch
        if not present and field.nullable:
            return pa.nulls(size, type=field.type)
        return batch[name] if isinstance(batch, pa.Table) else pa.array(batch[name], type=field.type)

    with pq.ParquetWriter(target / "part-00000.parquet", schema, compression="zstd") as writer:
        for batch in batches:
            size = batch.num_rows if isinstance(batch, pa.Table) else len(next(iter(batch.values()), []))
            data = pa.table({n: column(batch, n, size) for n in schema.names}).cast(schema)
            writer.write_table(data)
            rows += data.num_rows
    return rows


def dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True)
