"""Benchmark: the core's partition and replica transitions against the in-memory store.

Two workloads on N partitions of B brokers, RF R (Kafka 1.1's failover layout: topics of 50
partitions, round-robin replicas), with broker 1 down:

* ``offline_to_online`` — every partition OfflinePartition -> OnlinePartition with the offline
  strategy: one batched read, one (empty) topic-config read, the elections, one batched fenced
  conditional write, LeaderAndIsr/UpdateMetadata built and sent;
* ``replicas_to_offline`` — one replica per partition (its last one, never the leader) to
  OfflineReplica: StopReplica, the ISR shrink (read + conditional write per replica id), and
  LeaderAndIsr to the remaining replicas.

Each is measured three ways in the same run, over fresh stores (setup is not timed):

* ``end_to_end`` — the real state machine, store, ``ControllerBrokerRequestBatch`` and a
  ``RecordingBrokerChannel``, nothing wrapped (``audited``: the same with a recording audit sink);
* ``breakdown`` — the same run with timing wrappers around the store and the batch (the channel
  runs inside the batch's send): ``decision`` = total - store - batch is the state machine's own
  logic, and ``decision_rate`` its partitions per second;
* ``baseline`` — the raw floor: the same store's batched read + conditional write of the same
  states with no controller logic.

Prints one JSON document and appends it to ``bench/results/core_transitions.jsonl``.

    .venv/bin/python bench/core_transitions.py [--partitions 100000] [--brokers 5] [--rf 3] \\
        [--repeat 3] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import logging
import os
import platform
import pstats
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kafka_controller.core.context import ControllerContext
from kafka_controller.core.partition_state_machine import PartitionStateMachine
from kafka_controller.core.replica_state_machine import ReplicaStateMachine
from kafka_controller.core.request_batch import ControllerBrokerRequestBatch
from kafka_controller.core.strategies import OfflinePartitionLeaderElectionStrategy
from kafka_controller.domain.states import PartitionState, ReplicaState
from kafka_controller.domain.values import (
    Broker,
    EndPoint,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    PartitionAndReplica,
    ReplicaAssignment,
    TopicPartition,
)
from kafka_controller.dryrun.memory_store import InMemoryMetadataStore
from kafka_controller.dryrun.recording import RecordingAuditSink
from kafka_controller.dryrun.recording_channel import RecordingBrokerChannel
from kafka_controller.ports import AuditSink, UpdateLeaderAndIsrResult

RESULTS = (
    Path(os.environ.get("KAFKA_CONTROLLER_BENCH_RESULTS") or Path(__file__).resolve().parent / "results")
    / "core_transitions.jsonl"
)
#: Everything is timed in this process's CPU time: the state machines are single-threaded, and on
#: these shared 2-core machines wall time mostly measures the other tenants. Wall time is kept too.
CLOCK = time.process_time
CONTROLLER_ID = 0
DEAD_BROKER = 1


# ------------------------------------------------------------------------------------- timing
class Timer:
    """Seconds spent inside wrapped calls, by name."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.calls: dict[str, int] = {}

    def wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        clock = CLOCK
        seconds, calls = self.seconds, self.calls
        seconds.setdefault(name, 0.0)
        calls.setdefault(name, 0)

        def timed(*args: Any, **kwargs: Any) -> Any:
            start = clock()
            try:
                return fn(*args, **kwargs)
            finally:
                seconds[name] += clock() - start
                calls[name] += 1

        return timed

    def total(self, prefix: str) -> float:
        return sum(s for n, s in self.seconds.items() if n.startswith(prefix))


def wrapper_overhead(n: int = 200_000) -> float:
    """Seconds per wrapped call spent *outside* the timed interval (the wrapper's own call and
    bookkeeping), which would otherwise be counted as decision time."""
    timer = Timer()

    def noop(*args: Any) -> None:
        return None

    wrapped = timer.wrap("noop", noop)
    best = float("inf")
    for _ in range(3):
        timer.seconds["noop"] = 0.0
        start = CLOCK()
        for i in range(n):
            wrapped(i, i, i)
        outer = CLOCK() - start
        start = CLOCK()
        for i in range(n):
            noop(i, i, i)
        direct = CLOCK() - start
        best = min(best, (outer - timer.seconds["noop"] - direct) / n)
    return max(best, 0.0)


class TimedStore:
    """A ``PartitionStateStore`` that times each call into the real store."""

    def __init__(self, store: InMemoryMetadataStore, timer: Timer) -> None:
        for name in (
            "get_partition_states",
            "create_partition_states",
            "update_leader_and_isr",
            "get_log_configs",
        ):
            setattr(self, name, timer.wrap(f"store.{name}", getattr(store, name)))


