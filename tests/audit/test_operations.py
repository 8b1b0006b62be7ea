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
