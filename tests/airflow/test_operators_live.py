"""The broker and reassignment operators called directly against an embedded cluster: the guard
before a stop, controlled shutdown and start through the lifecycle backend, and a reassignment that
is cancelled when its task is killed, reconnected to when the task retries, and verified by the
deferrable sensor while it cannot finish (one of its brokers is paused).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
from collections.abc import Iterator

import pytest

from kafka_controller.domain.values import ReplicaAssignment
from tests.airflow.cluster_env import (
    Env,
    TaskStore,
    assignment,
    cluster_env,
    context,
    first_event,
    leader,
    run_in_thread,
)

pytestmark = [pytest.mark.airflow, pytest.mark.zk, pytest.mark.integration, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def env(zk_server, airflow_db, tmp_path_factory) -> Iterator[Env]:
    with cluster_env(zk_server, tmp_path_factory.mktemp("live"), "/kc-airflow-live") as e:
        yield e


def test_macros_and_the_hooks_connection_test_read_the_cluster(env: Env, monkeypatch) -> None:
    from kafka_controller.airflow import macros
    from kafka_controller.airflow.hooks.audit import AuditStoreHook
    from kafka_controller.airflow.hooks.cluster import KafkaClusterHook

    env.healthy()
    cid, epoch = env.cluster.controller()
    assert macros.controller() == {"broker_id": cid, "epoch": epoch}
    assert macros.brokers() == [1, 2, 3]
    assert macros.partition_leader("orders", 0) == leader(env, "orders", 0)
    assert macros.partition_leader("no-such-topic", 0) is None
    assert macros.cluster_summary()["partitions"] == len(env.view().partitions)
    assert macros.offline_partitions() == []
    ok, message = KafkaClusterHook().test_connection()
    assert ok and f"controller {cid}" in message and "3 brokers" in message
    assert AuditStoreHook().test_connection()[0]
    nowhere = {
        "conn_type": "kafka_controller_cluster",
        "host": "127.0.0.1:1",
        "extra": {"connection_timeout_ms": 500},
    }
    monkeypatch.setenv("AIRFLOW_CONN_NOWHERE", json.dumps(nowhere))
    ok, message = KafkaClusterHook("nowhere").test_connection()
    assert not ok and "cannot connect to ZooKeeper at 127.0.0.1:1" in message


class TaskLog(logging.Handler):
    """Stands in for the task log: what the operator logged, as text."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []
        self.logger = logging.getLogger("tests.task_log")
        self.logger.setLevel(logging.INFO)
        self.logger.addHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    @property
    def structured(self) -> object:
        """The logger as Airflow's (structlog) task logger is called: keyword arguments allowed."""
        logger = self.logger

        class Structured:
            def __getattr__(self, level: str) -> object:
                method = getattr(logger, level)
                return lambda msg, *args, **_kw: method(msg, *args)

        return Structured()


def test_controlled_shutdown_guard_stop_and_start_operators(env: Env, monkeypatch) -> None:
    from kafka_controller.airflow.operators.cluster import (
        BrokerLifecycleOperator,
        ControlledShutdownOperator,
        RollingRestartOperator,
    )
    from kafka_controller.airflow.runbook_support import RefusedError

    env.healthy()
    controller, _ = env.cluster.controller()
    b = max(x for x in (1, 2, 3) if x != controller)
    assert env.view().leaders_on(b)
    env.cluster.create_topic(f"solo{b}", {0: [b]})
    env.cluster.wait_topic_healthy(f"solo{b}")

    guarded = ControlledShutdownOperator(task_id="cs", broker_id=b, dry_run=False)
    with pytest.raises(RefusedError, match=f"would take 1 partition\\(s\\) offline .*solo{b}-0"):
        guarded.execute(context("cs", dag_id="ops"))
    assert b in env.cluster.registered()
    refused = env.operations_by_id(guarded.operation_id)
    assert refused["status"] == "failed"
    assert refused["cluster_id"] == env.cluster.store.get_cluster_id() is not None  # one store, many clusters

    # dry runs whose real run would be refused fail too, with their plan recorded and logged
    task_log = TaskLog()
    for dry in (
        ControlledShutdownOperator(task_id="cs", broker_id=b),
        RollingRestartOperator(task_id="rr", dry_run=True),
    ):
        monkeypatch.setattr(type(dry), "log", property(lambda _self: task_log.logger))
        with pytest.raises(RefusedError, match=f"dry run: the real run would be refused: .*solo{b}-0"):
            dry.execute(context(dry.task_id, dag_id="ops"))
        row = env.operations_by_id(dry.operation_id)
        assert (row["status"], row["dry_run"]) == ("failed", True)
    assert "DRY RUN (nothing changes) controlled_shutdown" in task_log.text
    assert f"plan controlled-shutdown:{b}:" in task_log.text and "would go OFFLINE" in task_log.text
    assert b in env.cluster.registered()

    plan = BrokerLifecycleOperator(task_id="kill", broker_id=b, action="kill").execute(
        context("kill", dag_id="ops")
    )
    assert plan["dry_run"] is True and plan["plan"][0]["offline_after"] == [f"solo{b}-0"]
    assert b in env.cluster.registered()

    stop = ControlledShutdownOperator(task_id="cs", broker_id=b, allow_offline=True, dry_run=False)
    result = stop.execute(context("cs", dag_id="ops"))
    assert result["still_led_at_stop"] == []  # Kafka's answer skips RF=1 partitions: nowhere to go
    assert b not in env.cluster.registered() and not env.lifecycle.is_running(b)
    offline = [str(p.topic_partition) for p in env.view().partitions if p.offline]
    assert offline == [f"solo{b}-0"]  # everything else moved before the stop

    start = BrokerLifecycleOperator(task_id="start", broker_id=b, action="start", dry_run=False)
    assert start.execute(context("start", dag_id="ops"))["broker_id"] == b
    env.healthy()
    assert leader(env, f"solo{b}", 0) == b


