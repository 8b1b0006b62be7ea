"""What the end-to-end benchmarks share: Kafka's layouts, batched set-up, a settled cluster, the
floor, and how results are reported.

A benchmark cluster is an embedded ZooKeeper (1 GB heap) plus five real ``kafka-controller
broker`` processes (``LocalCluster``). The layout is written straight into ZooKeeper with the
store's batched multis *before* the brokers start (topic znodes with ids, partition states with
leader = preferred replica and a full ISR, as a running Kafka 2.8 cluster leaves them), so setting
up 100,000 partitions takes seconds and the first controller only loads them. ``settle`` then waits
until every partition is led by its preferred replica with a full ISR and nothing changes between
two looks, so that the timed operation starts from a quiet cluster.

Every figure is reported with the baseline measured in the same run and the ratio (absolute
seconds drift on shared machines; ratios hold), then appended to ``bench/results/<name>.jsonl``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import re
import shutil
import sqlite3
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kafka_controller.cluster.local import LocalCluster
from kafka_controller.domain.errors import KafkaControllerError
from kafka_controller.domain.values import (
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
    TopicPartition,
)
from kafka_controller.thread_cpu import stat_cpu_seconds
from kafka_controller.zk import paths as P
from kafka_controller.zk.backend import CREATE, EPHEMERAL, PERSISTENT
from kafka_controller.zk.codecs import encode_controller, encode_topic, new_topic_id
from kafka_controller.zk.embedded import EmbeddedZooKeeper
from kafka_controller.zk.ensemble import ZooKeeperEnsemble
from kafka_controller.zk.kazoo_backend import KazooMetadataStore
from kafka_controller.zk.security import ZkClientConfig

#: Where ``report`` appends; ``KAFKA_CONTROLLER_BENCH_RESULTS`` moves it (the smoke tests do, so a
#: test run never adds lines to the committed results).
RESULTS = Path(
    os.environ.get("KAFKA_CONTROLLER_BENCH_RESULTS") or Path(__file__).resolve().parent / "results"
)
#: Broker settings of every benchmark cluster: none, so the brokers run on their own defaults
#: (followers fetching every 200 ms, auto rebalance on), as the cluster a user starts. Before fetch
#: sessions the data plane cost per partition per fetch, and the benchmarks had to run
#: ``LIGHT_BROKER_CONFIG``: 100,000 partitions at RF 3 then kept 1.2 of this machine's 2 cores busy
#: at the default interval (measured: ``bench/idle_cpu.py``), which was charged to the controller.
BENCH_BROKER_CONFIG: dict[str, str] = {}
#: The lighter simulation the benchmarks used until then; ``--light`` reports it *beside* the default.
LIGHT_BROKER_CONFIG = {"sim.fetch.interval.ms": "5000", "auto.leader.rebalance.enable": "false"}
#: Holds ``/controller`` while the brokers register (see ``hold_election``); never a broker id.
PLACEHOLDER_CONTROLLER_ID = 999
BROKERS = 5
FIRST_BROKER_ID = 1
ZK_HEAP_MB = 1024
#: Published figures (docs/performance.md): Kafka 1.0 and 1.1 on the same layouts.
KAFKA = {
    "controlled_shutdown_s": {"kafka_1_0": 390.0, "kafka_1_1": 3.0},
    "failover_s": {"kafka_1_0": 28.0, "kafka_1_1": 14.0},
}

Assignment = dict[str, dict[int, tuple[int, ...]]]


# -- layouts ---------------------------------------------------------------------------------------
def controlled_shutdown_layout(topics: int = 25_000, brokers: int = BROKERS) -> Assignment:
    """Kafka's: ``topics`` x 1 partition x RF 2, leaders round-robin and followers spread over the
    other brokers, so each broker hosts 2/5 of the replicas (10,000) and leads 1/5 (5,000)."""
    ids = range(FIRST_BROKER_ID, FIRST_BROKER_ID + brokers)
    out: Assignment = {}
    for i in range(topics):
        leader = i % brokers
        follower = (leader + 1 + (i // brokers) % (brokers - 1)) % brokers
        out[f"cs-{i}"] = {0: (ids[leader], ids[follower])}
    return out


def failover_layout(
    topics: int = 2_000, partitions: int = 50, rf: int = 1, brokers: int = BROKERS
) -> Assignment:
    """Kafka's: ``topics`` x ``partitions`` x RF ``rf``, replicas consecutive from a round-robin start."""
    ids = [FIRST_BROKER_ID + b for b in range(brokers)]
    return {
        f"fo-{t}": {
            p: tuple(ids[(t * partitions + p + k) % brokers] for k in range(rf)) for p in range(partitions)
        }
        for t in range(topics)
    }


