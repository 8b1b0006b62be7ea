"""The exporter and its sources (no Spark): a failover drill on the real state machines, checked with
the pandas baseline, the admin-API hooks, and an export from a real ZooKeeper through the CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from bench import pandas_reconcile
from kafka_controller.broker import apis as A
from kafka_controller.domain.errors import InvalidArgumentError, KafkaControllerError, StoreUnavailableError
from kafka_controller.domain.values import TopicPartition
from kafka_controller.reconcile import export as E
from kafka_controller.reconcile import snapshot as S
from kafka_controller.reconcile import sources as SRC

from . import drill
from .conftest import sqlite_audit_url
from .helpers import finding_keys, query


def _export(d: drill.Drill, out: Path, store: Any, controller: Any) -> E.ExportResult:
    assert d.writer.flush(10), "audit writer did not flush"
    return E.export_snapshot(
        store,
        out,
        broker_source=d.brokers.source(),
        controller_source=controller,
        clock=d.clock,
        source="memory",
    )


def test_drill_during_a_broker_failure_shows_exactly_the_damage(tmp_path: Path) -> None:
    url = sqlite_audit_url(tmp_path)
    d = drill.start(url, tmp_path / "spool")
    drill.fail_broker(d, 1)
    result = _export(
        d, tmp_path / "snap", d.harness.store, SRC.context_controller_source(d.harness.context, 4)
    )
    E.export_audit_history(url, tmp_path / "audit")
    d.writer.close()

    brokers = pq.read_table(result.path / "brokers").to_pylist()
    assert [b["broker_id"] for b in brokers] == [2, 3, 4] and all(b["view_reported"] for b in brokers)
    zk = {(r["topic"], r["partition"]): r for r in pq.read_table(result.path / "zk_partitions").to_pylist()}
    assert len(zk) == len(drill.all_partitions())
    ctx_leaders = drill.leaders(d, drill.all_partitions())
    assert {tp: zk[tp]["leader"] for tp in zk} == {tuple(tp): b for tp, b in ctx_leaders.items()}
    assert result.rows["controller_partitions"] == len(zk) and result.rows["broker_replicas"] > 0

    with_1 = [tp for tp in drill.all_partitions() if 1 in d.harness.context.partition_replica_assignment(tp)]
    preferred_1 = [tp for tp in with_1 if d.harness.context.partition_replica_assignment(tp)[0] == 1]
    expected = [{"kind": "under_replicated", "topic": t, "partition": p, "broker": None} for t, p in with_1]
    expected += [
        {"kind": "not_on_preferred_leader", "topic": t, "partition": p, "broker": 1} for t, p in preferred_1
    ]
    findings, _ = pandas_reconcile.run(result.path, tmp_path / "audit")
    assert finding_keys(findings) == finding_keys(expected)


def test_drill_after_recovery_and_controller_failover_is_clean(tmp_path: Path) -> None:
    url = sqlite_audit_url(tmp_path)
    d = drill.start(url, tmp_path / "spool")
    drill.fail_broker(d, 1)
    drill.recover_broker(d, 1)
    drill.fail_over_controller(d, 3)
    assert d.store is not None
    result = _export(d, tmp_path / "snap", d.store, d.controller_source())
    counts = E.export_audit_history(url, tmp_path / "audit")
    d.writer.close()

    meta = S.read_meta(result.path)
    assert (meta["controller_id"], meta["controller_epoch"]) == (3, 2)
    assert meta["broker_views"] and meta["controller_view"]
    epochs = query(url, "SELECT DISTINCT controller_epoch, controller_id FROM replica_transitions ORDER BY 1")
    assert epochs == [
        {"controller_epoch": 1, "controller_id": 4},
        {"controller_epoch": 2, "controller_id": 3},
    ]
    assert counts["partition_transitions"] > 0 and counts["replica_transitions"] > 0
    assert all(
        b == 1
        for tp, b in drill.leaders(d, drill.all_partitions()).items()
        if d.context and d.context.partition_replica_assignment(tp)[0] == 1
    )
    views = pq.read_table(result.path / "broker_replicas").to_pylist()
    assert {v["broker_id"] for v in views} == set(drill.BROKERS)
    assert max(v["high_watermark"] for v in views) > 0, "replication moved no high watermark"
    findings, _ = pandas_reconcile.run(result.path, tmp_path / "audit")
    assert findings.empty, findings.to_dict("records")


def test_controller_context_json_round_trips_through_the_hook(tmp_path: Path) -> None:
    d = drill.start(sqlite_audit_url(tmp_path), tmp_path / "spool")
    d.writer.close()
    ctx = d.harness.context
    doc = json.loads(json.dumps(SRC.describe_controller_context(ctx, 4)))
    view = SRC.describe_controller_context_source(lambda: doc)()
    direct = SRC.context_controller_source(ctx, 4)()
    assert (view.controller_id, view.epoch, view.partitions, view.replicas) == (
        4,
        ctx.epoch,
        direct.partitions,
        direct.replicas,
    )
    with pytest.raises(InvalidArgumentError, match="bad or missing field 'partitions'"):
        SRC.controller_view_from_json({k: v for k, v in doc.items() if k != "partitions"})
    doc["partitions"][2]["leader"] = "2"
    with pytest.raises(
        InvalidArgumentError, match="controller_partitions row 2: field 'leader' must be int32"
    ):
        SRC.controller_view_from_json(doc)
    with pytest.raises(InvalidArgumentError, match="unsupported version 7"):
        SRC.controller_view_from_json({**doc, "version": 7})


def test_broker_hooks_parse_json_and_the_admin_api(tmp_path: Path) -> None:
    row = {
        "topic": "t",
        "partition": 0,
        "leader": 1,
        "leader_epoch": 3,
        "isr": [1, 2],
        "zk_version": 4,
        "replicas": [1, 2],
        "is_leader": True,
        "log_end_offset": 10,
        "high_watermark": 9,
    }
    docs = {1: {"version": 1, "broker_id": 1, "broker_epoch": 77, "replicas": [row]}, 2: None}
    views = list(SRC.describe_replica_states_source(docs.get)([1, 2, 3]))
    assert [(v.broker_id, v.broker_epoch, v.replicas) for v in views] == [(1, 77, [row])]
    bad = {"version": 1, "broker_id": 1, "replicas": [{**row, "is_leader": "yes"}]}
    with pytest.raises(InvalidArgumentError, match="broker 1 row 0: field 'is_leader' must be bool"):
        list(SRC.describe_replica_states_source(lambda _b: bad)([1]))

    class Client:
        def describe_replicas(self, broker_id: int) -> A.DescribeReplicasResponse:
            if broker_id == 2:
                raise KafkaControllerError("broker 2 unreachable")
            info = A.ReplicaInfo("t", 0, 1, 3, (1, 2), 4, (1, 2), broker_id == 1, 10, 9)
            return A.DescribeReplicasResponse("NONE", broker_id, 100 + broker_id, 5, (info,))

    views = list(SRC.admin_broker_source(Client())([1, 2, 3]))
    assert [(v.broker_id, v.broker_epoch) for v in views] == [(1, 101), (3, 103)]
    assert views[0].replicas == [row] and views[1].replicas[0]["is_leader"] is False


def test_a_corrupt_topic_is_skipped_and_reported(tmp_path: Path) -> None:
    d = drill.start(sqlite_audit_url(tmp_path), tmp_path / "spool")
    d.writer.close()
    d.harness.store.session.set_data("/brokers/topics/events", b"{not json")
    result = E.export_snapshot(d.harness.store, tmp_path / "snap", clock=d.clock)
    assert list(result.skipped_topics) == ["events"]
    topics = {r["topic"] for r in pq.read_table(result.path / "zk_partitions").to_pylist()}
    assert topics == {"orders", "audit"}
    assert not S.read_meta(result.path)["broker_views"]


def test_an_unavailable_store_writes_nothing(tmp_path: Path) -> None:
    d = drill.start(sqlite_audit_url(tmp_path), tmp_path / "spool")
    d.writer.close()
    d.harness.store.disconnect()
    with pytest.raises(StoreUnavailableError):
        E.export_snapshot(d.harness.store, tmp_path / "snap")
    assert not [p for p in tmp_path.iterdir() if "snap" in p.name]


def test_export_audit_history_refuses_bad_targets(tmp_path: Path) -> None:
    url = sqlite_audit_url(tmp_path)
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("")
    with pytest.raises(InvalidArgumentError, match="not empty"):
        E.export_audit_history(url, tmp_path / "full")
    from kafka_controller.audit.engine import AuditStoreError

    with pytest.raises(AuditStoreError, match="no audit database"):
        E.export_audit_history(f"sqlite:///{tmp_path / 'none.db'}", tmp_path / "out")
    assert E.export_audit_history(url, tmp_path / "empty") == {
        "partition_transitions": 0,
        "replica_transitions": 0,
    }


@pytest.mark.zk
def test_cli_exports_a_snapshot_from_real_zookeeper(zk_connect: str, tmp_path: Path, capsys: Any) -> None:
    from kafka_controller.cli.main import main
    from kafka_controller.domain.values import (
        Broker,
        EndPoint,
        LeaderAndIsr,
        LeaderIsrAndControllerEpoch,
        ReplicaAssignment,
    )
    from kafka_controller.zk.kazoo_backend import KazooMetadataStore

    store = KazooMetadataStore(zk_connect)
    try:
        epoch, version = store.register_controller_and_increment_controller_epoch(1)
        for b in (1, 2, 3):
            store.register_broker(Broker(b, (EndPoint("localhost", 9090 + b),)))
        store.create_topic(
            "t",
            {0: ReplicaAssignment.of([1, 2]), 1: ReplicaAssignment.of([2, 3])},
            {"min.insync.replicas": "2"},
        )
        states = {TopicPartition("t", 0): LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 0, (1, 2), 0), epoch)}
        store.create_partition_states(states, version)
        store.create_delete_topic_path("t")
        rc = main(["reconcile", "export", "--zookeeper", zk_connect, "--out", str(tmp_path / "snap")])
        out = json.loads(capsys.readouterr().out)
    finally:
        store.close()
    assert rc == 0 and out["rows"]["zk_partitions"] == 2
    zk = sorted(pq.read_table(tmp_path / "snap" / "zk_partitions").to_pylist(), key=lambda r: r["partition"])
    assert [(r["leader"], r["isr"], r["queued_for_deletion"]) for r in zk] == [
        (1, [1, 2], True),
        (None, None, True),
    ]
    assert pq.read_table(tmp_path / "snap" / "topic_configs").to_pylist() == [
        {"topic": "t", "key": "min.insync.replicas", "value": "2"}
    ]
    meta = S.read_meta(tmp_path / "snap")
    assert (meta["controller_id"], meta["controller_epoch"], meta["source"]) == (
        1,
        epoch,
        f"zookeeper:{zk_connect}",
    )
    rc = main(["reconcile", "export", "--zookeeper", zk_connect, "--out", str(tmp_path / "snap")])
    assert rc == 1 and "already exists" in capsys.readouterr().err
    # Broker 1 is registered as the controller, but nothing listens on its port: the snapshot is
    # still written, without the controller's view, and the output says why.
    argv = ["reconcile", "export", "--zookeeper", zk_connect, "--out", str(tmp_path / "snap2")]
    rc = main([*argv, "--controller-view", "--timeout", "2"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["controller_view"] is False
    assert "DescribeControllerContext: no active controller answered in time" in out["controller_view_error"]
    meta = S.read_meta(tmp_path / "snap2")
    assert (meta["controller_view"], meta["controller_view_error"]) == (False, out["controller_view_error"])


def test_a_custom_source_with_a_bad_row_writes_nothing(tmp_path: Path) -> None:
    d = drill.start(sqlite_audit_url(tmp_path), tmp_path / "spool")
    d.writer.close()

    def brokers(ids: Any) -> Any:
        yield SRC.BrokerView(2, 7, [{"topic": "orders", "partition": 0, "leader": None}])

    with pytest.raises(InvalidArgumentError, match="broker 2 replica row 0: field 'leader' must not be null"):
        E.export_snapshot(d.harness.store, tmp_path / "snap", broker_source=brokers)
    assert not [p for p in tmp_path.iterdir() if "snap" in p.name]


# -- the controller's view from the DescribeControllerContext API ------------------------------------
class DescribingClient:
    """An ``AdminClient`` stand-in: answers DescribeControllerContext from a context, or fails."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.timeouts: list[float | None] = []

    def describe_controller_context(
        self, timeout_s: float | None = None
    ) -> A.DescribeControllerContextResponse:
        self.timeouts.append(timeout_s)
        if isinstance(answer := self.answer, Exception):
            raise answer
        return A.DescribeControllerContextResponse("NONE", answer)


