"""Crash detection beyond Kafka: kill -9 of the controller, with and without the supervisor's
session close, in the same run, on the brokers' default settings.

10,000 partitions (200 topics x 50), RF 2, on five real broker processes with the brokers' own
defaults (Kafka 2.8's ``zookeeper.session.timeout.ms=18000``, the simulated followers fetching
every 200 ms, auto rebalance on). Each repetition kills the active controller from outside the
cluster (SIGKILL, as the OOM killer would) twice, once per mode, restarting it and letting the
cluster settle in between:

* ``supervised``: ``LocalCluster``'s exit supervisor sees the exit and closes the dead broker's
  ZooKeeper session from its session file, so ``/controller`` and ``/brokers/ids/<id>`` go at once;
* ``unsupervised``: the same kill with the session close switched off: Kafka's behaviour, the
  session lapses after the timeout.

For each kill: ``elected_seconds`` from the kill to the new ``/controller``'s ctime (ZooKeeper's
clock, this host), and ``all_led_seconds`` from the kill to the last partition-state write that
left every partition with a live replica led by a live broker (that znode's mtime). Goals:
elected <= 0.3 s and all led <= 1 s with the supervisor. And what a Kafka client sees: a process of
its own (``bench/_client_watch.py``, librdkafka through confluent-kafka) lists a surviving broker's
metadata every 50 ms from before the kill; ``client_all_led_seconds`` runs from the kill to the end
of the first listing in which every partition is led by a live broker and the dead one is gone
(``client_listing_seconds``: how long that listing took, the figure's uncertainty). Prints one
JSON object (the median rep of each mode, every rep's figures, the 1-minute load before each kill)
and appends it to ``bench/results/crash_detection.jsonl``.

    .venv/bin/python bench/crash_detection.py --reps 3
    .venv/bin/python bench/crash_detection.py --reps 3 --zk-servers 3   # on a 3-server ensemble
    .venv/bin/python bench/crash_detection.py --scale 0.01 --reps 1 --session-timeout-ms 6000  # CI
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._client_watch import ClientWatch
from bench._common import (
    BenchCluster,
    add_zk_servers_option,
    bench_cluster,
    failover_layout,
    poll,
    report,
    settle,
)
from bench.failover import leaderless, new_controller
from kafka_controller.zk import paths as P

GOALS = {"elected_seconds": 0.3, "all_led_seconds": 1.0}
#: The brokers' own defaults, spelled out: the benchmark clusters run them too (``BENCH_BROKER_CONFIG``
#: is empty) except for ``LocalCluster``'s shorter sessions and shutdown backoff.
DEFAULT_SETTINGS = {
    "zookeeper.session.timeout.ms": "18000",
    "controlled.shutdown.retry.backoff.ms": "5000",
    "sim.fetch.interval.ms": "200",
    "auto.leader.rebalance.enable": "true",
}
MODES = ("supervised", "unsupervised")


def crash_controller(bench: BenchCluster, supervised: bool) -> dict[str, Any]:
    cluster, store = bench.cluster, bench.store
    assert cluster.session_closer is not None
    old, old_epoch = cluster.controller()
    if old is None:
        raise SystemExit("no controller")
    cluster.session_closer.enabled = supervised
    earlier = len(cluster.session_closer.outcomes)  # outcomes of earlier runs' kills are not this one's
    load = round(os.getloadavg()[0], 2)
    watch = ClientWatch(bench, old)
    killed = time.time()
    cluster.crash_broker(old)
    new = int(poll(lambda: new_controller(bench, old), 120, "a new controller", 0.01))
    stat = store.backend.exists(P.CONTROLLER_PATH)
    if stat is None:
        raise SystemExit("the new controller vanished")
    elected = stat.ctime / 1000.0
    deadline = time.monotonic() + 300
    while True:
        live = set(cluster.registered())
        pending, last_write, _ = leaderless(bench, live, stat.czxid)
        if not pending:
            break
        if time.monotonic() > deadline:
            raise SystemExit(f"{pending} partitions with a live replica still have no live leader")
        time.sleep(0.1)
    led = max(elected, last_write)
    closed = []
    if supervised:  # recorded once the close is read back, a moment after the registration went
        closed = poll(
            lambda: [o for b, _, o in cluster.session_closer.outcomes[earlier:] if b == old],  # type: ignore[union-attr]
            30,
            "the supervisor's outcome",
        )
    result = {
        "mode": "supervised" if supervised else "unsupervised",
        "old_controller": old,
        "new_controller": new,
        "epochs": [old_epoch, store.get_controller_epoch()[0]],  # type: ignore[index]
        "elected_seconds": round(elected - killed, 3),
        "all_led_seconds": round(led - killed, 3),
        "election_to_all_led_seconds": round(led - elected, 3),
        **watch.result(killed),
        "session_closed": bool(closed) and closed[-1] is not None and closed[-1].value == "closed",
        "load_1m_before_kill": load,
    }
    cluster.start_broker(old, timeout=120)  # waits for the old registration to go first
    settle(bench)
    return result


def summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    keys = ("elected_seconds", "all_led_seconds", "election_to_all_led_seconds", "client_all_led_seconds")
    for key in keys:
        values = [r[key] for r in runs]
        out[key] = round(statistics.median(values), 3)
        out[f"{key}_all"] = values
    out["sessions_closed"] = sum(r["session_closed"] for r in runs)
    out["load_1m_before_kill_all"] = [r["load_1m_before_kill"] for r in runs]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of 10,000 partitions")
    parser.add_argument("--reps", type=int, default=3, help="kills per mode (default 3)")
    parser.add_argument(
        "--session-timeout-ms", type=int, default=18_000, help="zookeeper.session.timeout.ms (Kafka's 18000)"
    )
    add_zk_servers_option(parser)
    args = parser.parse_args()
    if not 0 < args.scale <= 4:
        parser.error(f"--scale must be in (0, 4], got {args.scale}")
    if not 1 <= args.reps <= 9:
        parser.error(f"--reps must be in 1..9, got {args.reps}")
    topics = max(1, int(200 * args.scale))
    layout = failover_layout(topics=topics, partitions=50, rf=2)
    runs: dict[str, list[dict[str, Any]]] = {m: [] for m in MODES}
    settings = {**DEFAULT_SETTINGS, "zookeeper.session.timeout.ms": str(args.session_timeout_ms)}
    with bench_cluster(layout, broker_config=settings, zk_servers=args.zk_servers) as bench:
        for _ in range(args.reps):
            for mode in MODES:
                runs[mode].append(crash_controller(bench, mode == "supervised"))
                print(json.dumps(runs[mode][-1]), file=sys.stderr, flush=True)
    supervised = summary(runs["supervised"])
    result = {
        "scale": args.scale,
        "partitions": topics * 50,
        "replication_factor": 2,
        "brokers": 5,
        "broker_settings": settings,
        "zookeeper_servers": args.zk_servers,
        "goals_seconds": GOALS,
        **{mode: summary(r) for mode, r in runs.items()},
        "goals_met": all(supervised[k] <= v for k, v in GOALS.items()),
        "client_all_led_goal_met": supervised["client_all_led_seconds"] <= GOALS["all_led_seconds"],
        "runs": runs,
    }
    report("crash_detection", result)


if __name__ == "__main__":
    main()
