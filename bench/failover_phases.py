"""Where the failover's event thread spends its CPU, phase by phase, in one process.

Runs ``controller_inmemory``'s failover (``--rf 3 --dead 1`` by default: 100,000 partitions, one
broker dead) and times the state machines' phases on the event thread's own CPU clock
(``time.thread_time``), by wrapping the methods that make them up. The in-memory store's writes run
on the event thread too, so the ISR removal and the elections include them. Phases nest (``R``
holds 1-4, ``2`` holds 3, ``4`` holds 4a-4b, ``P`` holds 5-6); the figures are medians over
``--reps``. Prints one JSON line and appends it to ``bench/results/failover_phases.jsonl``.

    .venv/bin/python bench/failover_phases.py [--rf 3] [--dead 1] [--reps 5] [--distinct-states] [--audit]

``--audit`` records the failover to an ``AuditWriter`` on a fresh SQLite store with its journal, as
the controller's default store is, and times the recorders' phases too (``a1``-``a4``: building the
rows, and handing them to the writer, which journals them on the event thread). A phase a version of
the code does not have is left out, so that two versions can be compared with one copy of this file.

Use it to check that a change to a phase moves that phase (whole-process CPU varies by more than
most single changes on a shared machine).
"""

from __future__ import annotations

import argparse
import functools
import gc
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import report
from bench.controller_inmemory import bench_failover
from kafka_controller.audit.writer import AuditWriter
from kafka_controller.core import (  # the modules whose methods make up the phases
    partition_election,
    partition_records,
    partition_state_machine,
    replica_isr,
    replica_offline,
    replica_records,
    replica_state_machine,
    request_batch,
)

_RSM = replica_state_machine.ReplicaStateMachine
_PSM = partition_state_machine.AbstractPartitionStateMachine
#: (owner, method, phase): each phase is the thread CPU spent inside the method.
PHASES: list[tuple[Any, str, str]] = [
    (_RSM, "startup", "R replica state machine startup"),
    (
        replica_state_machine.AbstractReplicaStateMachine,
        "initialize_replica_state",
        "1 initial replica states",
    ),
    (_RSM, "_startup_online_in_bulk", "2 OnlineReplica"),
    (
        request_batch.ControllerBrokerRequestBatch,
        "add_leader_and_isr_requests_by_replica",
        "3 OnlineReplica: requests",
    ),
    (replica_offline.OfflineReplicaStep, "to_offline", "4 OfflineReplica"),
    (replica_isr.IsrRemoval, "remove_replicas_from_isr", "4a OfflineReplica: ISR removal"),
    (
        request_batch.ControllerBrokerRequestBatch,
        "add_isr_removal_requests",
        "4b OfflineReplica: requests after the ISR removal",
    ),
    (_PSM, "startup", "P partition state machine startup"),
    (
        partition_state_machine.AbstractPartitionStateMachine,
        "initialize_partition_state",
        "5 initial partition states",
    ),
    (partition_election.PartitionLeaderElector, "elect_leader_for_partitions", "6 elections"),
    (
        request_batch.ControllerBrokerRequestBatch,
        "add_leader_and_isr_requests",
        "x LeaderAndIsr entries queued",
    ),
    (request_batch.ControllerBrokerRequestBatch, "send_requests_to_brokers", "x requests sent"),
]
_REPLICA_RECORDER = replica_records.ReplicaTransitionRecorder
#: The recorders' phases, timed with ``--audit``.
AUDIT_PHASES: list[tuple[Any, str, str]] = [
    (_REPLICA_RECORDER, "record_unchanged_replicas", "a1 OnlineReplica: audit rows"),
    (_REPLICA_RECORDER, "record_changed", "a2 OfflineReplica: audit rows"),
    (partition_records.PartitionTransitionRecorder, "record_elections", "a3 elections: audit rows"),
    (_REPLICA_RECORDER, "finish", "a4 replica rows handed to the writer"),
    (partition_records.PartitionTransitionRecorder, "deliver", "a4 partition rows handed to the writer"),
]


def _timed(owner: Any, name: str, phase: str, spent: dict[str, float]) -> bool:
    """Time ``owner.name`` into ``spent[phase]``; False, nothing done, if there is no such method."""
    method = getattr(owner, name, None)
    if method is None:
        return False

    @functools.wraps(method)
    def timed(*args: Any, **kwargs: Any) -> Any:
        start = time.thread_time()
        try:
            return method(*args, **kwargs)
        finally:
            spent[phase] += time.thread_time() - start

    setattr(owner, name, timed)
    return True


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rf", type=int, default=3)
    parser.add_argument("--dead", type=int, default=1)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--distinct-states", action="store_true")
    parser.add_argument(
        "--audit", action="store_true", help="record to an AuditWriter on SQLite and time the recorders"
    )
    args = parser.parse_args()
    spent: dict[str, float] = defaultdict(float)
    timed = [
        p for owner, name, p in PHASES + (AUDIT_PHASES if args.audit else []) if _timed(owner, name, p, spent)
    ]
    runs: list[dict[str, float]] = []
    process_cpu: list[float] = []
    for _ in range(args.reps):
        spent.clear()
        with tempfile.TemporaryDirectory() as store:
            writer = (
                AuditWriter(f"sqlite:///{store}/audit.db", spool_dir=f"{store}/spool") if args.audit else None
            )
            try:
                result = bench_failover(
                    args.scale, args.audit, args.rf, args.dead, args.distinct_states, writer
                )
            finally:
                if writer is not None:
                    writer.close()
        runs.append(dict(spent))
        process_cpu.append(result["cpu_seconds"])
        gc.collect()
    phases = {p: round(statistics.median(r.get(p, 0.0) for r in runs), 4) for p in dict.fromkeys(timed)}
    report(
        "failover_phases",
        {
            "scale": args.scale,
            "rf": args.rf,
            "dead_brokers": args.dead,
            "distinct_states": args.distinct_states,
            "audit": args.audit,
            "reps": args.reps,
            "process_cpu_s": round(statistics.median(process_cpu), 3),
            "event_thread_cpu_s_by_phase": phases,
        },
    )


if __name__ == "__main__":
    main()
