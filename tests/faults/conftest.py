"""Fixtures of the fault suite: its own ZooKeeper server (trials restart it, so it cannot be the
session's shared one), a 3-server ensemble started only when a ZooKeeper quorum fault needs it, a
private PostgreSQL started only when an audit-outage trial needs it, and
the results file ``bench/results/reliability.jsonl`` (one line per trial, then a summary).

Sizing and replay: ``KAFKA_CONTROLLER_FAULT_TRIALS`` (default 30) trials with seeds
``base .. base + n - 1``; the base is ``KAFKA_CONTROLLER_FAULT_BASE_SEED`` or random (and logged);
``KAFKA_CONTROLLER_FAULT_SEED=<n>`` runs only the trial of seed ``n``.
"""

from __future__ import annotations

import os
import random
import statistics
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from kafka_controller.testing.invariants import INVARIANTS
from kafka_controller.zk.embedded import EmbeddedZooKeeper
from kafka_controller.zk.ensemble import ZooKeeperEnsemble
from tests.faults.trial import TrialResult, replay_command

RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results" / "reliability.jsonl"
DEFAULT_TRIALS = 30  # consecutive seeds: at least two of each of the 14 fault kinds


def trial_seeds() -> list[int]:
    one = os.environ.get("KAFKA_CONTROLLER_FAULT_SEED")
    if one:
        return [int(one)]
    count = int(os.environ.get("KAFKA_CONTROLLER_FAULT_TRIALS", DEFAULT_TRIALS))
    base = os.environ.get("KAFKA_CONTROLLER_FAULT_BASE_SEED")
    start = int(base) if base else random.SystemRandom().randrange(1, 10**6) * 100
    return list(range(start, start + count))


@pytest.fixture(scope="module")
def fault_zk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedZooKeeper]:
    zk = EmbeddedZooKeeper(data_dir=tmp_path_factory.mktemp("fault-zk"))
    zk.start(timeout=60.0)
    yield zk
    zk.close()


class FaultEnsemble:
    """A 3-server ``ZooKeeperEnsemble`` started on first use, whole and serving for each trial."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.ensemble: ZooKeeperEnsemble | None = None

    def ready(self) -> ZooKeeperEnsemble:
        if self.ensemble is None:
            self.ensemble = ZooKeeperEnsemble(3, data_dir=self.data_dir)
        self.ensemble.start(timeout=90.0)
        self.ensemble.wait_quorum(timeout=60.0)
        return self.ensemble

    def close(self) -> None:
        if self.ensemble is not None:
            self.ensemble.close()


class FaultNet:
    """Hosts in network namespaces (created on first use): ``zk1..3`` running a ZooKeeper
    ensemble, ``b1..b3`` for the brokers, and ``obs``, where the test itself talks from (it is
    never partitioned). Run a trial inside ``with net.entered():``."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.lab: Any = None
        self.ensemble: ZooKeeperEnsemble | None = None
        self.zk_hosts: list[Any] = []

    def entered(self) -> Any:
        from kafka_controller.testing.netns import NetnsLab

        if self.lab is None:
            self.lab = NetnsLab().start()
            self.zk_hosts = [self.lab.add_host(f"zk{i}") for i in (1, 2, 3)]
            for b in (1, 2, 3):
                self.lab.add_host(f"b{b}")
            self.lab.add_host("obs")
        return self.lab.entered("obs")

    def ready(self) -> ZooKeeperEnsemble:
        """The ensemble, whole and serving; call inside ``entered()``."""
        if self.ensemble is None:
            hosts = [(h.address, self.lab.command(h, [])) for h in self.zk_hosts]
            self.ensemble = ZooKeeperEnsemble(3, data_dir=self.data_dir, hosts=hosts)
        self.lab.heal()
        self.ensemble.start(timeout=90.0)
        self.ensemble.wait_quorum(timeout=60.0)
        return self.ensemble

    def broker_host(self, broker_id: int) -> Any:
        return self.lab.hosts[f"b{broker_id}"]

    def broker_hosts(self, broker_ids: tuple[int, ...]) -> dict[int, tuple[str, list[str]]]:
        return {
            b: (self.broker_host(b).address, self.lab.command(self.broker_host(b), [])) for b in broker_ids
        }

    def close(self) -> None:
        if self.ensemble is not None:
            self.ensemble.close()
        if self.lab is not None:
            self.lab.close()