def partitions_of(assignment: Assignment) -> list[TopicPartition]:
    return [TopicPartition(t, p) for t, parts in assignment.items() for p in parts]


def write_layout(store: KazooMetadataStore, assignment: Assignment) -> float:
    """Topic znodes (v3, with ids) and partition states, batched; returns the seconds it took."""
    t0 = time.perf_counter()
    ops = [
        (
            CREATE,
            f"/brokers/topics/{t}",
            encode_topic({p: ReplicaAssignment(r) for p, r in parts.items()}, new_topic_id()),
            PERSISTENT,
        )
        for t, parts in assignment.items()
    ]
    result = store.batcher.run(ops, -1)
    failed = [ops[i][1] for i, code in enumerate(result.codes) if code != 0]
    states = {
        TopicPartition(t, p): LeaderIsrAndControllerEpoch(LeaderAndIsr(r[0], 1, r, 0), 1)
        for t, parts in assignment.items()
        for p, r in parts.items()
    }
    failed += [str(tp) for tp, e in store.create_partition_states(states, -1).items() if e is not None]
    if failed:
        raise SystemExit(f"set-up failed for {len(failed)} znodes, e.g. {failed[0]}")
    return time.perf_counter() - t0


# -- the cluster -----------------------------------------------------------------------------------
@dataclass
class BenchCluster:
    zk: EmbeddedZooKeeper | ZooKeeperEnsemble
    store: KazooMetadataStore
    cluster: LocalCluster
    assignment: Assignment
    partitions: list[TopicPartition]
    setup_seconds: dict[str, float]
    audit_db: Path | None = None

    def pid(self, broker_id: int) -> int:
        pid = self.cluster.processes[broker_id].pid
        if pid is None:
            raise SystemExit(f"broker {broker_id} has no process")
        return pid

    def log_path(self, broker_id: int) -> Path:
        return self.cluster.processes[broker_id].log_path

    def zk_pids(self) -> dict[str, int]:
        """ZooKeeper's running server processes: ``zookeeper``, or ``zookeeper_<id>`` per member of
        an ensemble."""
        if isinstance(self.zk, ZooKeeperEnsemble):
            return {f"zookeeper_{m.server_id}": m.pid for m in self.zk.members if m.pid is not None}
        return {} if self.zk.pid is None else {"zookeeper": self.zk.pid}


#: Each ensemble member's heap (three JVMs beside five brokers on the same host).
ENSEMBLE_HEAP_MB = 512


def add_zk_servers_option(parser: argparse.ArgumentParser) -> None:
    """``--zk-servers``: the benchmark's ZooKeeper, one server or a 3-server ensemble."""
    parser.add_argument(
        "--zk-servers",
        type=int,
        default=1,
        choices=[1, 3],
        help="ZooKeeper servers: 1 (default), or a 3-server ensemble on this host",
    )