def test_the_api_view_is_written_as_the_in_process_one(tmp_path: Path) -> None:
    from kafka_controller.core.context_description import describe_context

    d = drill.start(sqlite_audit_url(tmp_path), tmp_path / "spool")
    d.writer.close()
    ctx = d.harness.context
    client = DescribingClient(json.loads(json.dumps(describe_context(ctx, 4))))
    via_api = _export(d, tmp_path / "api", d.harness.store, SRC.admin_controller_source(client, 7.5))
    direct = _export(d, tmp_path / "direct", d.harness.store, SRC.context_controller_source(ctx, 4))
    assert client.timeouts == [7.5]
    assert via_api.controller_view and via_api.controller_view_error is None
    for table in ("controller_partitions", "controller_replicas", "reassignments"):
        assert (
            pq.read_table(via_api.path / table).to_pylist() == pq.read_table(direct.path / table).to_pylist()
        )
    assert via_api.rows["controller_partitions"] == len(drill.all_partitions())
    assert via_api.rows["controller_replicas"] > len(drill.all_partitions())
    view = SRC.admin_controller_source(client)()
    assert view.checked and view.rows() == SRC.context_controller_source(ctx, 4)().rows()


def test_a_silent_controller_leaves_the_view_out_and_says_why(tmp_path: Path, caplog: Any) -> None:
    from kafka_controller.broker.admin_client import ControllerNotAvailableError

    d = drill.start(sqlite_audit_url(tmp_path), tmp_path / "spool")
    d.writer.close()
    silent = DescribingClient(ControllerNotAvailableError("DescribeControllerContext: no active controller"))
    with caplog.at_level("WARNING", logger="kafka_controller.reconcile.export"):
        result = _export(d, tmp_path / "snap", d.harness.store, SRC.admin_controller_source(silent, 1.0))
    assert not result.controller_view
    assert result.controller_view_error == "DescribeControllerContext: no active controller"
    meta = S.read_meta(result.path)
    assert (meta["controller_view"], meta["controller_view_error"]) == (False, result.controller_view_error)
    assert result.rows["controller_partitions"] == 0 and result.rows["zk_partitions"] == len(
        drill.all_partitions()
    )
    assert "written without the controller's view: DescribeControllerContext" in caplog.text