@pytest.fixture(scope="module")
def fault_net(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FaultNet]:
    holder = FaultNet(tmp_path_factory.mktemp("fault-net"))
    yield holder
    holder.close()


@pytest.fixture(scope="module")
def fault_ensemble(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FaultEnsemble]:
    holder = FaultEnsemble(tmp_path_factory.mktemp("fault-ensemble"))
    yield holder
    holder.close()


class AuditPostgres:
    """A ``PrivatePostgres`` started on first use; one fresh database per outage trial."""

    def __init__(self) -> None:
        self.server: Any = None

    def _started(self) -> Any:
        if self.server is None:
            from kafka_controller.testing.postgres import PrivatePostgres

            self.server = PrivatePostgres()
            self.server.start()
        return self.server

    def new_database(self, name: str) -> str:
        import psycopg

        server = self._started()
        with psycopg.connect(
            f"host=127.0.0.1 port={server.port} user=postgres dbname=postgres", autocommit=True
        ) as c:
            c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            c.execute(f'CREATE DATABASE "{name}"')
        return str(server.database_url(name))

    def stop(self, mode: str = "fast") -> None:
        self._started().stop(mode)

    def start(self) -> None:
        self._started().start()

    def close(self) -> None:
        if self.server is not None:
            self.server.close()


@pytest.fixture(scope="module")
def audit_postgres() -> Iterator[AuditPostgres]:
    pg = AuditPostgres()
    yield pg
    pg.close()


class Report:
    """Collects each trial's line; at the end, replaces the results file with them and a summary
    in one rename (two runs at once — CI and a developer — never interleave their lines)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.results: list[TrialResult] = []
        self.started = time.monotonic()

    def add(self, result: TrialResult) -> None:
        self.results.append(result)

    def summary(self) -> dict[str, Any]:
        rs = self.results
        violated = Counter(v["invariant"] for r in rs for v in r.violations)
        return {
            "type": "summary",
            "trials": len(rs),
            "passed": sum(r.passed for r in rs),
            "faults": dict(Counter(r.fault for r in rs)),
            "workloads": dict(Counter(r.workload for r in rs)),
            "convergence_s": _convergence(rs),
            "invariants_checked": list(INVARIANTS),
            "violations": sum(len(r.violations) for r in rs),
            "violations_by_invariant": dict(violated),
            "trials_failed_to_complete": sum(r.failure is not None for r in rs),
            "seeds": [r.seed for r in rs],
            "failed_seeds": [r.seed for r in rs if not r.passed],
            "duration_s": round(time.monotonic() - self.started, 1),
            "command": ".venv/bin/python -m pytest tests/faults -m faults -q",
            "replay": replay_command(0).replace("=0", "=<seed>"),
        }

    def close(self) -> None:
        if not self.results or self.path is None:
            return
        lines = [orjson.dumps(r.line()) for r in self.results] + [orjson.dumps(self.summary())]
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        tmp.write_bytes(b"\n".join(lines) + b"\n")
        os.replace(tmp, self.path)


def _convergence(rs: list[TrialResult]) -> dict[str, dict[str, float]]:
    """Median and worst convergence after a heal, per fault kind that heals."""
    by_kind: dict[str, list[float]] = {}
    for r in rs:
        if r.convergence_s is not None:
            by_kind.setdefault(r.fault, []).append(r.convergence_s)
    return {
        kind: {"median": round(statistics.median(v), 2), "worst": max(v), "trials": len(v)}
        for kind, v in sorted(by_kind.items())
    }


@pytest.fixture(scope="module")
def report() -> Iterator[Report]:
    r = Report(results_path())
    yield r
    r.close()


def results_path() -> Path | None:
    """Where the run's record goes: ``KAFKA_CONTROLLER_FAULT_RESULTS``, else the suite's file, except
    for a one-seed replay (``KAFKA_CONTROLLER_FAULT_SEED``), which keeps its line to itself rather
    than replace the record of a whole run with it."""
    explicit = os.environ.get("KAFKA_CONTROLLER_FAULT_RESULTS")
    if explicit:
        return Path(explicit)
    return None if os.environ.get("KAFKA_CONTROLLER_FAULT_SEED") else RESULTS