def test_reassignment_is_cancelled_on_kill_resumed_on_retry_and_verified_deferrably(
    env: Env, monkeypatch
) -> None:
    from airflow.sdk.exceptions import TaskDeferred

    from kafka_controller.airflow.hooks.cluster import OperationCancelledError, OperationTimeoutError
    from kafka_controller.airflow.operators.reassignment import ExecuteReassignmentOperator
    from kafka_controller.airflow.sensors import ReassignmentSensor
    from kafka_controller.airflow.triggers import ReassignmentTrigger

    env.healthy()
    controller, _ = env.cluster.controller()
    paused = max(b for b in (1, 2, 3) if b != controller)  # the controller must keep answering
    first, second = (b for b in (1, 2, 3) if b != paused)
    env.cluster.create_topic("moving", {0: [first, second]})
    env.cluster.wait_topic_healthy("moving")
    origin, target = (first, second), (first, paused)
    plan = [{"topic": "moving", "partition": 0, "replicas": list(target)}]

    def moving() -> ReplicaAssignment:
        return assignment(env, "moving")[0]

    def execute(timeout_s: float) -> ExecuteReassignmentOperator:
        return ExecuteReassignmentOperator(
            task_id="execute", plan=plan, dry_run=False, wait_for_last_batch=True, batch_timeout_s=timeout_s
        )

    (pid,) = env.lifecycle.pids(paused)
    os.kill(pid, signal.SIGSTOP)  # registered, but it cannot copy anything: every move must wait
    try:
        killed = execute(30)
        thread, out = run_in_thread(lambda: killed.execute(context("execute")))
        env.wait(lambda: moving().is_being_reassigned or out, "the reassignment to start")
        assert not out, out
        task_log = TaskLog()
        for op_type in (ExecuteReassignmentOperator, ReassignmentSensor):
            monkeypatch.setattr(op_type, "log", property(lambda _self: task_log.structured))
        killed.on_kill()  # what Airflow calls when the task is killed
        env.wait(lambda: moving().replicas == origin and not moving().is_being_reassigned, "the cancellation")
        assert env.operations_by_id(killed.operation_id)["status"] == "cancelled"
        thread.join(30)
        assert isinstance(out.get("error"), OperationCancelledError), out
        assert not [x for x in task_log.lines if "failed" in x], task_log.text  # a kill is no failure
        # the task log says what the kill cancelled and what is left
        assert (
            "task killed: cancelled 1 reassignment(s) in flight: moving-0; left: 0 of 1 partition(s) "
            f"already moved (they stay there), the others on their old replicas; operation "
            f"{killed.operation_id} marked cancelled"
        ) in task_log.text, task_log.text

        store = TaskStore()
        crashed = execute(1.0)
        with pytest.raises(OperationTimeoutError):
            crashed.execute(context("execute", store))
        assert moving().is_being_reassigned and store  # left in flight, its id kept for the retry

        sensor = ReassignmentSensor(task_id="verify", plan=plan, deferrable=True, poke_interval=0.2)
        with pytest.raises(TaskDeferred) as deferred:
            sensor.execute(context("verify"))
        trigger = deferred.value.trigger
        assert isinstance(trigger, ReassignmentTrigger) and deferred.value.method_name == "execute_complete"
        short = ReassignmentTrigger(
            trigger.kafka_controller_conn_id, trigger.plan, poll_interval_s=0.1, timeout_s=0.3
        )
        event = asyncio.run(first_event(short))
        assert event["status"] == "timeout" and event["progress"]["in_progress"] == 1

        retry = execute(90)
        thread, out = run_in_thread(lambda: retry.execute(context("execute", store)))
    finally:
        os.kill(pid, signal.SIGCONT)
    thread.join(120)
    assert "error" not in out, out.get("error")
    (batch,) = out["result"]["batches"]
    assert (batch["resumed_in_flight"], batch["submitted"]) == (1, 0)  # reconnected, not resubmitted
    assert out["result"]["resumed_from_operation"] == crashed.operation_id
    assert moving().replicas == target

    event = asyncio.run(first_event(ReassignmentTrigger(trigger.kafka_controller_conn_id, plan, 0.2, 90)))
    assert event == {"status": "complete", "partitions": 1}
    done = sensor.execute_complete(context("verify"), event)
    assert task_log.lines[-1] == (  # the verify task ends with its result
        "verify result: the reassignment of 1 partition(s) of moving is complete; replication "
        f"throttles removed (operation {done['operation_id']})"
    )
    assert (
        done["verified"] is True
        and env.operations_by_id(done["operation_id"])["kind"] == "reassignment_verify"
    )
    env.healthy()


