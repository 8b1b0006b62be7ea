"""DAG runs (``dag.test()`` against an embedded cluster) whose output must say what happened: a
broker killed in the middle of a rolling restart stops the run at once, named; a misspelled conf
key is refused, not run as a dry run; the kill drill's log line carries the numbers of the audit's
failover row; the rolling restart takes ``demote`` from its conf.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.airflow.cluster_env import Env, cluster_env, run_in_thread

pytestmark = [pytest.mark.airflow, pytest.mark.zk, pytest.mark.integration, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def env(zk_server, airflow_db, tmp_path_factory) -> Iterator[Env]:
    with cluster_env(zk_server, tmp_path_factory.mktemp("truth"), "/kc-airflow-truth") as e:
        yield e


class Lines(logging.Handler):
    """Stands in for the task log of the operators whose ``log`` a test swaps for its logger."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []
        self.logger = logging.getLogger("tests.task_log.runs")
        self.logger.setLevel(logging.INFO)
        self.logger.addHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture
def task_log(monkeypatch: pytest.MonkeyPatch) -> Iterator[Lines]:
    from kafka_controller.airflow.operators.cluster import ControllerFailoverDrillOperator

    handler = Lines()
    # dag.test runs the task in this process: the operator logs to the test's logger
    monkeypatch.setattr(ControllerFailoverDrillOperator, "log", property(lambda _self: handler.logger))
    try:
        yield handler
    finally:
        handler.logger.removeHandler(handler)


def _restore(env: Env) -> None:
    """Start whatever a stopped run left down, then wait for a whole, healthy cluster."""
    for b in env.cluster.broker_ids:
        if not env.lifecycle.is_running(b) and b not in env.cluster.registered():
            env.lifecycle.start(b, 60)
    env.healthy()


def test_a_misspelled_conf_key_is_refused_with_the_known_ones(env: Env) -> None:
    env.healthy()
    leaders = {str(p.topic_partition): p.leader for p in env.view().partitions}
    run, tis = env.run("preferred_leader_rebalance", {"dryrun": False})
    assert run.state == "failed" and tis["preferred_election"][0] == "failed"
    ops = env.operations(run)
    assert "preferred_leader_election" not in ops  # refused before anything was written
    error = ops["airflow_task:preferred_election"]["error"]
    assert "unknown parameter 'dryrun' (did you mean 'dry_run'?)" in error, error
    assert "its parameters are: dry_run, partitions, reason, requester, topics" in error, error
    assert {str(p.topic_partition): p.leader for p in env.view().partitions} == leaders


def test_a_broker_killed_during_a_rolling_restart_is_named_at_once(env: Env) -> None:
    """Broker ``first`` is being restarted when ``victim`` is SIGKILLed: the run fails within
    seconds naming ``victim``, not after the catch-up timeout blaming ``first``."""
    env.healthy()
    controller, _ = env.cluster.controller()
    first, victim = (b for b in (1, 2, 3) if b != controller)
    conf = {"dry_run": False, "brokers": [first, victim], "catch_up_timeout_s": 600}

    def kill_mid_run() -> float:  # dag.test must have the main thread (it sets signal handlers)
        env.wait(lambda: first not in env.cluster.registered(), f"broker {first} to stop", 120)
        env.lifecycle.kill(victim, 30)
        return time.monotonic()

    killer, killed = run_in_thread(kill_mid_run)
    try:
        run, tis = env.run("rolling_controlled_shutdown", conf)
        ended_at = time.monotonic()
        killer.join(60)
        assert "error" not in killed, killed
        took = ended_at - killed["result"]
        assert run.state == "failed" and tis["rolling_restart"][0] == "failed"
        assert took < 60, f"the run took {took:.0f}s after the kill (the catch-up timeout is 600s)"
        row = env.operations(run)["rolling_restart"]
        assert row["status"] == "failed"
        assert row["error"].startswith(f"BrokerLostError: broker {victim} left the cluster during the ")
        assert f"rolling restart, at broker {first} (1/2); stopped there" in row["error"], row["error"]
        assert env.store.get_entity_config("brokers", "<default>") == {}  # the rebalance pause undone
    finally:
        killer.join(120)
        _restore(env)


