"""One fault trial, end to end, from nothing but its seed.

The seed picks the fault (round-robin over the kinds, so consecutive seeds cover all of them), the
workload and the moment of injection; the same ``random.Random`` then makes every later choice.
A trial: a fresh ``LocalCluster`` (three broker processes, a new chroot on the suite's ZooKeeper,
its own audit database), topic ``w``, the workload started, the fault injected and repaired, the
workload awaited, the cluster awaited until healthy, and then the invariants: what the observer saw
during the trial, the settled state, and the audit trail (both polled for a while, because
high watermarks and spooled audit rows catch up asynchronously).
"""

from __future__ import annotations

import itertools
import random
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kafka_controller.cluster.local import LocalCluster
from kafka_controller.domain.errors import KafkaControllerError
from kafka_controller.testing.audit_entries import read_audit_entries, unclean_partitions
from kafka_controller.testing.invariants import InvariantChecker
from kafka_controller.testing.violation import Violation
from kafka_controller.zk.embedded import EmbeddedZooKeeper
from kafka_controller.zk.ensemble import ZooKeeperEnsemble
from tests.faults.context import Observer, TrialContext, TrialFailed, log
from tests.faults.faults import FAULT_KINDS, FAULT_WORKLOADS, FAULTS, SESSION_TIMEOUT_MS, ensure_running
from tests.faults.workloads import TOPIC, WORKLOADS, Reassignment, healthy, topic_layout

TRIAL_DEADLINE_S = 150.0
CATCH_UP_S = 15.0
BROKER_CONFIG = {
    "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
    "auto.leader.rebalance.enable": "false",
    "controlled.shutdown.retry.backoff.ms": "500",
    "replica.lag.time.max.ms": "4000",
    "sim.fetch.interval.ms": "100",
    "sim.produce.rate.per.sec": "200",
}
BROKER_IDS = (1, 2, 3)
#: The trial's own ZooKeeper client: connected to a server that a fault cuts off, it moves to
#: another after 2/3 of its session, so a 30 s session measured the test client, not the cluster
#: (found by the 500-trial soak: a topic "led 32.5 s into" a 4 s minority partition).
STORE_SESSION_TIMEOUT_MS = 6_000
_chroots = itertools.count(1)


def replay_command(seed: int) -> str:
    return f"KAFKA_CONTROLLER_FAULT_SEED={seed} .venv/bin/python -m pytest tests/faults -m faults -q"


@dataclass(frozen=True, slots=True)
class TrialSpec:
    seed: int
    fault: str
    workload: str
    inject_after_s: float

    @staticmethod
    def of(seed: int) -> tuple[TrialSpec, random.Random]:
        rng = random.Random(seed)
        fault = FAULT_KINDS[seed % len(FAULT_KINDS)]
        spec = TrialSpec(
            seed,
            fault,
            rng.choice(sorted(FAULT_WORKLOADS.get(fault, WORKLOADS))),
            round(rng.uniform(0.0, 2.5), 2),
        )
        return spec, rng


@dataclass
class TrialResult:
    seed: int
    fault: str
    workload: str
    violations: list[dict[str, Any]] = field(default_factory=list)
    failure: str | None = None
    duration_s: float = 0.0
    samples: int = 0
    notes: list[str] = field(default_factory=list)
    #: How much the final checks looked at: audit rows, partitions, broker replica views.
    checked: dict[str, int] = field(default_factory=dict)
    #: Partitions a reassignment grew without moving their leader (its leader-epoch bump is audited).
    kept_leader: list[str] = field(default_factory=list)
    #: Epochs of controllers that were SIGKILLed (their journaled audit rows must still arrive).
    killed_controller_epochs: list[int] = field(default_factory=list)
    #: Seconds from the heal until the cluster converged (ZooKeeper quorum faults).
    convergence_s: float | None = None
    logs: str | None = None

    @property
    def passed(self) -> bool:
        return not self.violations and self.failure is None

    def line(self) -> dict[str, Any]:
        return {"type": "trial", "passed": self.passed, **asdict(self), "replay": replay_command(self.seed)}

    def summary(self) -> str:
        status = "ok" if self.passed else "FAILED"
        head = f"seed {self.seed} {self.fault} during {self.workload}: {status} in {self.duration_s:.1f}s"
        problems = [str(v["detail"]) for v in self.violations[:3]] + ([self.failure] if self.failure else [])
        return head + "".join(f"\n  - {p}" for p in problems) + f"\n  replay: {replay_command(self.seed)}"


