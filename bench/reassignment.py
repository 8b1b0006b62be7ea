"""A big reassignment, end to end: ``reassign --execute`` of every partition of a 20,000-partition
cluster, then ``reassign --cancel`` while it runs, both through the CLI as a user runs them.

400 topics x 50 partitions x RF 2 on five real broker processes (``failover_layout``), written into
an embedded ZooKeeper and settled. The plan moves every partition one broker along (replicas
``(b, b+1)`` become ``(b+1, b+2)``: one replica added, one removed per partition). We time, from
the moment ``kafka-controller reassign --execute`` is started:

* ``execute_seconds``: until the command returns (the controller answered the request after
  starting every move);
* ``all_started_seconds``: until every partition's topic znode shows the move (adding replicas
  written) or its target already (a move that completed), polled through ZooKeeper;
* ``first_leader_and_isr_seconds``: until the controller logs the first LeaderAndIsr it sent for
  a reassigned partition;

The brokers fetch every 12 s (``--fetch-interval-ms``; their default is 200 ms), so that a new
replica joins the ISR a fetch later and the moves are still in flight when the cancel comes (at the
default, all 20,000 complete within seconds and a cancel finds nothing to cancel). As soon as the
first adding replica is seen in ZooKeeper, ``reassign --cancel`` of the same plan is started beside
it: ``cancel_seconds`` runs from its start to its exit (goal: within 10 s), with its exit code and
how many moves it cancelled; ``cancel_command_floor_seconds`` is the same command run again once
nothing moves (start-up, ZooKeeper reads, the Kafka client, the list request): what a cancel costs
on this machine at that moment with no controller work behind it. Afterwards the topic znodes are
read until no partition is being reassigned, and every partition is checked to be on its original
replicas (cancelled) or its target (completed before the cancel reached it); ``wrong`` must be 0.

``--deadline`` bounds the wait for the moves to start (the code before batching needed 107 s here
and never answered the request): the result then says how many had started, and the rate. Prints
one JSON object and appends it to ``bench/results/reassignment.jsonl``.

    .venv/bin/python bench/reassignment.py                 # 20,000 partitions
    .venv/bin/python bench/reassignment.py --topics 40     # 2,000
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import (
    BROKERS,
    FIRST_BROKER_ID,
    Assignment,
    BenchCluster,
    LogTail,
    bench_cluster,
    cpu_seconds,
    failover_layout,
    report,
    rss_mb,
)
from kafka_controller.admin.reassignment import encode_reassignment_json
from kafka_controller.domain.errors import MetadataStoreError
from kafka_controller.domain.values import ReplicaAssignment, TopicPartition

GOAL_CANCEL_S = 10.0
PARTITIONS_PER_TOPIC = 50


def shifted(assignment: Assignment) -> dict[TopicPartition, tuple[int, ...]]:
    """Every replica one broker along: one replica added and one removed per partition."""
    ids = [FIRST_BROKER_ID + b for b in range(BROKERS)]
    return {
        TopicPartition(t, p): tuple(ids[(ids.index(r) + 1) % BROKERS] for r in replicas)
        for t, parts in assignment.items()
        for p, replicas in parts.items()
    }


def read_assignments(bench: BenchCluster) -> dict[TopicPartition, ReplicaAssignment]:
    out: dict[TopicPartition, ReplicaAssignment] = {}
    for read in bench.store.get_replica_assignment_and_topic_ids(sorted(bench.assignment)).values():
        if not isinstance(read, MetadataStoreError):
            out.update(read.assignment)
    return out


def cli(bench: BenchCluster, *args: str, timeout: float) -> list[str]:
    exe = str(Path(sys.executable).with_name("kafka-controller"))
    return [exe, "reassign", *args, "--zookeeper", bench.cluster.connect_string, "--timeout", f"{timeout:g}"]


class Timed:
    """A command run in a thread, with its start, end and exit code."""

    def __init__(self, command: list[str]) -> None:
        self.command = command
        self.started = self.ended = 0.0
        self.returncode: int | None = None
        self.stderr = self.stdout = ""
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        self.started = time.perf_counter()
        done = subprocess.run(self.command, capture_output=True, text=True, env=os.environ.copy())
        self.ended = time.perf_counter()
        self.returncode = done.returncode
        self.stderr = done.stderr[-2000:]
        self.stdout = done.stdout

    def start(self) -> Timed:
        self.thread.start()
        return self

    def seconds(self) -> float | None:
        return round(self.ended - self.started, 3) if self.ended else None


def _tail(command: Timed) -> list[str]:
    """The last lines a failed command wrote, each cut short (a Kafka client's error can quote a
    whole request)."""
    if not command.returncode:
        return []
    return [line[:300] for line in command.stderr.strip().splitlines()[-3:]]


def _cancelled(command: Timed) -> int | None:
    """How many moves ``reassign --cancel --json`` says it cancelled."""
    try:
        return len(json.loads(command.stdout)["cancelled"])
    except (ValueError, KeyError, TypeError):
        return None


def run(
    bench: BenchCluster, deadline: float, cancel_timeout: float, batch_size: int | None = None
) -> dict[str, Any]:
    plan = shifted(bench.assignment)
    origin = {tp: ra.replicas for tp, ra in read_assignments(bench).items()}
    work = Path(tempfile.mkdtemp(prefix="kc-reassign-bench-"))
    plan_file = work / "plan.json"
    plan_file.write_text(encode_reassignment_json(plan))
    controller = bench.cluster.controller()[0]
    if controller is None:
        raise SystemExit("no controller")
    pid = bench.pid(controller)
    log = LogTail(bench.log_path(controller))
    cpu0 = cpu_seconds(pid)

    batches = ["--batch-size", str(batch_size)] if batch_size else []
    execute = Timed(
        cli(bench, "--execute", *batches, "--reassignment-json-file", str(plan_file), timeout=deadline)
    )
    cancel = Timed(
        cli(bench, "--cancel", "--json", "--reassignment-json-file", str(plan_file), timeout=cancel_timeout)
    )
    t0 = time.perf_counter()
    execute.start()
    first_seen: float | None = None
    all_started: float | None = None
    started = 0
    while time.perf_counter() - t0 < deadline:
        current = read_assignments(bench)
        started = sum(
            1
            for tp, target in plan.items()
            if (ra := current.get(tp)) and (ra.adding_replicas or ra.replicas == target)
        )
        now = time.perf_counter()
        if started and first_seen is None:
            first_seen = now
            cancel.start()
        if started == len(plan):
            all_started = now
            break
        time.sleep(0.05)
    started_by_deadline = started
    execute.thread.join(deadline + 60)
    if first_seen is not None:
        cancel.thread.join(cancel_timeout + 60)
    cpu = cpu_seconds(pid) - cpu0

    # Quiet: nothing left reassigning (or the deadline again), then where every partition ended.
    settle_deadline = time.perf_counter() + deadline
    while True:
        current = read_assignments(bench)
        moving = sum(1 for ra in current.values() if ra.is_being_reassigned)
        if not moving or time.perf_counter() > settle_deadline:
            break
        time.sleep(0.5)
    # A cancel restores the original replicas; not always their order (Kafka's origin is RS minus
    # AR, in RS's order, where the target came first), so the leader may be preferred elsewhere.
    settled = {tp: ra.replicas for tp, ra in current.items() if not ra.is_being_reassigned}
    back = sum(1 for tp in plan if set(settled.get(tp, ())) == set(origin[tp]))
    back_in_order = sum(1 for tp in plan if settled.get(tp) == origin[tp])
    moved = sum(1 for tp in plan if settled.get(tp) == plan[tp])
    # The same cancel with nothing left to cancel: what the command costs by itself (start-up,
    # ZooKeeper reads, a Kafka client, the list request) on this machine at this moment.
    floor = Timed(cancel.command).start()
    floor.thread.join(cancel_timeout + 60)
    first_lai = log.time_of("reassigned partition")  # "for reassigned partition(s)"
    t0_wall = time.time() - (time.perf_counter() - t0)
    return {
        "partitions": len(plan),
        "execute_seconds": execute.seconds(),
        "execute_exit_code": execute.returncode,
        "execute_stderr_tail": _tail(execute),
        "all_started_seconds": round(all_started - t0, 3) if all_started else None,
        "started_by_deadline": started_by_deadline,
        "deadline_seconds": deadline,
        "start_rate_per_second": round(started_by_deadline / ((all_started or time.perf_counter()) - t0), 1),
        "first_leader_and_isr_seconds": round(first_lai - t0_wall, 3) if first_lai else None,
        "cancel_issued_at_seconds": round(cancel.started - t0, 3) if cancel.started else None,
        "cancel_seconds": cancel.seconds(),
        "cancel_exit_code": cancel.returncode,
        "cancelled": _cancelled(cancel),
        "cancel_stderr_tail": _tail(cancel),
        "cancel_command_floor_seconds": floor.seconds(),
        "cancel_meets_goal": cancel.returncode == 0 and (cancel.seconds() or 1e9) <= GOAL_CANCEL_S,
        "controller_cpu_seconds": round(cpu, 2),
        "controller_rss_mb": round(rss_mb(pid), 1),
        "after": {
            "still_reassigning": moving,
            "on_original_replicas": back,
            "on_original_replicas_in_original_order": back_in_order,
            "on_target_replicas": moved,
            "wrong": len(plan) - back - moved - moving,
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topics", type=int, default=400, help="topics of 50 partitions (default 400)")
    parser.add_argument(
        "--deadline", type=float, default=300.0, help="seconds to wait for every move to start (default 300)"
    )
    parser.add_argument(
        "--fetch-interval-ms",
        type=int,
        default=12_000,
        help="the brokers' sim.fetch.interval.ms (default 12000: a new replica joins the ISR a fetch "
        "later, so the moves are still in flight when the cancel comes; under the 30 s lag time)",
    )
    parser.add_argument(
        "--batch-size",
        type=int,
        help="execute with --batch-size N: the cancel then gets in between two requests, and the "
        "execute stops sending the rest",
    )
    parser.add_argument("--keep", action="store_true", help="keep the cluster's directory (logs)")
    parser.add_argument("--cancel-timeout", type=float, default=60.0, help="reassign --cancel's --timeout")
    args = parser.parse_args()
    if not 1 <= args.topics <= 2000:
        parser.error(f"--topics must be in 1..2000, got {args.topics}")
    config = {"sim.fetch.interval.ms": str(args.fetch_interval_ms)}
    assignment = failover_layout(args.topics, PARTITIONS_PER_TOPIC, rf=2)
    with bench_cluster(assignment, broker_config=config, keep_dir=args.keep) as bench:
        if args.keep:
            print(f"cluster directory: {bench.log_path(FIRST_BROKER_ID).parent.parent}", file=sys.stderr)
        result = run(bench, args.deadline, args.cancel_timeout, args.batch_size)
        result["setup_seconds"] = {k: round(v, 1) for k, v in bench.setup_seconds.items()}
    result.update(
        {
            "topics": args.topics,
            "execute_batch_size": args.batch_size,
            "replication_factor": 2,
            "brokers": BROKERS,
            "goal_cancel_seconds": GOAL_CANCEL_S,
            "broker_config": config,
            "code": os.environ.get("KAFKA_CONTROLLER_BENCH_LABEL", "working tree"),
        }
    )
    report("reassignment", result)


if __name__ == "__main__":
    main()