def test_a_view_from_another_controller_is_left_out(tmp_path: Path) -> None:
    d = drill.start(sqlite_audit_url(tmp_path), tmp_path / "spool")
    d.writer.close()
    result = _export(
        d, tmp_path / "snap", d.harness.store, SRC.context_controller_source(d.harness.context, 9)
    )
    assert not result.controller_view and result.rows["controller_partitions"] == 0
    assert result.controller_view_error is not None
    assert "controller changed during the export" in result.controller_view_error
    assert "ZooKeeper named controller 4 epoch 1, the answer came from controller 9 epoch 1" in (
        result.controller_view_error
    )


def test_a_malformed_api_answer_fails_the_export_and_writes_nothing(tmp_path: Path) -> None:
    from kafka_controller.core.context_description import describe_context
    from kafka_controller.transport.errors import ProtocolError

    d = drill.start(sqlite_audit_url(tmp_path), tmp_path / "spool")
    d.writer.close()
    doc = describe_context(d.harness.context, 4)
    doc["replicas"]["replica"][0] = "4"
    with pytest.raises(
        InvalidArgumentError, match=r"DescribeControllerContext: column replicas\.replica must hold"
    ):
        _export(d, tmp_path / "snap", d.harness.store, SRC.admin_controller_source(DescribingClient(doc)))
    garbled = DescribingClient(ProtocolError("malformed DescribeControllerContext response body: ..."))
    with pytest.raises(InvalidArgumentError, match="malformed DescribeControllerContext answer"):
        _export(d, tmp_path / "snap", d.harness.store, SRC.admin_controller_source(garbled))
    assert not [p for p in tmp_path.iterdir() if "snap" in p.name]


def test_a_version_1_snapshot_is_still_read(tmp_path: Path) -> None:
    """Snapshots written before ``meta.controller_view_error`` existed read it as null."""
    import pyarrow as pa

    d = drill.start(sqlite_audit_url(tmp_path), tmp_path / "spool")
    d.writer.close()
    result = E.export_snapshot(d.harness.store, tmp_path / "snap", clock=d.clock)
    meta_file = result.path / "meta" / "part-00000.parquet"
    old = pq.read_table(meta_file).drop_columns(["controller_view_error"])
    old = old.set_column(0, "schema_version", pa.array([1], pa.int32()))
    pq.write_table(old, meta_file)
    assert S.read_meta(result.path)["schema_version"] == 1
    assert S.read_arrow(result.path, "meta").to_pylist()[0]["controller_view_error"] is None