class TimedBatch:
    """A ``RequestBatch`` that times each call into the real batch (its send includes the channel)."""

    def __init__(self, batch: ControllerBrokerRequestBatch, timer: Timer) -> None:
        for name in (
            "new_batch",
            "clear",
            "add_leader_and_isr_request_for_brokers",
            "add_leader_and_isr_requests",
            "add_stop_replica_request_for_brokers",
            "add_update_metadata_request_for_brokers",
            "send_requests_to_brokers",
        ):
            setattr(self, name, timer.wrap(f"batch.{name}", getattr(batch, name)))


class NullIoStore:
    """Answers from memory at once: reads are precomputed (untimed), writes succeed as given. Only
    for the cross-check run that times the state machine with no store or batch work at all."""

    def __init__(self, store: InMemoryMetadataStore, partitions: list[TopicPartition]) -> None:
        self._reads = store.get_partition_states(partitions)

    def get_partition_states(self, partitions: Any) -> dict[TopicPartition, Any]:
        return self._reads

    def update_leader_and_isr(self, leader_and_isrs: Any, epoch: int, zkv: int) -> UpdateLeaderAndIsrResult:
        return UpdateLeaderAndIsrResult(dict(leader_and_isrs))

    def get_log_configs(self, topics: Any, defaults: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        return {t: dict(defaults) for t in topics}, {}


class NullBatch:
    """A request batch that drops everything (see ``NullIoStore``)."""

    def _drop(self, *args: Any) -> None:
        return None

    new_batch = clear = send_requests_to_brokers = _drop
    add_leader_and_isr_request_for_brokers = add_leader_and_isr_requests = _drop
    add_stop_replica_request_for_brokers = _drop
    add_update_metadata_request_for_brokers = _drop


# ------------------------------------------------------------------------------------- the cluster
class Cluster:
    """A fresh in-memory store and context: every partition has a state znode (leader = first
    replica, ISR = all replicas, epoch 0) and is cached; broker ``DEAD_BROKER`` is not live."""

    def __init__(self, partitions: int, brokers: int, rf: int, per_topic: int) -> None:
        self.store = InMemoryMetadataStore()
        self.context = ctx = ControllerContext()
        ctx.epoch, ctx.epoch_zk_version = self.store.register_controller_and_increment_controller_epoch(
            CONTROLLER_ID
        )
        ctx.set_live_brokers(
            {
                Broker(b, (EndPoint("localhost", 9000 + b),)): 1
                for b in range(1, brokers + 1)
                if b != DEAD_BROKER
            }
        )
        self.partitions: list[TopicPartition] = []
        states: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        for i in range(partitions):
            tp = TopicPartition(f"topic-{i // per_topic:05d}", i % per_topic)
            replicas = tuple((i + k) % brokers + 1 for k in range(rf))
            ctx.all_topics.add(tp.topic)
            ctx.update_partition_full_replica_assignment(tp, ReplicaAssignment(replicas))
            states[tp] = LeaderIsrAndControllerEpoch(LeaderAndIsr.initial(replicas[0], replicas), ctx.epoch)
            self.partitions.append(tp)
        for topic in sorted(ctx.all_topics):  # the topic znodes: the state znodes' parents
            self.store.create_topic(topic, {p: a for p, a in ctx.partition_assignments[topic].items()})
        created = self.store.create_partition_states(states, ctx.epoch_zk_version)
        assert not any(created.values()), "setup: state znodes not created"
        for tp, leadership in states.items():
            ctx.put_partition_leadership_info(tp, leadership)
            ctx.put_partition_state(tp, PartitionState.OFFLINE_PARTITION)
            for r in ctx.partition_replica_assignment(tp):
                ctx.put_replica_state(PartitionAndReplica(tp, r), ReplicaState.ONLINE_REPLICA)
        self.channel = RecordingBrokerChannel()
        self.events: list[object] = []

    def batch(self) -> ControllerBrokerRequestBatch:
        return ControllerBrokerRequestBatch(CONTROLLER_ID, self.context, self.channel, self.events.append)

    def last_replicas(self) -> list[PartitionAndReplica]:
        ctx = self.context
        return [PartitionAndReplica(tp, ctx.partition_replica_assignment(tp)[-1]) for tp in self.partitions]


def make_cluster(args: argparse.Namespace) -> Cluster:
    return Cluster(args.partitions, args.brokers, args.rf, args.partitions_per_topic)


# ------------------------------------------------------------------------------------- runs
Seconds = tuple[float, float]  # (CPU, wall)


def wiring(cluster: Cluster, timer: Timer | str | None, partitions: list[TopicPartition]) -> tuple[Any, Any]:
    """The store and batch for a run: real, real behind timing wrappers, or null (``"null"``)."""
    if timer == "null":
        return NullIoStore(cluster.store, partitions), NullBatch()
    if isinstance(timer, Timer):
        return TimedStore(cluster.store, timer), TimedBatch(cluster.batch(), timer)
    return cluster.store, cluster.batch()


def run_psm(cluster: Cluster, timer: Timer | str | None, audit: AuditSink | None = None) -> Seconds:
    store, batch = wiring(cluster, timer, cluster.partitions)
    psm = PartitionStateMachine(CONTROLLER_ID, cluster.context, store, batch, audit=audit)
    start, wall = CLOCK(), time.perf_counter()
    results = psm.handle_state_changes(
        cluster.partitions, PartitionState.ONLINE_PARTITION, OfflinePartitionLeaderElectionStrategy(False)
    )
    elapsed = (CLOCK() - start, time.perf_counter() - wall)
    elected = sum(isinstance(r, LeaderAndIsr) for r in results.values())
    assert elected == len(cluster.partitions), f"only {elected} partitions elected"
    return elapsed


def run_rsm(cluster: Cluster, timer: Timer | str | None, audit: AuditSink | None = None) -> Seconds:
    replicas = cluster.last_replicas()
    store, batch = wiring(cluster, timer, cluster.partitions)
    rsm = ReplicaStateMachine(CONTROLLER_ID, cluster.context, store, batch, audit=audit)
    start, wall = CLOCK(), time.perf_counter()
    rsm.handle_state_changes(replicas, ReplicaState.OFFLINE_REPLICA)
    elapsed = (CLOCK() - start, time.perf_counter() - wall)
    states = cluster.context.replica_states
    moved = sum(states[r] is ReplicaState.OFFLINE_REPLICA for r in replicas)
    assert moved == len(replicas), f"only {moved} replicas moved"
    return elapsed


def run_baseline(cluster: Cluster) -> Seconds:
    """The floor: read every state znode and conditionally write it back with epoch + 1."""
    store, ctx = cluster.store, cluster.context
    start, wall = CLOCK(), time.perf_counter()
    reads = store.get_partition_states(cluster.partitions)
    updates = {
        tp: r.leader_and_isr.new_epoch_and_zk_version()
        for tp, r in reads.items()
        if isinstance(r, LeaderIsrAndControllerEpoch)
    }
    result = store.update_leader_and_isr(updates, ctx.epoch, ctx.epoch_zk_version)
    elapsed = (CLOCK() - start, time.perf_counter() - wall)
    assert len(result.finished) == len(cluster.partitions) and not result.to_retry
    return elapsed


def workload(
    args: argparse.Namespace,
    name: str,
    run: Callable[[Cluster, Timer | str | None, AuditSink | None], Seconds],
) -> dict[str, Any]:
    """Median of ``--repeat`` runs of each variant, each on a fresh cluster; CPU seconds unless
    a key says ``wall``."""
    plain: list[Seconds] = []
    audited: list[Seconds] = []
    baseline: list[Seconds] = []
    null_io: list[Seconds] = []
    totals: list[float] = []
    overheads: list[float] = []
    parts: dict[str, list[float]] = {}
    per_call = wrapper_overhead()
    for _ in range(args.repeat):
        plain.append(run(make_cluster(args), None, None))
        audited.append(run(make_cluster(args), None, RecordingAuditSink()))
        baseline.append(run_baseline(make_cluster(args)))
        null_io.append(run(make_cluster(args), "null", None))
        timer = Timer()
        totals.append(run(make_cluster(args), timer, None)[0])
        for key in ("store", "batch"):
            parts.setdefault(key, []).append(timer.total(key + "."))
        for key, seconds in timer.seconds.items():
            parts.setdefault(key, []).append(seconds)
        overheads.append(per_call * sum(timer.calls.values()))
    n = args.partitions

    def med(xs: list[Seconds], i: int = 0) -> float:
        return statistics.median(x[i] for x in xs)

    e2e, floor, total = med(plain), med(baseline), statistics.median(totals)
    store_s, batch_s = statistics.median(parts["store"]), statistics.median(parts["batch"])
    overhead = statistics.median(overheads)
    decision = max(total - store_s - batch_s - overhead, 1e-9)
    return {
        "workload": name,
        "transitions": n,
        "end_to_end": {
            "seconds": round(e2e, 4),
            "per_second": round(n / e2e),
            "wall_seconds": round(med(plain, 1), 4),
        },
        "audited": {"seconds": round(med(audited), 4), "per_second": round(n / med(audited))},
        "breakdown": {
            "total_seconds": round(total, 4),
            "store_seconds": round(store_s, 4),
            "batch_and_channel_seconds": round(batch_s, 4),
            "wrapper_overhead_seconds": round(overhead, 4),
            "decision_seconds": round(decision, 4),
            "decision_rate": round(n / decision),
            "calls": {k: round(statistics.median(v), 4) for k, v in parts.items() if "." in k and max(v) > 0},
        },
        "decision_only_null_io": {
            "what": "cross-check: the same call with a store and batch that do nothing",
            "seconds": round(med(null_io), 4),
            "per_second": round(n / med(null_io)),
        },
        "baseline": {
            "what": "store batched read + conditional write, no controller logic",
            "seconds": round(floor, 4),
            "per_second": round(n / floor),
        },
        "end_to_end_over_baseline": round(e2e / floor, 2),
        "runs_cpu_wall": {
            "end_to_end": [[round(c, 3), round(w, 3)] for c, w in plain],
            "baseline": [[round(c, 3), round(w, 3)] for c, w in baseline],
        },
    }


def calibration(n: int = 300_000) -> float:
    """CPU seconds of a fixed loop of the operations the state machines are made of (tuple and
    dict building, lookups, attribute access), best of three: compares this machine's speed
    between runs, since these shared machines are slower when busy, CPU time included."""
    best = float("inf")
    for _ in range(3):
        start = CLOCK()
        table: dict[TopicPartition, tuple[int, ...]] = {}
        for i in range(n):
            tp = TopicPartition("t", i)
            table[tp] = (i, i + 1, i + 2)
            _ = table.get(tp, ())[0] + tp.partition
        best = min(best, CLOCK() - start)
    return best


def profile(args: argparse.Namespace, top: int = 25) -> dict[str, list[str]]:
    """cProfile of one run of each workload; the top functions by own time, as text lines."""
    out: dict[str, list[str]] = {}
    for name, run in (("offline_to_online", run_psm), ("replicas_to_offline", run_rsm)):
        cluster = make_cluster(args)
        profiler = cProfile.Profile()
        profiler.enable()
        run(cluster, None, None)
        profiler.disable()
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(top)
        lines = [ln.rstrip() for ln in text.getvalue().splitlines() if ln.strip()]
        start = next(i for i, ln in enumerate(lines) if ln.lstrip().startswith("ncalls"))
        out[name] = lines[start : start + top + 1]
        print(f"\n== profile: {name} (top {top} by own time) ==", file=sys.stderr)
        print("\n".join(out[name]), file=sys.stderr)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--partitions", type=int, default=100_000)
    parser.add_argument("--brokers", type=int, default=5)
    parser.add_argument("--rf", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--partitions-per-topic", type=int, default=50)
    parser.add_argument("--profile", action="store_true", help="also cProfile one run of each (stderr)")
    args = parser.parse_args()
    for name, value, low in (
        ("--partitions", args.partitions, 1),
        ("--brokers", args.brokers, 2),
        ("--rf", args.rf, 2),
        ("--repeat", args.repeat, 1),
        ("--partitions-per-topic", args.partitions_per_topic, 1),
    ):
        if value < low:
            parser.error(f"{name} must be at least {low}, got {value}")
    if args.rf > args.brokers:
        parser.error(f"--rf {args.rf} cannot exceed --brokers {args.brokers}")
    logging.disable(logging.INFO)  # the state-change log's INFO summaries are not what is measured
    result: dict[str, Any] = {
        "bench": "core_transitions",
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_avg_1m": round(os.getloadavg()[0], 2),
        "layout": {
            "partitions": args.partitions,
            "brokers": args.brokers,
            "rf": args.rf,
            "partitions_per_topic": args.partitions_per_topic,
            "dead_broker": DEAD_BROKER,
            "repeat": args.repeat,
            "statistic": "median",
        },
        "workloads": [
            workload(args, "offline_to_online", run_psm),
            workload(args, "replicas_to_offline", run_rsm),
        ],
        "calibration_cpu_seconds": round(calibration(), 4),
        "target_per_second": 100_000,
        "clock": "process CPU time (time.process_time); wall seconds where named",
    }
    if args.profile:
        result["profile"] = profile(args)
    print(json.dumps(result, indent=2))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    with RESULTS.open("a") as f:
        f.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