def test_the_kill_drills_log_line_carries_the_failover_rows_numbers(env: Env, task_log: Lines) -> None:
    from kafka_controller.audit.reports import build_report

    env.healthy()
    before_id, before_epoch = env.cluster.controller()
    run, tis = env.run("controller_failover_drill", {"dry_run": False, "method": "kill", "timeout_s": 90})
    assert run.state == "success", tis
    result = tis["failover_drill"][1]
    epoch = result["elected"]["epoch"]
    assert result["resigned"] == {"broker_id": before_id, "epoch": before_epoch}
    rows = build_report(env.audit_url)["sections"]["failover_recovery"]["rows"]
    row = next(r for r in rows if r["controller_epoch"] == epoch)
    assert (row["previous_broker_id"], row["lost_via"], row["lost_ms"]) == (
        before_id,
        "drill",
        result["lost_at_ms"],
    )
    assert result["measured_by"] == "failover_record"
    assert result["offline_at_failover"] == row["offline_partitions"] > 0  # the killed broker led some
    assert result["recovery_ms"] == round(float(row["time_to_recover_ms"]), 1)
    line = next(x for x in task_log.lines if x.startswith("drill result (kill)"))
    assert (
        f"every partition led after {float(row['time_to_recover_ms']):.0f} ms, "
        f"{row['offline_partitions']} partition(s) offline at the failover (the new controller's "
        "failover record in the audit)"
    ) in line, line
    progress = [x for x in task_log.lines if x.startswith("every partition with a live in-sync replica")]
    assert progress and f"{row['offline_partitions']} partition(s) were offline" in progress[-1]
    _restore(env)


def test_the_rolling_restart_takes_demote_from_its_conf(env: Env) -> None:
    env.healthy()
    controller, _ = env.cluster.controller()
    broker = min(b for b in (1, 2, 3) if b != controller)
    run, tis = env.run(
        "rolling_controlled_shutdown",
        {"dry_run": False, "brokers": [broker], "demote": "reorder", "catch_up_timeout_s": 120},
    )
    assert run.state == "success", tis
    result: dict[str, Any] = tis["rolling_restart"][1]
    assert [s["broker_id"] for s in result["steps"]] == [broker]
    assert result["replica_orders_restored"] > 0  # the reorder demotion ran, and was undone
    assert env.operations(run)["rolling_restart"]["parameters"]["demote"] == "reorder"
    view = env.view()  # the original orders are back, and the broker leads what it prefers
    assert view.summary["under_replicated"] == 0
    preferred = [p for p in view.partitions if p.replicas and p.replicas[0] == broker]
    assert preferred and all(p.leader == broker for p in preferred), preferred


