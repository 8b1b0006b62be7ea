"""How the failover's cost grows with the cluster: 10K, 50K, 100K and 200K partitions.

Each point is ``bench/failover.py``'s run (five real brokers at their default settings, Kafka's
layout of 50 partitions a topic, the controller's broker killed, election -> every partition led)
with its own floor measured on the same cluster, the median of ``--reps`` runs. 200,000 partitions
is the ceiling Kafka recommends for a ZooKeeper-mode cluster.

A linear cost has a flat ``seconds_per_100k`` column and a flat ratio to the floor (the floor is
itself linear: batched reads and writes of a znode a partition). The report adds
``growth``: each point's seconds per partition divided by the smallest point's, so 1.0 everywhere
is linear and a rising column is the super-linear part.

    .venv/bin/python bench/failover_curve.py                 # RF 3, audited off, 3 reps a point
    .venv/bin/python bench/failover_curve.py --rf 1 --reps 1 --points 10000 50000
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import median_run, report
from bench.failover import run_once

PARTITIONS_PER_TOPIC = 50
DEFAULT_POINTS = (10_000, 50_000, 100_000, 200_000)


def point(partitions: int, rf: int, reps: int, audit: bool) -> dict[str, Any]:
    """The median run of one cluster size, with the figures the curve is read by."""
    run = median_run(
        lambda: run_once(partitions // PARTITIONS_PER_TOPIC, rf, audit), reps, "failover_seconds"
    )
    seconds = float(run["failover_seconds"])
    return {
        "partitions": partitions,
        "failover_seconds": seconds,
        "failover_seconds_all": run.get("failover_seconds_all", [seconds]),
        "floor_seconds": run["floor"]["seconds"],
        "ratio_to_floor": run["ratio_to_floor"],
        "seconds_per_100k": round(seconds * 100_000 / partitions, 3),
        "controller_cpu_seconds": run["controller_cpu_seconds"],
        "controller_rss_mb_after_failover": run["controller_rss_mb_after_failover"],
        "controller_peak_rss_mb": run.get("controller_peak_rss_mb"),
    }


def with_growth(points: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each point's seconds per partition relative to the smallest cluster's (1.0 = linear)."""
    base = points[0]["failover_seconds"] / points[0]["partitions"]
    return [{**p, "growth": round(p["failover_seconds"] / p["partitions"] / base, 2)} for p in points]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rf", type=int, choices=(1, 2, 3), default=3, help="replication factor")
    parser.add_argument("--reps", type=int, default=3, help="runs a point; the median is reported")
    parser.add_argument("--audit", action="store_true", help="with the SQLite audit store on")
    parser.add_argument(
        "--points",
        type=int,
        nargs="+",
        default=list(DEFAULT_POINTS),
        help="cluster sizes in partitions (multiples of 50, at most 400,000)",
    )
    args = parser.parse_args()
    if not 1 <= args.reps <= 9:
        parser.error(f"--reps must be in 1..9, got {args.reps}")
    bad = [p for p in args.points if p <= 0 or p % PARTITIONS_PER_TOPIC or p > 400_000]
    if bad:
        parser.error(f"--points must be multiples of 50 in (0, 400000], got {bad}")
    points = [point(n, args.rf, args.reps, args.audit) for n in sorted(set(args.points))]
    report(
        "failover_curve",
        {
            "rf": args.rf,
            "audit": args.audit,
            "brokers": 5,
            "broker_config": "defaults",
            "points": with_growth(points),
        },
    )


if __name__ == "__main__":
    main()