@contextlib.contextmanager
def bench_cluster(
    assignment: Assignment,
    *,
    audit: bool = False,
    broker_config: Mapping[str, str] | None = None,
    keep_dir: bool = False,
    zk_servers: int = 1,
    security: str = "plaintext",
) -> Iterator[BenchCluster]:
    """A settled cluster over ``assignment`` on a fresh ZooKeeper: one server or, with
    ``zk_servers`` > 1, an ensemble on this host. With ``audit``, every broker audits into one
    SQLite file of the cluster's directory. ``security``: ``LocalCluster``'s (``sasl_ssl``: the
    brokers' listeners, and so the controller's requests to them, are TLS with SCRAM logins)."""
    work = Path(tempfile.mkdtemp(prefix="kc-bench-"))
    audit_url = f"sqlite:///{work / 'audit.db'}" if audit else None
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    zk: EmbeddedZooKeeper | ZooKeeperEnsemble
    if zk_servers > 1:
        zk = ZooKeeperEnsemble(zk_servers, data_dir=work / "zookeeper", heap_mb=ENSEMBLE_HEAP_MB).start(120)
    else:
        zk = EmbeddedZooKeeper(data_dir=work / "zookeeper", heap_mb=ZK_HEAP_MB).start(timeout=60)
    store = KazooMetadataStore(ZkClientConfig(zk.connect_string, session_timeout_ms=30_000))
    cluster: LocalCluster | None = None
    try:
        timings["write_layout"] = write_layout(store, assignment)
        t1 = time.perf_counter()
        cluster = LocalCluster(
            BROKERS,
            first_broker_id=FIRST_BROKER_ID,
            zookeeper=zk.connect_string,
            data_dir=work / "cluster",
            audit_url=audit_url,
            broker_config={**BENCH_BROKER_CONFIG, **(broker_config or {})},
            log_level="INFO",
            security=security,
        )
        with hold_election(store, BROKERS):
            cluster.start(timeout=600)
        timings["start_brokers"] = time.perf_counter() - t1
        audit_db = work / "audit.db" if audit else None
        bench = BenchCluster(zk, store, cluster, assignment, partitions_of(assignment), timings, audit_db)
        t2 = time.perf_counter()
        settle(bench)
        timings["settle"] = time.perf_counter() - t2
        timings["total"] = time.perf_counter() - t0
        yield bench
    finally:
        if cluster is not None:
            cluster.close(graceful=False)
        store.close()
        zk.close()
        if not keep_dir:
            shutil.rmtree(work, ignore_errors=True)


@contextlib.contextmanager
def hold_election(store: KazooMetadataStore, brokers: int, timeout: float = 300.0) -> Iterator[None]:
    """No controller until all ``brokers`` are registered, so the first one loads a whole cluster.

    Brokers start at once, and whichever registers first would otherwise become controller while
    the others are still starting, take their replicas out of every ISR, and leave the cluster to
    spend minutes growing them back through the simulated fetches. A placeholder ``/controller``
    (ephemeral, this session's) makes every candidate wait; a helper thread deletes it once all
    brokers are registered, and they elect one of them as usual.
    """
    store.backend.create(P.CONTROLLER_PATH, encode_controller(PLACEHOLDER_CONTROLLER_ID, 0), EPHEMERAL)
    stop = threading.Event()

    def release() -> None:
        deadline = time.monotonic() + timeout
        while not stop.is_set() and time.monotonic() < deadline:
            if len(store.get_sorted_broker_list()) >= brokers:
                break
            stop.wait(0.05)
        with contextlib.suppress(KafkaControllerError):
            store.backend.delete(P.CONTROLLER_PATH)

    releaser = threading.Thread(target=release, name="hold-election", daemon=True)
    releaser.start()
    try:
        yield
    finally:
        stop.set()
        releaser.join()