def test_a_rolling_restart_retried_after_a_crash_skips_what_was_restarted_and_unpauses(env: Env) -> None:
    """Attempt 1 restarts one broker, records it, and dies as a SIGKILLed worker does: no
    ``finally``, so the auto-rebalance pause stays. The retry (same task state store) restarts only
    the other broker and puts back the value the first attempt replaced, not the pause it left."""
    from kafka_controller.airflow.maintenance import check_stop, restart_order
    from kafka_controller.airflow.operators.cluster import RESTARTED_KEY, RollingRestartOperator

    class WorkerLost(BaseException):
        pass

    class DyingStore(TaskStore):
        """The worker is lost right after the first broker is recorded as restarted."""

        def set(self, key: str, value: object, **kw: object) -> None:
            super().set(key, value, **kw)
            if key == RESTARTED_KEY:
                raise WorkerLost

    env.healthy()
    controller, _ = env.cluster.controller()
    view = env.view()
    safe = [b for b in (1, 2, 3) if check_stop(view, b).safe]  # not solo<b> of an earlier test
    first, second = restart_order(safe, controller)[:2]
    assert env.store.get_entity_config("brokers", "<default>") == {}
    epochs = env.cluster.registered()

    def attempt() -> RollingRestartOperator:
        return RollingRestartOperator(
            task_id="rolling_restart", brokers=[first, second], dry_run=False, catch_up_timeout_s=120
        )

    store = DyingStore()
    crashed = attempt()
    crashed._resume = lambda: None  # type: ignore[method-assign]  # a killed worker runs no finally
    with pytest.raises(WorkerLost):
        crashed.execute(context("rolling_restart", store, dag_id="rolling_controlled_shutdown"))
    crashed._close_hooks()  # a dead worker's ZooKeeper session dies with its process
    after_crash = env.cluster.registered()
    assert after_crash[first] != epochs[first] and after_crash[second] == epochs[second]
    assert env.store.get_entity_config("brokers", "<default>") == {"auto.leader.rebalance.enable": "false"}

    retry_store = TaskStore(store)  # what survived the attempt; this worker stays alive
    result = attempt().execute(context("rolling_restart", retry_store, dag_id="rolling_controlled_shutdown"))
    assert result["steps"][0] == {"broker_id": first, "skipped": "restarted by an earlier attempt"}
    assert result["steps"][1]["broker_id"] == second
    after_retry = env.cluster.registered()
    assert after_retry[first] == after_crash[first]  # not restarted again
    assert after_retry[second] != epochs[second]
    assert env.store.get_entity_config("brokers", "<default>") == {}  # unpaused, not left "false"
    assert retry_store == {}  # nothing left for a later retry to act on
    env.healthy()
