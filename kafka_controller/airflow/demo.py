"""The default scenario of ``kafka-controller demo``: the project's Airflow DAGs run end to end on an
embedded cluster, then the audit report.

A ``LocalCluster`` (ZooKeeper + 3 broker processes auditing to SQLite) and a private Airflow
(``demo_home``) whose connections point at it, with the ``local`` lifecycle backend so that
tasks can stop and start the brokers. Two DAGs run for real through ``dag.test()`` in this process:
``controller_failover_drill`` (the controller resigns; the run times the recovery) and
``rolling_controlled_shutdown`` (each broker restarted once, the controller last). While a DAG runs,
``ClusterPulse`` prints what ZooKeeper shows changing; afterwards every fact printed is read back
from the run (task states, XComs), from ZooKeeper or from the audit store, so the demo doubles as
an end-to-end check: a failed run ends it with one line naming the task and its error.

The cluster starts in a thread while Airflow is imported, the DAGs parsed and Airflow's in-process
task API built (the two sides take about as long; neither uses the other). Airflow's metadata DB
is created after the cluster is up: both create their schemas with Alembic, whose ``context``
proxy is process-global.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kafka_controller.admin.topics import assign_replicas_to_brokers
from kafka_controller.airflow import demo_home
from kafka_controller.airflow.audit_queries import list_operations
from kafka_controller.airflow.connections import DEFAULT_AUDIT_CONN_ID
from kafka_controller.airflow.dag_ids import CONTROLLER_FAILOVER_DRILL, ROLLING_CONTROLLED_SHUTDOWN
from kafka_controller.airflow.demo_home import DEMO_DAGS, AirflowDemoError
from kafka_controller.audit.engine import create_audit_engine
from kafka_controller.audit.reports import build_report, render_text
from kafka_controller.cluster.client_view import kafka_client_view
from kafka_controller.cluster.demo_audit import audit_summary, dag_operations, wait_settled
from kafka_controller.cluster.local import LocalCluster
from kafka_controller.cluster.pulse import ClusterPulse

if TYPE_CHECKING:
    from airflow.sdk import DAG

#: Topic -> (partitions, replication factor, placement start): RF >= 2, so that no restart may
#: take a partition offline (the rolling restart refuses to stop a broker that would).
TOPICS: dict[str, tuple[int, int, int]] = {"orders": (6, 3, 0), "payments": (4, 2, 1)}
REQUESTER = "kafka-controller demo"
CONF: dict[str, dict[str, Any]] = {
    CONTROLLER_FAILOVER_DRILL: {"dry_run": False, "timeout_s": 60},
    ROLLING_CONTROLLED_SHUTDOWN: {"dry_run": False, "catch_up_timeout_s": 120},
}
TITLES = {
    CONTROLLER_FAILOVER_DRILL: "the controller resigns; the run times the recovery",
    ROLLING_CONTROLLED_SHUTDOWN: "each broker restarted once, the active controller last",
}
SETUP_TIMEOUT_S = 90.0


@dataclass
class DagOutcome:
    """One ``dag.test()`` run as the demo reports it."""

    dag_id: str
    run_id: str
    state: str
    seconds: float
    conf: dict[str, Any]
    tasks: dict[str, str]
    results: dict[str, Any] = field(default_factory=dict)  #: XCom of each successful task

    def as_json(self) -> dict[str, Any]:
        return {
            "dag_id": self.dag_id,
            "run_id": self.run_id,
            "state": self.state,
            "seconds": round(self.seconds, 3),
            "conf": self.conf,
            "tasks": self.tasks,
            "results": self.results,
        }


class AirflowDemo:
    """``run()`` once, then ``close()`` (also after a failure or Ctrl-C)."""

    def __init__(self, workdir: Path, say: Callable[[str], None], *, audit_url: str, dags: Path) -> None:
        self.workdir = workdir
        self.say = say
        self.audit_url = audit_url
        self.dags_folder = dags
        self.home = workdir / "airflow"
        self.lifecycle_dir = workdir / "lifecycle"
        self.cluster = LocalCluster(3, data_dir=workdir / "cluster", audit_url=audit_url)
        self.connections: dict[str, str] = {}
        self._dags: Mapping[str, DAG] = {}
        self._starter: threading.Thread | None = None
        self._steps = 0

    def _step(self, title: str) -> None:
        self._steps += 1
        self.say("")
        self.say(f"== {self._steps}. {title}")

    # -- the scenario ---------------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        started = time.monotonic()
        setup = self.setup()
        setup["topics"] = self.create_topics()
        drill = self.run_dag(CONTROLLER_FAILOVER_DRILL)
        drill_facts = self.show_drill(drill)
        epochs_before = self.cluster.registered()
        controller_before = self.cluster.controller()[0]
        rolling = self.run_dag(ROLLING_CONTROLLED_SHUTDOWN)
        rolling_facts = self.show_rolling(rolling, controller_before, epochs_before)
        client_view = self.show_client_view()
        audit = self.show_audit()
        return {
            "ok": True,
            "scenario": "airflow",
            "seconds": round(time.monotonic() - started, 3),
            "setup": setup,
            "dags": [drill.as_json(), rolling.as_json()],
            "drill": drill_facts,
            "rolling_restart": rolling_facts,
            "kafka_client": client_view,
            "audit": audit,
        }

    def setup(self) -> dict[str, Any]:
        self._step("An embedded cluster and a private Airflow")
        self.say(f"   starting ZooKeeper and 3 brokers; Airflow home {self.home} ...")
        demo_home.enter(self.home, self.dags_folder)
        failure: list[BaseException] = []

        def start() -> None:
            try:
                self.cluster.start(timeout=SETUP_TIMEOUT_S)
            except BaseException as e:  # handed to the main thread
                failure.append(e)

        started = time.monotonic()
        self._starter = threading.Thread(target=start, name="demo-cluster-start", daemon=True)
        self._starter.start()
        version = demo_home.import_airflow()
        self._dags = demo_home.load_dags(self.dags_folder)
        parsed = time.monotonic() - started
        warm_s = demo_home.warm_task_api()
        self._join_starter()
        if failure:
            raise failure[0]
        up = time.monotonic() - started
        db_s = demo_home.init_metadata_db()
        self.connections = demo_home.set_connections(
            self.cluster.zookeeper_connect, self.cluster.chroot, self.audit_url, self.lifecycle_dir
        )
        info = self.cluster.info()
        cid, epoch = self.cluster.controller()
        self.say(f"   ZooKeeper {info['zookeeper']}; audit store {self.connections[DEFAULT_AUDIT_CONN_ID]}")
        for b in info["brokers"]:
            self.say(f"   broker {b['id']} listening on {b['listener']} (pid {b['pid']})")
        self.say(f"   controller: broker {cid}, controller epoch {epoch}; cluster up in {up:.1f}s")
        self.say(
            f"   meanwhile: Airflow {version} imported and the DAGs in {self.dags_folder} parsed in "
            f"{parsed:.1f}s, its task API built in {warm_s:.1f}s; then its metadata DB created in {db_s:.1f}s"
        )
        for conn_id, what in self.connections.items():
            self.say(f"   connection {conn_id}: {what}")
        return {
            "airflow_version": version,
            "airflow_home": str(self.home),
            "dags_folder": str(self.dags_folder),
            "controller": cid,
            "controller_epoch": epoch,
            "brokers": list(self.cluster.broker_ids),
            "seconds": round(time.monotonic() - started, 3),
        }

    def create_topics(self) -> dict[str, dict[str, int]]:
        self._step("Create topics (replication factor >= 2: a restart may never take one offline)")
        brokers = list(self.cluster.broker_ids)
        for topic, (partitions, rf, start) in TOPICS.items():
            assignment = assign_replicas_to_brokers(partitions, rf, brokers, start_index=start)
            self.cluster.create_topic(topic, assignment)
        for topic, (partitions, rf, _) in TOPICS.items():
            self.cluster.wait_topic_healthy(topic, timeout=60.0)
            self.say(f"   {topic}: {partitions} partitions, RF {rf}, each with a leader and a full ISR")
        return {t: {"partitions": p, "replication_factor": r} for t, (p, r, _) in TOPICS.items()}

    def run_dag(self, dag_id: str) -> DagOutcome:
        """``dag.test()`` with every param given (defaults, then the demo's), narrated while it runs."""
        dag = self._dags[dag_id]
        conf = {
            **dag.params.dump(),
            **CONF[dag_id],
            "requester": REQUESTER,
            "reason": "kafka-controller demo",
        }
        self._step(f"DAG {dag_id} (dry_run=false): {TITLES[dag_id]}")
        self.say("   what ZooKeeper shows while it runs:")
        # Imported on use: the listener imports Airflow, which reads its configuration once, when
        # first imported: only after demo_home.enter() has pointed it at the demo's private home.
        from kafka_controller.airflow.listener import audit_listener

        started = time.monotonic()
        with ClusterPulse(self.cluster, self.say):
            run = dag.test(run_conf=conf)
            audit_listener.flush()  # the DAG-run row is written by the listener's thread
        outcome = DagOutcome(
            dag_id, str(run.run_id), _state(run.state), time.monotonic() - started, conf, tasks={}
        )
        for ti in sorted(run.get_task_instances(), key=lambda t: t.task_id):
            outcome.tasks[ti.task_id] = _state(ti.state)
            if outcome.tasks[ti.task_id] == "success":
                outcome.results[ti.task_id] = ti.xcom_pull(task_ids=ti.task_id)
        tasks = ", ".join(f"{t} {s}" for t, s in outcome.tasks.items())
        self.say(f"   run {outcome.run_id}: {outcome.state} in {outcome.seconds:.1f}s (tasks: {tasks})")
        if outcome.state != "success":
            raise AirflowDemoError(f"DAG {dag_id} run {outcome.state}: {self._failure(outcome)}")
        return outcome

    def _failure(self, outcome: DagOutcome) -> str:
        """The failed task and its error, as the operator and the listener recorded it."""
        failed = [t for t, s in outcome.tasks.items() if s != "success"] or ["?"]
        engine = create_audit_engine(self.audit_url)
        try:
            rows = list_operations(engine, dag_id=outcome.dag_id, limit=50, dry_runs=True)
        finally:
            engine.dispose()
        # the operator's own row says most, then the listener's task row, then its run row
        rank = {"airflow_task": 1, "airflow_dag_run": 2}
        mine = [r for r in rows if r["airflow_run_id"] == outcome.run_id and r.get("error")]
        errors = [r["error"] for r in sorted(mine, key=lambda r: rank.get(r["kind"], 0))]
        error = errors[0].strip().splitlines()[0][:300] if errors else f"see the task log in {self.home}/logs"
        return f"task {failed[0]} {outcome.tasks.get(failed[0], 'did not run')}: {error}"

    def show_drill(self, outcome: DagOutcome) -> dict[str, Any]:
        r = outcome.results["failover_drill"]
        old, new = r["resigned"], r["elected"]
        self.say(
            f"   broker {old['broker_id']} resigned at controller epoch {old['epoch']}; broker "
            f"{new['broker_id']} was elected with epoch {new['epoch']} {r['election_ms']:.0f} ms later"
        )
        self.say(
            f"   time to recover: {r['recovery_ms']:.0f} ms until all {r['partitions']} partitions had a "
            f"live leader ({r['offline_at_failover']} offline at the failover)"
        )
        return {
            "operation_id": r["operation_id"],
            "resigned": old,
            "elected": new,
            "election_ms": r["election_ms"],
            "time_to_recover_ms": r["recovery_ms"],
            "offline_at_failover": r["offline_at_failover"],
            "measured_by": r["measured_by"],
        }

    def show_rolling(
        self, outcome: DagOutcome, controller_before: int | None, epochs_before: dict[int, int]
    ) -> dict[str, Any]:
        r = outcome.results["rolling_restart"]
        epochs_after = self.cluster.registered()
        by_zookeeper = sorted(
            (b for b in epochs_after if epochs_after[b] != epochs_before.get(b)), key=epochs_after.__getitem__
        )
        for s in r["steps"]:
            role = " (the controller)" if s["was_controller"] else ""
            self.say(
                f"   broker {s['broker_id']}{role}: leaders off in {s['demote_ms']:.0f} ms, stopped in "
                f"{s['stop_ms']:.0f} ms, up in {s['start_ms']:.0f} ms, in every ISR "
                f"{s['catch_up_ms']:.0f} ms later, {len(s['preferred_election']['elected'])} leaderships back"
            )
        self.say(
            f"   restart order {r['order']}, the controller (broker {controller_before}) last; new "
            f"registrations in ZooKeeper, oldest first: {by_zookeeper}"
        )
        self.say(
            f"   partitions offline at any time: {r['max_offline_seen']}; "
            f"the controller is now broker {self.cluster.controller()[0]}"
        )
        return {
            "operation_id": r["operation_id"],
            "controller_before": controller_before,
            "order": r["order"],
            "restarted": [s["broker_id"] for s in r["steps"] if "skipped" not in s],
            "reregistered_in_order": by_zookeeper,
            "broker_epochs_before": epochs_before,
            "broker_epochs_after": epochs_after,
            "max_offline_seen": r["max_offline_seen"],
            "not_preferred_leader_after": r["not_preferred_leader_after"],
        }

    def show_client_view(self) -> dict[str, Any]:
        """A Kafka client nobody here wrote reads the cluster after both DAGs; ZooKeeper must agree."""
        cid = self.cluster.controller()[0]
        bootstrap = self.cluster.listener(cid if cid is not None else self.cluster.broker_ids[0])
        self._step(f"What a Kafka client sees (Kafka's protocol, bootstrap {bootstrap})")
        view = kafka_client_view(bootstrap, list(TOPICS), self.cluster.store)
        leaders = ", ".join(f"broker {b}: {n}" for b, n in sorted(view.leaders.items()))
        total = sum(view.partitions.values())
        self.say(
            f"   {view.client} read {total} partitions with their leaders, replicas and ISRs ({leaders})"
        )
        if view.mismatches:
            raise AirflowDemoError(f"a Kafka client and ZooKeeper disagree: {'; '.join(view.mismatches[:3])}")
        self.say("   every leader, replica list and ISR matches ZooKeeper")
        return view.as_json()

    def show_audit(self) -> dict[str, Any]:
        """The report ``kafka-controller audit report`` prints, once the brokers' writers settled."""
        url = self.connections.get(DEFAULT_AUDIT_CONN_ID, "URL")  # redacted
        self._step(f"The audit report (what `kafka-controller audit report --url {url}` prints)")
        wait_settled(self.audit_url)
        for line in render_text(build_report(self.audit_url, limit=20)).splitlines():
            self.say(f"   {line}" if line else "")
        return {**audit_summary(self.audit_url), "operations": dag_operations(self.audit_url, DEMO_DAGS)}

    def write_env_file(self) -> Path:
        """For ``--keep``: the shell settings that reach this Airflow and its connections."""
        return demo_home.write_env_file(self.workdir / "airflow.env")

    # -- clean-up -------------------------------------------------------------------------------------
    def _join_starter(self) -> None:
        if self._starter is not None:
            self._starter.join(SETUP_TIMEOUT_S + 30.0)
            self._starter = None

    def close(self) -> None:
        """Stop every broker and ZooKeeper; ``LocalCluster.close`` also stops the brokers the
        lifecycle backend relaunched, which are not the cluster's children."""
        self._join_starter()
        self.cluster.close(graceful=False)


def _state(value: object) -> str:
    """A run's or task's state (Airflow's state enum, or its string) as its string."""
    return str(getattr(value, "value", value))
