"""A killed task's last word: what it cancelled and what it leaves behind (``cancel`` feeds the
``task killed: ...`` line that ``on_kill`` logs). No cluster: the operators' progress is set as
``run`` leaves it at the moment of the kill."""

from __future__ import annotations

import logging
from typing import Any

import pytest

pytestmark = pytest.mark.airflow


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def _killed(op: Any, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """``on_kill`` as Airflow calls it, with the task log captured and no audit store to reach."""
    handler = Lines()
    logger = logging.getLogger(f"tests.kill.{op.task_id}")
    logger.setLevel(logging.INFO)
    logger.addHandler(handler)
    monkeypatch.setattr(type(op), "log", property(lambda _self: logger))
    monkeypatch.setattr(op, "_finish", lambda *a, **k: None)
    op.operation_id = "op-1"
    op.on_kill()
    return handler.lines


def test_a_killed_rolling_restart_says_which_brokers_are_done_and_which_are_left(monkeypatch) -> None:
    from kafka_controller.airflow.operators.cluster import RollingRestartOperator

    op = RollingRestartOperator(task_id="rolling_restart", dry_run=False)
    op._order, op._done = [2, 3, 1], {2}
    resumed: list[Any] = []
    op._paused = ("true",)
    monkeypatch.setattr(
        op,
        "_cluster",
        type(
            "Hook",
            (),
            {
                "resume_auto_rebalance": resumed.append,
                "cancel": lambda self: None,
                "close": lambda self: None,
            },
        )(),
    )
    assert _killed(op, monkeypatch)[-1] == (
        "task killed: stopped the rolling restart; restarted: [2], left: [3, 1]; broker 3 was being "
        "restarted: it may be stopped or not yet back in every ISR (check `kafka-controller cluster "
        "status`, start it through the lifecycle backend); auto leader rebalance restored; "
        "operation op-1 marked cancelled"
    )
    assert resumed == ["true"]  # the value the pause replaced is put back


def test_a_killed_kill_drill_says_the_broker_it_killed_may_be_down(monkeypatch) -> None:
    from kafka_controller.airflow.operators.cluster import ControllerFailoverDrillOperator

    op = ControllerFailoverDrillOperator(task_id="failover_drill", dry_run=False, method="kill")
    op._method = "kill"
    monkeypatch.setattr(
        op,
        "_audit",
        type("Audit", (), {"record_controller_lost": lambda *a: None, "close": lambda self: None})(),
    )
    op._lost(3, 7, 1_700_000_000_000, "kill by a failover drill")
    assert _killed(op, monkeypatch)[-1] == (
        "task killed: stopped the drill; left: broker 3, killed by it, may not be running again (check "
        "`kafka-controller cluster status`; start it through the lifecycle backend); operation op-1 "
        "marked cancelled"
    )


def test_a_task_with_nothing_in_flight_says_so(monkeypatch) -> None:
    from kafka_controller.airflow.operators.elections import PreferredLeaderElectionOperator

    op = PreferredLeaderElectionOperator(task_id="preferred_election", dry_run=False)
    assert _killed(op, monkeypatch)[-1] == (
        "task killed: nothing was in flight to cancel; operation op-1 marked cancelled"
    )
