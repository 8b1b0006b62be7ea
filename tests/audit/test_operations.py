"""Operations: started and finished synchronously, validated, tagged on the transitions they cause."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from kafka_controller.audit.operations import OperationLog
from kafka_controller.audit.reports import build_report
from kafka_controller.audit.writer import AuditWriter
from kafka_controller.domain.errors import InvalidArgumentError
from tests.audit.factories import partition_transition, replica_transition


def test_start_and_finish_keep_every_field(audit_url: str) -> None:
    with OperationLog(audit_url) as log:
        op = log.start_operation(
            "rolling-restart",
            "airflow",
            "monthly patching",
            {"brokers": [1, 2, 3], "active_controller_last": True},
            dry_run=False,
            airflow_dag_id="kafka_rolling_restart",
            airflow_run_id="manual__2025-01-01T00:00:00",
            airflow_task_id="shutdown_broker_1",
        )
        assert uuid.UUID(op).version == 4
        row = log.get_operation(op)
        assert row is not None
        assert (row["kind"], row["requester"], row["reason"], row["status"]) == (
            "rolling-restart", "airflow", "monthly patching", "running",
        )  # fmt: skip
        assert row["parameters"] == {"brokers": [1, 2, 3], "active_controller_last": True}
        assert bool(row["dry_run"]) is False and row["finished_ms"] is None
        assert (row["airflow_dag_id"], row["airflow_run_id"], row["airflow_task_id"]) == (
            "kafka_rolling_restart", "manual__2025-01-01T00:00:00", "shutdown_broker_1",
        )  # fmt: skip
        log.finish_operation(op, "failed", "broker 2 did not rejoin the ISR")
        row = log.get_operation(op)
        assert row is not None
        assert (row["status"], row["error"]) == ("failed", "broker 2 did not rejoin the ISR")
        assert row["finished_ms"] >= row["started_ms"]


def test_dry_run_is_the_default(audit_url: str) -> None:
    with OperationLog(audit_url) as log:
        row = log.get_operation(log.start_operation("preferred-election", "alice", "check"))
        assert row is not None and bool(row["dry_run"]) is True


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"kind": ""}, "bad kind"),
        ({"requester": None}, "bad requester"),
        ({"reason": "   "}, "bad reason"),
        ({"parameters": ["not", "a", "mapping"]}, "must be a mapping"),
        ({"parameters": {"when": object()}}, "not JSON-serialisable"),
        ({"dry_run": "yes"}, "bad dry_run"),
        ({"airflow_dag_id": "x" * 251}, "longer than 250"),
    ],
)
def test_bad_input_is_refused_and_nothing_written(
    audit_url: str, kwargs: dict[str, object], message: str
) -> None:
    args: dict[str, object] = {"kind": "reassign", "requester": "bob", "reason": "why not", **kwargs}
    with OperationLog(audit_url) as log:
        with pytest.raises(InvalidArgumentError, match=message):
            log.start_operation(**args)  # type: ignore[arg-type]
        assert build_report(audit_url)["empty"]


def test_finish_refuses_unknown_ids_bad_statuses_and_finishing_twice(audit_url: str) -> None:
    with OperationLog(audit_url) as log:
        op = log.start_operation("reassign", "bob", "move")
        with pytest.raises(InvalidArgumentError, match="bad status 'done'"):
            log.finish_operation(op, "done")
        with pytest.raises(InvalidArgumentError, match="unknown operation id"):
            log.finish_operation(str(uuid.uuid4()), "succeeded")
        log.finish_operation(op, "cancelled")
        with pytest.raises(InvalidArgumentError, match=r"already finished \(cancelled\)"):
            log.finish_operation(op, "succeeded")
        row = log.get_operation(op)
        assert row is not None and row["status"] == "cancelled"


def test_transitions_carry_their_operation(audit_url: str, tmp_path: Path) -> None:
    with OperationLog(audit_url) as log:
        op = log.start_operation("elect-preferred", "alice", "after bounce")
        other = log.start_operation("elect-preferred", "alice", "again")
    with AuditWriter(audit_url, spool_dir=tmp_path / "spool") as w:
        w.record([partition_transition(i, operation_id=op) for i in range(7)])
        w.record([replica_transition(i, operation_id=op, outcome="failed", error="x") for i in range(3)])
        w.record([partition_transition(100 + i) for i in range(5)])  # no operation
        assert w.flush(60)
    rows = build_report(audit_url, operation_id=op)["sections"]["transitions_per_operation"]["rows"]
    assert [
        (r["operation_id"], r["partition_transitions"], r["replica_transitions"], r["failed"]) for r in rows
    ] == [(op, 7, 3, 3)]
    assert other not in {r["operation_id"] for r in rows}


def test_finish_keeps_the_result_bounded(audit_url: str) -> None:
    from kafka_controller.audit.operations import RESULT_LIMIT_BYTES

    with OperationLog(audit_url) as log:
        small = log.start_operation("failover-drill", "alice", "drill", None, False)
        log.finish_operation(small, "succeeded", None, {"elected": {"broker_id": 2}, "recovery_ms": 6123.4})
        big = log.start_operation("rolling-restart", "alice", "plan", None, True)
        log.finish_operation(big, "succeeded", None, {"plan": ["x" * 100] * RESULT_LIMIT_BYTES, "n": 1})
        assert (log.get_operation(small) or {})["result"] == {
            "elected": {"broker_id": 2},
            "recovery_ms": 6123.4,
        }
        kept = (log.get_operation(big) or {})["result"]
        assert kept["truncated"] is True and kept["keys"] == ["n", "plan"]
        assert kept["bytes"] > RESULT_LIMIT_BYTES


def test_a_recorded_loss_is_one_event_and_bad_input_is_refused(audit_url: str) -> None:
    with OperationLog(audit_url) as log:
        log.record_controller_lost(2, 7, 1_700_000_000_000, "kill by a failover drill")
        log.record_controller_lost(2, 7, 1_700_000_000_000, "kill by a failover drill")  # once only
        with pytest.raises(InvalidArgumentError, match="bad controller_epoch"):
            log.record_controller_lost(2, -1, 1_700_000_000_000, "x")
    report = build_report(audit_url)
    assert report["summary"]["controller_events"] == 1
