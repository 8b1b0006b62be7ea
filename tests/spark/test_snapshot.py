"""The snapshot format: pyarrow writer, atomic commit, versioned reads, checked API rows (no Spark)."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from kafka_controller.domain.errors import InvalidArgumentError
from kafka_controller.reconcile import snapshot as S
from kafka_controller.reconcile import snapshot_schema as SS

META = {
    "snapshot_id": "s1",
    "taken_ms": 1_700_000_000_000,
    "source": "test",
    "cluster_id": None,
    "controller_id": 1,
    "controller_epoch": 3,
    "controller_epoch_zk_version": 3,
    "broker_views": False,
    "controller_view": False,
    "controller_view_error": None,
    "default_min_insync_replicas": 1,
    "default_unclean_leader_election_enable": False,
}
ZK_ROW = {
    "topic": "t",
    "partition": 0,
    "topic_id": None,
    "replicas": [1, 2],
    "adding_replicas": [],
    "removing_replicas": [],
    "leader": 1,
    "leader_epoch": 4,
    "isr": [1, 2],
    "controller_epoch": 3,
    "zk_version": 5,
    "state_error": None,
    "queued_for_deletion": False,
}


def _columns(table: str, rows: list[dict]) -> dict[str, list]:
    return {f.name: [r[f.name] for r in rows] for f in SS.TABLES[table]}


def test_round_trip_keeps_every_table_and_declared_types(tmp_path: Path) -> None:
    out = tmp_path / "snap"
    with S.SnapshotWriter(out) as w:
        w.write("zk_partitions", _columns("zk_partitions", [ZK_ROW]))
        w.write("zk_partitions", _columns("zk_partitions", [{**ZK_ROW, "partition": 1, "leader": -1}]))
        w.commit(META)
    assert sorted(p.name for p in out.iterdir()) == sorted(SS.TABLES)
    assert not list(tmp_path.glob(".snap.tmp-*"))
    meta = S.read_meta(out)
    assert meta["schema_version"] == SS.SNAPSHOT_VERSION and meta["controller_epoch"] == 3
    zk = S.read_arrow(out, "zk_partitions")
    assert zk.schema == SS.arrow_schema(SS.TABLES["zk_partitions"])
    assert [r["leader"] for r in zk.to_pylist()] == [1, -1]
    assert S.read_arrow(out, "broker_replicas").num_rows == 0  # unwritten tables exist, empty


def test_refuses_a_non_empty_directory_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "snap").mkdir()
    (tmp_path / "snap" / "x").write_text("keep me")
    with pytest.raises(InvalidArgumentError, match="already exists and is not empty") as e:
        S.SnapshotWriter(tmp_path / "snap")
    assert "\n" not in str(e.value)
    assert (tmp_path / "snap" / "x").read_text() == "keep me"


def test_a_failed_export_leaves_nothing_behind(tmp_path: Path) -> None:
    out = tmp_path / "snap"
    with pytest.raises(RuntimeError), S.SnapshotWriter(out) as w:
        w.write("zk_partitions", _columns("zk_partitions", [ZK_ROW]))
        raise RuntimeError("store went away")
    assert list(tmp_path.iterdir()) == []


def test_a_mistyped_column_is_one_line_and_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "snap"
    with pytest.raises(InvalidArgumentError, match="zk_partitions") as e, S.SnapshotWriter(out) as w:
        w.write("zk_partitions", _columns("zk_partitions", [{**ZK_ROW, "leader": "one"}]))
    assert "\n" not in str(e.value)
    assert list(tmp_path.iterdir()) == []


def test_bad_meta_is_refused_before_the_rename(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="taken_ms"), S.SnapshotWriter(tmp_path / "s") as w:
        w.commit({k: v for k, v in META.items() if k != "taken_ms"})
    assert list(tmp_path.iterdir()) == []


def test_readers_refuse_newer_versions_and_missing_tables(tmp_path: Path) -> None:
    out = tmp_path / "snap"
    with S.SnapshotWriter(out) as w:
        w.commit(META)
    table = pq.read_table(out / "meta").to_pylist()
    table[0]["schema_version"] = SS.SNAPSHOT_VERSION + 1
    import pyarrow as pa

    pq.write_table(
        pa.Table.from_pylist(table, schema=SS.arrow_schema(SS.TABLES["meta"])),
        out / "meta" / "part-00000.parquet",
    )
    with pytest.raises(
        InvalidArgumentError, match=f"schema version {SS.SNAPSHOT_VERSION + 1} is not supported"
    ):
        S.read_meta(out)
    import shutil

    shutil.rmtree(out / "brokers")
    with pytest.raises(InvalidArgumentError, match=r"missing tables \['brokers'\]"):
        S.read_meta(out)
    with pytest.raises(InvalidArgumentError, match="does not exist"):
        S.read_meta(tmp_path / "nowhere")


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({k: v for k, v in ZK_ROW.items() if k != "isr"}, "missing field 'isr'"),
        ({**ZK_ROW, "replicas": None}, "'replicas' must not be null"),
        ({**ZK_ROW, "isr": [1, "2"]}, "'isr' must be list<int32>"),
        ({**ZK_ROW, "leader": True}, "'leader' must be int32"),
        ({**ZK_ROW, "queued_for_deletion": 1}, "'queued_for_deletion' must be bool"),
    ],
)
def test_check_row_names_the_field(row: dict, message: str) -> None:
    with pytest.raises(InvalidArgumentError, match=message):
        SS.check_row("zk_partitions", row, "row 7")


def test_schema_text_and_spark_ddl_cover_every_column() -> None:
    text = SS.describe_schema()
    for table, fields in {**SS.TABLES, **SS.AUDIT_TABLES}.items():
        assert f"{table}:" in text
        ddl = SS.spark_ddl(fields)
        assert ddl.count("`") == 2 * len(fields)
    assert "`isr` ARRAY<INT>" in SS.spark_ddl(SS.TABLES["zk_partitions"])
