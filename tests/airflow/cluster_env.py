"""The embedded cluster the DAG and live-operator tests share within a module, and their helpers.

A real ZooKeeper (the session's), three real broker processes auditing to SQLite, the ``local``
lifecycle backend, and the connections pointed at them through ``AIRFLOW_CONN_*`` variables.
"""

from __future__ import annotations

import contextlib
import copy
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafka_controller.airflow.audit_queries import list_operations
from kafka_controller.airflow.lifecycle import LocalLifecycle
from kafka_controller.audit.engine import create_audit_engine
from kafka_controller.domain.values import ReplicaAssignment
from tests.airflow.support import AUDIT_ENV, CLUSTER_ENV, REPO, audit_conn, cluster_conn

ORDERS = {0: [1, 2], 1: [2, 3], 2: [3, 1]}


@dataclass
class Env:
    cluster: Any
    lifecycle: LocalLifecycle
    audit_url: str
    dagbag: Any
    engine: Any
    home: Path
    defaults: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def store(self) -> Any:
        return self.cluster.store

    def view(self, topics: list[str] | None = None) -> Any:
        return self.cluster.waits.describe(topics)

    def wait(self, probe: Callable[[], Any], what: str, timeout: float = 60.0) -> Any:
        return self.cluster.waits.wait_until(probe, timeout, what)

    def healthy(self, timeout: float = 90.0) -> None:
        def ok() -> bool:
            v = self.view()
            return len(v.brokers) == 3 and all(not p.offline and not p.under_replicated for p in v.partitions)

        self.wait(ok, "all three brokers registered and every partition healthy", timeout)

    def run(self, dag_id: str, conf: dict[str, Any]) -> tuple[Any, dict[str, tuple[str, Any]]]:
        """``dag.test`` with every param given: in-process runs reuse one DAG object, and a value
        from an earlier run's conf must not stand in for a default."""
        dag = self.dagbag.get_dag(dag_id)
        run = dag.test(run_conf={**self.defaults[dag_id], **conf})
        from kafka_controller.airflow.listener import audit_listener

        # the DAG-run and task rows are written by the listener's thread: wait for them (a loaded
        # machine's SQLite can take longer than the listener's own 5 s exit budget)
        assert audit_listener.flush(120.0), "the audit listener did not write its rows within 120 s"
        tis = {
            ti.task_id: (
                str(ti.state),
                ti.xcom_pull(task_ids=ti.task_id) if str(ti.state) == "success" else None,
            )
            for ti in run.get_task_instances()
        }
        return run, tis

    def operations_by_id(self, operation_id: str) -> dict[str, Any]:
        from kafka_controller.airflow.audit_queries import get_operation

        row = get_operation(self.engine, operation_id)
        assert row is not None, f"no operation {operation_id}"
        return row

    def operations(self, run: Any) -> dict[str, dict[str, Any]]:
        """The run's operation rows by kind (the listener's task rows as ``airflow_task:<task>``)."""
        rows = [
            r
            for r in list_operations(self.engine, limit=500, dry_runs=True)
            if r["airflow_run_id"] == run.run_id
        ]
        out: dict[str, dict[str, Any]] = {}
        for r in rows:
            key = r["kind"] if r["kind"] != "airflow_task" else f"airflow_task:{r['airflow_task_id']}"
            out[key] = r
        return out


@contextlib.contextmanager
def cluster_env(zk_server: Any, base: Path, chroot: str) -> Iterator[Env]:
    """Start the cluster, point the connections at it, and clean everything up afterwards."""
    from airflow.dag_processing.dagbag import DagBag

    from kafka_controller.cluster.local import LocalCluster

    audit_url = f"sqlite:///{base / 'audit.db'}"
    cluster = LocalCluster(
        3,
        zookeeper=zk_server.connect_string,
        chroot=chroot,
        audit_url=audit_url,
        data_dir=base / "cluster",
        # elections in these tests are ours; a paused broker keeps its session for the pause tests
        broker_config={"auto.leader.rebalance.enable": "false", "zookeeper.session.timeout.ms": "10000"},
    )
    lifecycle = LocalLifecycle(cluster.connect_string, base / "lifecycle")
    saved = {k: os.environ.get(k) for k in (CLUSTER_ENV, AUDIT_ENV)}
    os.environ[CLUSTER_ENV] = cluster_conn(
        zk_server.connect_string, chroot, lifecycle={"type": "local", "state_dir": str(base / "lifecycle")}
    )
    os.environ[AUDIT_ENV] = audit_conn(audit_url)
    from kafka_controller.airflow.listener import audit_listener

    audit_listener.forget_store()  # this process's listener may have resolved an earlier test's store
    engine = None
    try:
        cluster.start()
        cluster.create_topic("orders", ORDERS)
        cluster.wait_topic_healthy("orders")
        engine = create_audit_engine(audit_url)
        dagbag = DagBag(dag_folder=str(REPO / "dags"))
        defaults = {d: copy.deepcopy(dagbag.get_dag(d).params.dump()) for d in dagbag.dag_ids}
        yield Env(cluster, lifecycle, audit_url, dagbag, engine, Path(os.environ["AIRFLOW_HOME"]), defaults)
    finally:
        for b in cluster.broker_ids:
            lifecycle.kill(b, 10)  # brokers this backend relaunched are not the cluster's children
        cluster.close(graceful=False)
        if engine is not None:
            engine.dispose()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def leader(env: Env, topic: str, partition: int) -> int:
    state = env.cluster.waits.partition_state(topic, partition)
    assert state is not None
    return state.leader_and_isr.leader


def assignment(env: Env, topic: str) -> dict[int, ReplicaAssignment]:
    a = env.store.get_replica_assignment_and_topic_ids([topic])[topic]
    return {tp.partition: ra for tp, ra in a.assignment.items()}


def context(task_id: str, store: Any = None, dag_id: str = "partition_reassignment") -> dict[str, Any]:
    """What an operator's ``execute`` reads from Airflow's context, for calling it directly."""
    from types import SimpleNamespace

    return {
        "dag": SimpleNamespace(dag_id=dag_id),
        "run_id": "manual__direct",
        "ti": SimpleNamespace(task_id=task_id, stats_tags={}),
        "dag_run": SimpleNamespace(triggering_user_name="tester", run_type="manual"),
        "task_state_store": store,
    }


class TaskStore(dict):
    """Stands in for ``context["task_state_store"]``: what survives between attempts of a task."""

    def set(self, key: str, value: Any, **_: Any) -> None:
        self[key] = value

    def delete(self, key: str) -> None:
        self.pop(key, None)


def run_in_thread(fn: Callable[[], Any]) -> tuple[threading.Thread, dict[str, Any]]:
    out: dict[str, Any] = {}

    def target() -> None:
        try:
            out["result"] = fn()
        except BaseException as e:
            out["error"] = e

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread, out


async def first_event(trigger: Any) -> dict[str, Any]:
    async for event in trigger.run():
        return dict(event.payload)
    raise AssertionError("the trigger ended without an event")