def test_a_broker_killed_during_a_reassignment_is_named_at_once(env: Env) -> None:
    """The target broker is paused (nothing can copy to it), then killed: the execute task fails at
    once naming it, without its retries, instead of waiting out the batch timeout."""
    import contextlib
    import os
    import signal

    from airflow.sdk.exceptions import AirflowFailException

    from kafka_controller.airflow.operators.reassignment import ExecuteReassignmentOperator
    from tests.airflow.cluster_env import assignment, context

    env.healthy()
    controller, _ = env.cluster.controller()
    target = max(b for b in (1, 2, 3) if b != controller)  # the controller must keep answering
    first, second = (b for b in (1, 2, 3) if b != target)
    env.cluster.create_topic("doomed", {0: [first, second]})
    env.cluster.wait_topic_healthy("doomed")
    plan = [{"topic": "doomed", "partition": 0, "replicas": [first, target]}]
    op = ExecuteReassignmentOperator(
        task_id="execute", plan=plan, dry_run=False, wait_for_last_batch=True, batch_timeout_s=600
    )
    (pid,) = env.lifecycle.pids(target)
    os.kill(pid, signal.SIGSTOP)  # registered, but it copies nothing: the move must wait
    thread, out = run_in_thread(lambda: op.execute(context("execute")))
    try:
        env.wait(lambda: assignment(env, "doomed")[0].is_being_reassigned or out, "the move to start")
        assert not out, out
        env.lifecycle.kill(target, 30)
        killed_at = time.monotonic()
        thread.join(120)
        took = time.monotonic() - killed_at
        error = out.get("error")
        assert isinstance(error, AirflowFailException), out  # no retry: a lost broker needs a person
        assert took < 60, f"{took:.0f}s after the kill (the batch timeout is 600s)"
        assert str(error).startswith(
            f"broker {target} left the cluster during the reassignment, at batch 1 of 1; stopped there "
            "(1 partition(s) left in flight with the controller, 0 batch(es) not started)"
        ), error
        row = env.operations_by_id(op.operation_id)
        assert row["status"] == "failed" and f"broker {target} left the cluster" in row["error"]
    finally:
        thread.join(120)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)  # a test that failed before the kill leaves no paused broker
        _restore(env)
    env.wait(lambda: not assignment(env, "doomed")[0].is_being_reassigned, "the move to complete", 120)


def test_a_broker_killed_while_the_dag_verifies_a_reassignment_is_named_at_once(env: Env) -> None:
    """The DAG's execute task submits the move and the deferrable verify task waits for it; its
    target broker is paused once the plan is generated (nothing can copy to it), then killed: the
    verify task fails within seconds naming it, instead of waiting out its hour."""
    import contextlib
    import os
    import signal

    from kafka_controller.airflow.audit_queries import list_operations
    from tests.airflow.cluster_env import assignment

    env.healthy()
    controller, _ = env.cluster.controller()
    target = max(b for b in (1, 2, 3) if b != controller)
    first, second = (b for b in (1, 2, 3) if b != target)
    env.cluster.create_topic("stranded", {0: [first, second]})
    env.cluster.wait_topic_healthy("stranded")
    plan = {"version": 1, "partitions": [{"topic": "stranded", "partition": 0, "replicas": [first, target]}]}
    (pid,) = env.lifecycle.pids(target)
    since_ms = int(time.time() * 1000)

    def generated() -> bool:
        rows = list_operations(env.engine, limit=20, since_ms=since_ms, kind="reassignment_generate")
        return any(r["status"] == "succeeded" for r in rows)

    def kill_mid_run() -> float:
        # paused only now: a paused broker's ZooKeeper session lapses after 10 s in this cluster
        env.wait(generated, "the plan to be generated", 120)
        os.kill(pid, signal.SIGSTOP)  # registered, but it copies nothing: the move must wait
        env.wait(lambda: assignment(env, "stranded")[0].is_being_reassigned, "the move to start", 30)
        env.lifecycle.kill(target, 30)
        return time.monotonic()

    killer, killed = run_in_thread(kill_mid_run)
    try:
        run, tis = env.run("partition_reassignment", {"plan": plan, "dry_run": False})
        ended_at = time.monotonic()
        killer.join(60)
        assert "result" in killed, killed
        took = ended_at - killed["result"]
        assert run.state == "failed" and tis["verify"][0] == "failed", tis
        assert took < 60, f"the run took {took:.0f}s after the kill (the verify timeout is an hour)"
        error = env.operations(run)["airflow_task:verify"]["error"]
        assert f"broker {target} left the cluster during the reassignment's verification" in error, error
    finally:
        killer.join(120)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)
        _restore(env)
    env.wait(lambda: not assignment(env, "stranded")[0].is_being_reassigned, "the move to complete", 120)