def settle(bench: BenchCluster, timeout: float = 600.0) -> None:
    """Until every partition is led by its preferred replica with a full ISR, twice in a row with
    the same znode versions; a preferred election is asked for if leaders are off, and again every
    10 s while some stay off (a replica not yet back in the ISR when it was asked is skipped).
    Audited, then until the audit rows stop growing: the first controller writes its startup's
    ~300,000 rows for seconds after the states settle (``idle_cluster_cpu_cores`` read ~0.8-1.1
    cores before the kill until this waited for them)."""
    deadline = time.monotonic() + timeout
    asked_at: float | None = None
    previous: dict[TopicPartition, int] | None = None
    while True:
        reads = bench.store.get_partition_states(bench.partitions)
        versions: dict[TopicPartition, int] = {}
        off_leader = full = 0
        for tp in bench.partitions:
            s = reads.get(tp)
            if not isinstance(s, LeaderIsrAndControllerEpoch):
                continue
            replicas = bench.assignment[tp.topic][tp.partition]
            lai = s.leader_and_isr
            versions[tp] = lai.zk_version
            off_leader += lai.leader != replicas[0]
            full += set(lai.isr) == set(replicas)
        if off_leader and (asked_at is None or time.monotonic() - asked_at > 10.0):
            bench.cluster.admin().elect_leaders("preferred")
            asked_at = time.monotonic()
        elif not off_leader and full == len(bench.partitions) and versions == previous:
            if bench.audit_db is not None:  # the controller's startup rows, still being written
                epoch = bench.store.get_controller_epoch()
                left = max(1.0, deadline - time.monotonic())
                wait_audit_drained(bench.audit_db, left, epoch=None if epoch is None else epoch[0])
            return
        if time.monotonic() > deadline:
            raise SystemExit(
                f"cluster did not settle in {timeout:g}s: {off_leader} partitions off their preferred "
                f"leader, {len(bench.partitions) - full} with a partial ISR"
            )
        previous = versions
        time.sleep(1.0)


def leaders(
    bench: BenchCluster, partitions: Sequence[TopicPartition] | None = None
) -> dict[TopicPartition, int]:
    """Each partition's leader in ZooKeeper now (one batched read)."""
    tps = bench.partitions if partitions is None else list(partitions)
    out: dict[TopicPartition, int] = {}
    for tp, s in bench.store.get_partition_states(tps).items():
        if isinstance(s, LeaderIsrAndControllerEpoch):
            out[tp] = s.leader_and_isr.leader
    return out


# -- measuring -------------------------------------------------------------------------------------
def rss_mb(pid: int, field: str = "VmRSS") -> float:
    """Resident memory of a process (``VmRSS`` of ``/proc/<pid>/status``), in MiB; ``VmHWM``
    for its peak so far."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) / 1024
    raise SystemExit(f"no {field} for pid {pid}")


def peak_rss_mb(pid: int) -> float:
    """The most resident memory the process has had (``VmHWM``), in MiB: what ``rss_mb`` after
    memory was handed back to the OS does not show."""
    return rss_mb(pid, "VmHWM")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (``/proc/<pid>/stat``)."""
    return stat_cpu_seconds(f"/proc/{pid}/stat")


_LOG_TIME = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")


class LogTail:
    """Lines a broker logs from now on, with their times. Brokers log millisecond ``asctime`` in
    local time, which ``timestamp()`` turns into the same epoch seconds as ``time.time()``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = path.stat().st_size if path.exists() else 0
        self._lines: list[str] = []

    def _read(self) -> None:
        with self.path.open("rb") as f:
            f.seek(self._offset)
            chunk = f.read()
        end = chunk.rfind(b"\n") + 1  # keep a partial last line for the next read
        self._offset += end
        self._lines += chunk[:end].decode(errors="replace").splitlines()

    def time_of(self, needle: str) -> float | None:
        """Epoch seconds of the first new line containing ``needle``, or None (yet)."""
        self._read()
        for line in self._lines:
            if needle in line and (m := _LOG_TIME.match(line)) is not None:
                return datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
        return None

    def wait_for(self, needle: str, timeout: float) -> float:
        return float(poll(lambda: self.time_of(needle), timeout, f"{needle!r} in {self.path}"))

    def json_after(self, needle: str, timeout: float) -> dict[str, Any]:
        """The JSON object that ends the first new line containing ``needle`` (the controller's
        ``CPU by thread`` lines, ``kafka_controller.thread_cpu``)."""

        def found() -> dict[str, Any] | None:
            self._read()
            for line in self._lines:
                if needle in line:
                    return dict(json.loads(line[line.index("{", line.index(needle)) :]))
            return None

        return dict(poll(found, timeout, f"{needle!r} in {self.path}"))


def poll(probe: Callable[[], Any], timeout: float, what: str, interval: float = 0.05) -> Any:
    """Call ``probe`` until it returns something truthy, or exit naming ``what``."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(interval)


