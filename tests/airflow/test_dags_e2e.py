"""Every DAG end to end with ``dag.test()`` against an embedded cluster: a real ZooKeeper, three real
broker processes auditing to a SQLite store, the ``local`` lifecycle backend. Each test asserts the
outcome in ZooKeeper and in the audit rows. One cluster serves the module: tests restore what they
break (a broker they stop is started again) and set up their own preconditions.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafka_controller.airflow.audit_queries import list_operations, operation_transitions, transitions_between
from kafka_controller.testing.zk_harness import wait_for
from tests.airflow.cluster_env import ORDERS, Env, assignment, cluster_env, leader
from tests.airflow.support import CLUSTER_ENV

pytestmark = [pytest.mark.airflow, pytest.mark.zk, pytest.mark.integration, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def env(zk_server, airflow_db, tmp_path_factory) -> Iterator[Env]:
    with cluster_env(zk_server, tmp_path_factory.mktemp("e2e"), "/kc-airflow-dags") as e:
        yield e


# -- preferred_leader_rebalance --------------------------------------------------------------------


def test_preferred_leader_rebalance_dry_run_then_for_real(env: Env) -> None:
    env.cluster.restart_broker(2)  # its leadership moves away and does not come back by itself
    env.healthy()
    assert leader(env, "orders", 1) == 3

    run, tis = env.run("preferred_leader_rebalance", {})
    assert run.state == "success"
    _, xcom = tis["preferred_election"]
    assert xcom["dry_run"] is True and xcom["plan"][0]["leaders_moved"] == {"orders-1": [3, 2]}
    assert leader(env, "orders", 1) == 3  # a plan only
    op = env.operations(run)["preferred_leader_election"]
    assert op["dry_run"] is True and op["status"] == "succeeded"
    planned = operation_transitions(env.engine, op["operation_id"])
    assert [
        (t["topic"], t["partition"], t["leader_before"], t["leader_after"])
        for t in planned
        if t["kind"] == "partition"
    ] == [("orders", 1, 3, 2)]
    assert all(t["controller_id"] == -1 for t in planned)

    run, tis = env.run("preferred_leader_rebalance", {"partitions": ["orders-1"]})
    assert list(tis["preferred_election"][1]["plan"][0]["answer"]) == ["orders-1"]
    run, tis = env.run("preferred_leader_rebalance", {"topics": ["orders", "nope"]})
    assert run.state == "failed" and "preferred_leader_election" not in env.operations(run)
    assert "unknown topic 'nope'" in env.operations(run)["airflow_task:preferred_election"]["error"]

    run, tis = env.run(
        "preferred_leader_rebalance", {"dry_run": False, "reason": "CHG-42", "requester": "ops-bot"}
    )
    assert run.state == "success"
    assert tis["preferred_election"][1]["elected"] == {"orders-1": 2}
    assert leader(env, "orders", 1) == 2 and env.view().summary["not_preferred_leader"] == 0
    op = env.operations(run)["preferred_leader_election"]
    assert (op["dry_run"], op["status"], op["reason"], op["requester"]) == (
        False,
        "succeeded",
        "CHG-42",
        "ops-bot",
    )
    assert op["parameters"]["scope"] == "all" and op["airflow_dag_id"] == "preferred_leader_rebalance"
    assert env.operations(run)["airflow_dag_run"]["status"] == "succeeded"  # the listener

    def linked() -> list[tuple[str, int, int, int]]:  # the controller's rows reach SQLite asynchronously
        return [
            (t["topic"], t["partition"], t["leader_before"], t["leader_after"])
            for t in operation_transitions(env.engine, op["operation_id"])
            if t["kind"] == "partition" and t["controller_id"] != -1
        ]

    # the operation id travelled with the ElectLeaders request: the election is linked to the row
    wait_for(lambda: linked() == [("orders", 1, 3, 2)], timeout=30, message="the linked election")


# -- controller_failover_drill ---------------------------------------------------------------------


def test_controller_failover_drill(env: Env) -> None:
    env.healthy()
    before_id, before_epoch = env.cluster.controller()
    run, tis = env.run("controller_failover_drill", {"dry_run": False, "timeout_s": 60})
    assert run.state == "success"
    result = tis["failover_drill"][1]
    assert result["resigned"] == {"broker_id": before_id, "epoch": before_epoch}
    assert result["elected"]["epoch"] == before_epoch + 1 == env.cluster.controller()[1]
    assert 0 < result["election_ms"] <= result["recovery_ms"] and result["offline_after"] == 0
    op = env.operations(run)["controller_failover_drill"]
    assert op["status"] == "succeeded" and op["dry_run"] is False

    def elected_row() -> bool:  # the brokers' own audit: the new controller recorded its election
        with env.engine.connect() as conn:
            from sqlalchemy import select

            from kafka_controller.audit.schema import controller_events as ce

            rows = conn.execute(select(ce.c.kind).where(ce.c.controller_epoch == before_epoch + 1)).all()
        return any(r.kind == "elected" for r in rows)

    env.wait(elected_row, "the new controller's election in the audit store", 30)


# -- rolling_controlled_shutdown -------------------------------------------------------------------


def test_rolling_restart_restarts_each_broker_once_controller_last_nothing_offline(env: Env) -> None:
    env.healthy()
    controller, _ = env.cluster.controller()
    epochs_before = env.cluster.registered()
    started_ms = int(time.time() * 1000)
    run, tis = env.run("rolling_controlled_shutdown", {"dry_run": False, "catch_up_timeout_s": 120})
    ended_ms = int(time.time() * 1000)
    assert run.state == "success", tis
    result = tis["rolling_restart"][1]
    assert [s["broker_id"] for s in result["steps"]] == result["order"]
    assert sorted(result["order"]) == [1, 2, 3] and result["order"][-1] == controller
    assert result["steps"][-1]["was_controller"] is True
    assert result["max_offline_seen"] == 0 and result["offline_seen"] == []

    epochs_after = env.cluster.registered()
    assert all(epochs_after[b] != epochs_before[b] for b in (1, 2, 3))  # each one re-registered
    assert max(epochs_after, key=epochs_after.get) == controller  # ...the controller last
    assert env.lifecycle.is_running(controller)
    offline = transitions_between(env.engine, started_ms, ended_ms, to_state="OfflinePartition")
    assert offline == []  # the controllers' own audit: no partition went offline
    view = env.view()
    assert view.summary["not_preferred_leader"] == 0 and view.summary["under_replicated"] == 0
    assert env.store.get_entity_config("brokers", "<default>") == {}  # rebalance pause undone
    ops = env.operations(run)
    assert ops["rolling_restart"]["status"] == "succeeded"
    assert ops["rolling_restart"]["parameters"]["order"] == result["order"]


def test_rolling_restart_dry_run_refuses_nothing_and_touches_nothing(env: Env) -> None:
    env.healthy()
    epochs = env.cluster.registered()
    run, tis = env.run("rolling_controlled_shutdown", {"brokers": [2, 1]})
    assert run.state == "success"
    result = tis["rolling_restart"][1]
    assert result["dry_run"] is True and result["would_refuse"] == []
    assert [step["action"] for step in result["plan"]] == [
        f"controlled-shutdown:{b}" for b in result["order"]
    ]
    assert env.cluster.registered() == epochs


# -- partition_reassignment ------------------------------------------------------------------------


def test_partition_reassignment_generate_execute_in_batches_verify(env: Env) -> None:
    env.healthy()
    conf = {"topics": ["orders"], "broker_list": [1, 2], "max_movements_per_broker": 1, "throttle": 5_000_000}
    run, tis = env.run("partition_reassignment", conf)  # dry run first
    assert run.state == "success"
    assert {p: ra.replicas for p, ra in assignment(env, "orders").items()} == {
        0: (1, 2),
        1: (2, 3),
        2: (3, 1),
    }
    assert tis["verify"][1]["verified"] is False

    notifications_before = len(env.store._core.children("/config/changes"))
    run, tis = env.run("partition_reassignment", {**conf, "dry_run": False})
    assert run.state == "success", tis
    generated = tis["generate"][1]
    assert generated["batches"] == [["orders-1"], ["orders-2"]]  # one move per broker per batch
    target = {e["partition"]: tuple(e["replicas"]) for e in generated["plan"]}
    assert target == {1: (2, 1), 2: (1, 2)}
    after = assignment(env, "orders")
    assert {p: ra.replicas for p, ra in after.items() if p in target} == target
    assert not any(ra.is_being_reassigned for ra in after.values())
    assert tis["verify"][1]["verified"] is True and tis["verify"][1]["throttles_cleared"] is True
    for b in (1, 2, 3):  # throttles set for the move, removed by verify
        assert not any("throttled" in k for k in env.store.get_entity_config("brokers", str(b)))
    assert not any("throttled" in k for k in env.store.get_topic_config("orders"))
    assert len(env.store._core.children("/config/changes")) > notifications_before
    ops = env.operations(run)
    assert {
        ops[k]["status"] for k in ("reassignment_generate", "reassignment_execute", "reassignment_verify")
    } == {"succeeded"}
    assert ops["reassignment_execute"]["parameters"]["throttle_bytes_per_s"] == 5_000_000

    # put orders back where the other tests expect it
    back = {
        "version": 1,
        "partitions": [{"topic": "orders", "partition": p, "replicas": r} for p, r in ORDERS.items()],
    }
    run, _ = env.run("partition_reassignment", {"plan": back, "dry_run": False})
    assert run.state == "success"
    assert {p: list(ra.replicas) for p, ra in assignment(env, "orders").items()} == ORDERS


# -- recover_offline_partitions, and a reassignment that has to wait -------------------------------


def test_offline_partition_recovery_is_guarded(env: Env) -> None:
    env.healthy()
    env.cluster.create_topic("fragile", {0: [2, 3]})
    env.cluster.wait_topic_healthy("fragile")
    env.lifecycle.stop(3, 60)  # controlled: fragile-0's ISR shrinks to [2]
    env.wait(
        lambda: env.cluster.waits.partition_state("fragile", 0).leader_and_isr.isr == (2,),
        "fragile-0's ISR to be [2]",
    )
    env.lifecycle.kill(2, 30)  # its last in-sync replica dies: offline
    env.wait(lambda: 2 not in env.cluster.registered(), "broker 2's session to lapse", 30)
    env.lifecycle.start(3, 60)  # alive again, but out of fragile-0's ISR
    env.wait(lambda: 3 in env.cluster.registered(), "broker 3 to register")
    assert leader(env, "fragile", 0) == -1

    refused, tis = env.run("recover_offline_partitions", {"partitions": ["fragile-0"], "dry_run": False})
    assert refused.state == "failed"
    ops = env.operations(refused)
    assert "recover_offline_partitions" not in ops  # refused before anything was written
    assert "confirm_unclean" in ops["airflow_task:recover"]["error"]

    run, tis = env.run("recover_offline_partitions", {"partitions": ["fragile-0"]})
    plan_out = tis["recover"][1]["plan"][0]
    assert plan_out["leaders_moved"]["fragile-0"] == [-1, 3] and plan_out["unclean_elected"] == ["fragile-0"]
    assert leader(env, "fragile", 0) == -1

    conf = {"partitions": ["fragile-0"], "dry_run": False, "confirm_unclean": True}
    run, tis = env.run("recover_offline_partitions", conf)
    assert run.state == "success" and tis["recover"][1]["elected"] == {"fragile-0": 3}
    assert leader(env, "fragile", 0) == 3
    op = env.operations(run)["recover_offline_partitions"]
    assert op["status"] == "succeeded" and op["parameters"]["candidates"] == {"fragile-0": [3]}

    def unclean_row() -> bool:
        rows = transitions_between(env.engine, op["started_ms"], int(time.time() * 1000))
        return any(r["topic"] == "fragile" and r["unclean"] and r["leader_after"] == 3 for r in rows)

    env.wait(unclean_row, "the controller's unclean election in the audit store", 30)
    env.lifecycle.start(2, 60)
    env.healthy()


# -- partition_state_reconciliation ------------------------------------------------------------------


@pytest.mark.spark
def test_reconciliation_snapshots_and_runs_the_spark_job(env: Env, tmp_path: Path) -> None:
    from kafka_controller.airflow.audit_queries import reconciliation_findings_rows, reconciliation_runs_rows

    env.healthy()
    run, tis = env.run("partition_state_reconciliation", {"output_dir": str(tmp_path)})
    assert run.state == "success", tis
    snap = tis["snapshot"][1]
    partitions = len(env.view().partitions)
    assert Path(snap["snapshot"]).is_dir() and snap["rows"]["zk_partitions"] == partitions
    assert snap["rows"]["broker_replicas"] > 0  # the brokers' own views (DescribeReplicas)
    # the active controller's context (DescribeControllerContext), compared by the job's rules
    assert snap["controller_view"] is True and snap["controller_view_error"] is None
    assert snap["rows"]["controller_partitions"] == partitions
    assert snap["audit_rows"]["partition_transitions"] > 0
    job = tis["reconcile"][1]["job"]
    op = env.operations(run)["reconciliation"]
    runs = [r for r in reconciliation_runs_rows(env.engine, limit=10) if r["run_id"] == job["run_id"]]
    assert runs and runs[0]["status"] == "succeeded" and runs[0]["operation_id"] == op["operation_id"]
    assert runs[0]["partitions_checked"] == job["partitions_checked"] == partitions
    assert len(reconciliation_findings_rows(env.engine, run_id=job["run_id"])) == job["findings"]


# -- audit_report and secrets ------------------------------------------------------------------------


def test_audit_report_writes_json_and_html(env: Env, tmp_path: Path) -> None:
    run, tis = env.run("audit_report", {"output_dir": str(tmp_path), "since_hours": None})
    assert run.state == "success"
    out = tis["report"][1]
    report = json.loads(Path(out["json"]).read_text())
    assert report["summary"]["partition_transitions"] > 0 and report["summary"]["operations"] > 5
    html = Path(out["html"]).read_text()
    assert "<svg" in html and "Transitions per operation" in html
    assert Path(out["html"]).parent.parent == tmp_path


def test_connection_secrets_stay_out_of_logs_xcoms_and_audit(env: Env, capfd, monkeypatch) -> None:
    secret = "zk-digest-Pa55word-7f3a"
    original = os.environ[CLUSTER_ENV]
    conn = json.loads(original)
    conn.update(login="kafka-ops", password=secret)
    conn["extra"]["set_acl"] = False
    monkeypatch.setenv(CLUSTER_ENV, json.dumps(conn))
    run, tis = env.run("controller_failover_drill", {})  # a dry run through an authenticated session
    assert run.state == "success"
    assert secret not in json.dumps(tis, default=str)
    ops = env.operations(run)
    assert ops["controller_failover_drill"]["parameters"]["cluster"]["digest_user"] == "kafka-ops"
    assert secret not in json.dumps(list_operations(env.engine, limit=1000, dry_runs=True), default=str)
    out, err = capfd.readouterr()
    assert secret not in out + err
    logs = [p for p in (env.home / "logs").rglob("*") if p.is_file()]
    assert all(secret not in p.read_text(errors="replace") for p in logs)


def test_sasl_credentials_stay_out_of_logs_xcoms_and_audit(env: Env, capfd, monkeypatch) -> None:
    """With a SASL protocol the connection's login and password are the brokers' SASL login: the
    run's parameters name the user and the protocol, and the password is nowhere."""
    secret = "sasl-Pa55word-e41b"
    conn = json.loads(os.environ[CLUSTER_ENV])
    conn.update(login="ops-admin", password=secret)
    conn["extra"].update(security_protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-512")
    monkeypatch.setenv(CLUSTER_ENV, json.dumps(conn))
    run, tis = env.run("controller_failover_drill", {})  # a dry run: planned, no broker asked
    assert run.state == "success"
    assert secret not in json.dumps(tis, default=str)
    shown = env.operations(run)["controller_failover_drill"]["parameters"]["cluster"]
    assert (shown["sasl_username"], shown["security_protocol"]) == ("ops-admin", "SASL_PLAINTEXT")
    assert shown["digest_user"] is None  # the login is SASL's, not ZooKeeper's
    assert secret not in json.dumps(list_operations(env.engine, limit=1000, dry_runs=True), default=str)
    out, err = capfd.readouterr()
    assert secret not in out + err
    logs = [p for p in (env.home / "logs").rglob("*") if p.is_file()]
    assert all(secret not in p.read_text(errors="replace") for p in logs)
