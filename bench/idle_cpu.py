"""What a settled, idle cluster costs: each broker's CPU while nothing happens but the simulated
data plane (followers fetching, leaders checking ISRs, logs growing at the produce rate).

10,000 partitions (200 topics x 50), RF 2, on five real broker processes, written into an embedded
ZooKeeper and settled, with the brokers' **default** settings (``sim.fetch.interval.ms=200``,
auto rebalance on) unless ``--config`` says otherwise. Then, for ``--seconds`` (20 by default),
each broker's user + system CPU time from ``/proc/<pid>/stat``; the figure is cores (CPU seconds
per second). The 1-minute load average before and after is reported: on a shared machine a busy
neighbour slows the brokers' work but does not add to it. Prints one JSON object and appends it
to ``bench/results/idle_cpu.jsonl``.

    .venv/bin/python bench/idle_cpu.py
    .venv/bin/python bench/idle_cpu.py --config sim.fetch.interval.ms=5000   # the lighter setting
    .venv/bin/python bench/idle_cpu.py --scale 0.01 --seconds 2               # CI
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import (
    BenchCluster,
    bench_cluster,
    cpu_seconds,
    failover_layout,
    report,
)
from kafka_controller.broker.config import parse_assignments
from kafka_controller.domain.errors import InvalidArgumentError


def measure(bench: BenchCluster, seconds: float) -> dict[str, Any]:
    pids = {f"broker_{b}": bench.pid(b) for b in bench.cluster.running_broker_ids()}
    pids.update(bench.zk_pids())
    load_before = round(os.getloadavg()[0], 2)
    before = {name: cpu_seconds(pid) for name, pid in pids.items()}
    t0 = time.monotonic()
    time.sleep(seconds)
    elapsed = time.monotonic() - t0
    cores = {name: round((cpu_seconds(pid) - before[name]) / elapsed, 3) for name, pid in pids.items()}
    brokers = [v for k, v in cores.items() if k.startswith("broker_")]
    return {
        "seconds": round(elapsed, 2),
        "cores_by_process": cores,
        "broker_cores_max": max(brokers),
        "broker_cores_mean": round(sum(brokers) / len(brokers), 3),
        "load_1m_before": load_before,
        "load_1m_after": round(os.getloadavg()[0], 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of 10,000 partitions (default 1)")
    parser.add_argument("--rf", type=int, default=2, choices=[1, 2, 3], help="replication factor (default 2)")
    parser.add_argument("--seconds", type=float, default=20.0, help="measuring window (default 20)")
    parser.add_argument("--config", action="append", default=[], metavar="KEY=VALUE", help="broker setting")
    args = parser.parse_args()
    if not 0 < args.scale <= 10:
        parser.error(f"--scale must be in (0, 10], got {args.scale}")
    if not 0 < args.seconds <= 600:
        parser.error(f"--seconds must be in (0, 600], got {args.seconds}")
    try:
        overrides = parse_assignments(args.config)
    except InvalidArgumentError as e:
        parser.error(str(e))
    topics = max(1, int(200 * args.scale))
    with bench_cluster(failover_layout(topics=topics, rf=args.rf), broker_config=overrides) as bench:
        result = measure(bench, args.seconds)
        result["setup_seconds"] = {k: round(v, 1) for k, v in bench.setup_seconds.items()}
    report(
        "idle_cpu",
        {
            "partitions": topics * 50,
            "rf": args.rf,
            "brokers": len(bench.cluster.broker_ids),
            "broker_config": overrides,
            **result,
        },
    )


if __name__ == "__main__":
    main()
