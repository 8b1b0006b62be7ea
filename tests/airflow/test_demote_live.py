"""``demote="reorder"``: leadership moved off a broker with Kafka's public APIs only (a reorder-only
reassignment putting the broker last, then a preferred election, as Cruise Control's demote does),
against this project's brokers; every outcome checked in ZooKeeper and in the audit store."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import select

from kafka_controller.airflow.demote import plan_demotion
from kafka_controller.audit.schema import partition_transitions
from kafka_controller.domain.errors import InvalidArgumentError
from kafka_controller.domain.values import ReplicaAssignment, TopicPartition
from tests.airflow.cluster_env import Env, assignment, cluster_env, context, leader

pytestmark = [pytest.mark.airflow, pytest.mark.zk, pytest.mark.integration, pytest.mark.timeout(600)]


def test_the_plan_puts_the_broker_last_in_sync_replicas_first() -> None:
    t = [TopicPartition("t", p) for p in range(5)]
    assignments = {
        t[0]: ReplicaAssignment.of([1, 2, 3]),
        t[1]: ReplicaAssignment.of([2, 1, 3]),
        t[2]: ReplicaAssignment.of([2, 3, 1]),  # already last
        t[3]: ReplicaAssignment.of([1]),  # nowhere to go
        t[4]: ReplicaAssignment((1, 2, 3), (3,), ()),  # being reassigned
    }
    isrs = {t[0]: (1, 3), t[1]: (2, 1, 3)}
    assert plan_demotion(1, assignments, isrs) == {t[0]: (3, 2, 1), t[1]: (2, 3, 1)}


@pytest.fixture(scope="module")
def env(zk_server, airflow_db, tmp_path_factory) -> Iterator[Env]:  # type: ignore[no-untyped-def]
    with cluster_env(zk_server, tmp_path_factory.mktemp("demote"), "/kc-airflow-demote") as e:
        yield e


def test_demote_by_reorder_moves_every_leadership_then_the_orders_come_back(env: Env) -> None:
    from kafka_controller.airflow.hooks.cluster import KafkaClusterHook
    from kafka_controller.airflow.operators.cluster import ControlledShutdownOperator

    env.healthy()
    controller, _ = env.cluster.controller()
    b = max(x for x in (1, 2, 3) if x != controller)
    before = assignment(env, "orders")
    led_before = [p for p in before if leader(env, "orders", p) == b]
    assert led_before, "the fixture's topic gives every broker some leaderships"

    with pytest.raises(InvalidArgumentError, match="parameter 'demote' must be one of"):
        ControlledShutdownOperator(task_id="cs", broker_id=b, demote="nope", dry_run=False).execute(
            context("cs", dag_id="ops")
        )
    op = ControlledShutdownOperator(task_id="cs", broker_id=b, stop=False, demote="reorder", dry_run=False)
    result = op.execute(context("cs", dag_id="ops"))
    assert result["still_led"] == []
    after = assignment(env, "orders")
    for p, ra in after.items():
        assert leader(env, "orders", p) != b  # in ZooKeeper: nothing is led by b
        if b in ra.replicas:
            assert ra.replicas[-1] == b and not ra.is_being_reassigned
    originals = result["original_replica_orders"]
    assert {int(k.rsplit("-", 1)[1]) for k in originals} == {
        p for p, ra in before.items() if b in ra.replicas and ra.replicas[-1] != b
    }
    assert op.operation_id is not None
    assert env.operations_by_id(op.operation_id)["status"] == "succeeded"
    t = partition_transitions
    query = select(t.c.partition, t.c.leader_after).where(
        t.c.operation_id == op.operation_id, t.c.topic == "orders"
    )

    def elections_audited() -> bool:  # the audit writer flushes in the background: poll
        with env.engine.connect() as conn:
            moved = {p for p, new in conn.execute(query) if new not in (b, None)}
        return moved >= set(led_before)

    # the elections that moved b's leaderships belong to the operation (the reorders too: those
    # bump the leader epoch and keep the leader)
    env.wait(elections_audited, "the demotion's elections in the audit store with its operation id")

    hook = KafkaClusterHook()
    hook.reordered = {
        TopicPartition("orders", int(k.rsplit("-", 1)[1])): tuple(v) for k, v in originals.items()
    }
    try:
        assert hook.restore_replica_order(60.0) == len(originals)
    finally:
        hook.close()
    env.wait(lambda: assignment(env, "orders") == before, "the original replica orders back in ZooKeeper")
    env.wait(
        lambda: all(leader(env, "orders", p) == ra.replicas[0] for p, ra in before.items()),
        "the preferred leaders elected again",
    )


def test_a_rolling_restart_with_demote_reorder_ends_with_the_original_orders(env: Env) -> None:
    """Each broker (the controller last) is demoted with Kafka's APIs, restarted and caught up; at
    the end every replica order is the original and the preferred leaders lead again."""
    from kafka_controller.airflow.operators.cluster import RollingRestartOperator

    env.healthy()
    before = assignment(env, "orders")
    epochs = env.cluster.registered()
    op = RollingRestartOperator(
        task_id="rolling_restart", dry_run=False, demote="reorder", catch_up_timeout_s=120
    )
    result = op.execute(context("rolling_restart", dag_id="rolling_controlled_shutdown"))
    assert result["replica_orders_restored"] > 0
    assert all(s.get("still_led_at_stop") == [] for s in result["steps"]), result["steps"]
    after = env.cluster.registered()
    assert all(after[b] != epochs[b] for b in epochs)  # every broker restarted (a new broker epoch)
    assert assignment(env, "orders") == before
    env.wait(
        lambda: all(leader(env, "orders", p) == ra.replicas[0] for p, ra in before.items()),
        "the preferred leaders elected again",
    )