def _until_clean(check: Any, seconds: float) -> list[Violation]:
    """Run ``check()`` until it finds nothing or ``seconds`` pass; the last findings."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            found: list[Violation] = check()
        except KafkaControllerError as e:
            found = [Violation("trial", "read", f"cannot read the cluster: {e}")]
        if not found or time.monotonic() >= deadline:
            return found
        time.sleep(0.25)  # polling interval of a bounded poll


def run_trial(
    seed: int,
    zk: EmbeddedZooKeeper | ZooKeeperEnsemble,
    workdir: Path,
    postgres: Any = None,
    net: Any = None,
) -> TrialResult:
    """Run the trial of ``seed``; never raises for what the cluster does (it is in the result)."""
    spec, rng = TrialSpec.of(seed)
    result = TrialResult(seed, spec.fault, spec.workload)
    started = time.monotonic()
    audit_url = f"sqlite:///{workdir / 'audit.db'}"
    if spec.fault == "audit_outage":
        audit_url = postgres.new_database(f"trial_{seed}")
    cluster = LocalCluster(
        len(BROKER_IDS),
        first_broker_id=BROKER_IDS[0],
        zookeeper=zk.connect_string,
        chroot=f"/faults/trial-{seed}-{next(_chroots)}",
        data_dir=workdir,
        audit_url=audit_url,
        broker_config=BROKER_CONFIG,
        broker_hosts=net.broker_hosts(BROKER_IDS) if net is not None else None,
        store_session_timeout_ms=STORE_SESSION_TIMEOUT_MS,
    )
    t = TrialContext(
        seed, rng, zk, cluster, audit_url, started + TRIAL_DEADLINE_S, postgres=postgres, net=net
    )
    checker = InvariantChecker()
    observer = Observer(t, checker)
    workload = WORKLOADS[spec.workload]()
    try:
        cluster.start(timeout=t.left())
        cluster.create_topic(TOPIC, topic_layout(cluster.broker_ids))
        healthy(t)
        workload.prepare(t)
        observer.start()
        workload.start(t)
        time.sleep(spec.inject_after_s)  # the random moment of injection, not a wait for anything
        FAULTS[spec.fault](t)
        for b in cluster.broker_ids:
            ensure_running(t, b)
        workload.wait_done(t)
        t.wait(lambda: set(cluster.registered()) == set(cluster.broker_ids), "every broker registered")
        healthy(t)
        observer.stop()
        entries: list[Any] = []

        def settled() -> list[Violation]:
            snap = t.snapshot()
            found = checker.observe(snap) + checker.check_settled(snap, unclean_partitions(entries))
            result.checked.update(
                partitions=len(snap.states),
                replica_views=len(snap.replicas),
                controller_epochs_obeyed=len(checker.fencing.obeyed),
                state_writes_by_zxid=0 if snap.writes is None else len(snap.writes.states),
            )
            return found

        def audited() -> list[Violation]:
            entries[:] = read_audit_entries(audit_url)
            result.checked["audit_rows"] = len(entries)
            return checker.check_audit(entries, t.snapshot())

        audit = _until_clean(audited, CATCH_UP_S)
        result.violations = [
            v.as_dict() for v in observer.violations + _until_clean(settled, CATCH_UP_S) + audit
        ]
    except (TrialFailed, KafkaControllerError) as e:
        result.failure = f"{type(e).__name__}: {e}".splitlines()[0][:500]
    finally:
        observer.stop()
        if isinstance(workload, Reassignment):
            result.kept_leader = [str(tp) for tp, r in workload.targets.items() if len(r) == 3]
        result.killed_controller_epochs = t.killed_controller_epochs
        result.convergence_s = t.convergence_s
        result.samples = observer.samples
        result.notes = t.notes + [f"samples skipped: {observer.skipped}"] * bool(observer.skipped)
        result.duration_s = round(time.monotonic() - started, 1)
        cluster.close(graceful=False)
    if not result.passed:
        result.logs = str(workdir / "logs")
    log.info("%s", result.summary())
    return result