def audit_rows(db: Path) -> int:
    """Transition rows committed to a benchmark's SQLite audit store so far."""
    with contextlib.closing(sqlite3.connect(db, timeout=30)) as conn:
        return sum(
            conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            for table in ("partition_transitions", "replica_transitions")
        )


def failover_audited(db: Path, epoch: int) -> bool:
    """Whether the controller of ``epoch`` has its ``failover`` row in the audit store."""
    with contextlib.closing(sqlite3.connect(db, timeout=30)) as conn:
        query = "SELECT count(*) FROM controller_events WHERE kind = 'failover' AND controller_epoch = ?"
        return bool(conn.execute(query, (epoch,)).fetchone()[0])


def wait_audit_drained(db: Path, timeout: float = 120.0, *, epoch: int | None = None) -> tuple[int, float]:
    """Until the row count stops growing (unchanged over 1 s); the count and the epoch time at
    which it last grew. With ``epoch``, first until that controller's ``failover`` row is in:
    rows can trail the failover by seconds under load (an event hands its records to the writer
    when it ends, or every 2 s), and a quiet second before the first of them is not "drained"."""
    deadline = time.monotonic() + timeout
    if epoch is not None:
        poll(lambda: failover_audited(db, epoch), timeout, f"the failover row of controller epoch {epoch}")
    count, grew_at, unchanged_since = audit_rows(db), time.time(), time.monotonic()
    while time.monotonic() - unchanged_since < 1.0:
        if time.monotonic() > deadline:
            raise SystemExit(f"audit rows still growing after {timeout:g}s")
        time.sleep(0.05)
        now = audit_rows(db)
        if now != count:
            count, grew_at, unchanged_since = now, time.time(), time.monotonic()
    return count, grew_at


def ratio(a: float, b: float) -> float | None:
    return round(a / b, 2) if b > 0 else None


def environment() -> dict[str, Any]:
    return {
        "at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_1m": round(os.getloadavg()[0], 2),
    }


def median_run(
    run: Callable[[], dict[str, Any]], reps: int, key: str, also: Sequence[str] = ()
) -> dict[str, Any]:
    """``run()`` ``reps`` times; the run with the median ``key``, plus every run's ``key`` (and each
    of ``also`` that the runs report) under ``<key>_all``, in the order of ``key`` (one figure on
    a shared 2-core machine moves by 5-10% from run to run)."""
    runs = sorted((run() for _ in range(reps)), key=lambda r: float(r[key]))
    chosen = dict(runs[(len(runs) - 1) // 2])
    if reps > 1:
        for k in (key, *also):
            if all(k in r for r in runs):
                chosen[f"{k}_all"] = [r[k] for r in runs]
    return chosen


def report(name: str, result: dict[str, Any]) -> None:
    """Print one JSON line and append it to ``<RESULTS>/<name>.jsonl``."""
    line = json.dumps({"bench": name, "env": environment(), **result})
    print(line, flush=True)
    RESULTS.mkdir(exist_ok=True)
    with (RESULTS / f"{name}.jsonl").open("a") as f:
        f.write(line + "\n")
