"""Benchmark: what the bounded connection layer costs a request, over loopback.

A ``TransportServer`` with an echo handler, measured from ``TransportClient``s in this process:

* ``small_rtt_us``: round trips of a ~60-byte request on one connection (p50, p99);
* ``concurrent_rps``: requests per second from 16 connections at once, one request in flight each;
* ``large_echo_ms``: a 6 MB request echoed back (a 100,000-partition LeaderAndIsr is ~6 MB);
* ``threads``: the process's threads with 200 idle connections open, and without.

Each request crosses the network thread twice and a handler thread once (the old layer ran the
handler on the connection's own thread). Prints one JSON document and appends it as a line to
``bench/results/connection_layer.jsonl``.

    .venv/bin/python bench/connection_layer.py [--quick] [--label TEXT]

Run it from an older checkout with ``--label`` to compare layers on the same machine and load.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kafka_controller.transport.client import TransportClient
from kafka_controller.transport.codec import DEFAULT_APIS
from kafka_controller.transport.server import TransportServer

RESULTS = Path(__file__).resolve().parent / "results" / "connection_layer.jsonl"


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run(quick: bool) -> dict[str, Any]:
    apis = DEFAULT_APIS.copy()
    apis.register_json("Echo")
    server = TransportServer("127.0.0.1", 0, lambda api, body: body, apis=apis).start()
    try:
        client = TransportClient("127.0.0.1", server.port, apis=apis)
        for _ in range(200):
            client.request("Echo", {"x": 1})
        rtts = []
        for _ in range(2000 if quick else 20000):
            started = time.perf_counter()
            client.request("Echo", {"topic": "orders", "partition": 7, "leader": 3})
            rtts.append((time.perf_counter() - started) * 1e6)

        per_client = 200 if quick else 2000
        clients = [TransportClient("127.0.0.1", server.port, apis=apis) for _ in range(16)]

        def hammer(c: TransportClient) -> None:
            for i in range(per_client):
                c.request("Echo", i)

        threads = [threading.Thread(target=hammer, args=(c,)) for c in clients]
        started = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        concurrent_rps = 16 * per_client / (time.perf_counter() - started)

        big = {"states": "p" * (6 * 1024 * 1024)}
        large = []
        for _ in range(3 if quick else 10):
            started = time.perf_counter()
            client.request("Echo", big)
            large.append((time.perf_counter() - started) * 1e3)

        threads_idle = threading.active_count()
        idle = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(200)]
        deadline = time.monotonic() + 10
        while server.connection_count < 201 + 16 and time.monotonic() < deadline:
            time.sleep(0.01)
        threads_busy = threading.active_count()
        for s in idle:
            s.close()
        for c in (client, *clients):
            c.close()
    finally:
        server.stop()
    return {
        "bench": "connection_layer",
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "quick": quick,
        "small_rtt_us": {"p50": round(statistics.median(rtts), 1), "p99": round(_percentile(rtts, 0.99), 1)},
        "concurrent_rps": round(concurrent_rps),
        "large_echo_ms": {"median": round(statistics.median(large), 1), "max": round(max(large), 1)},
        "threads": {"without_idle_connections": threads_idle, "with_200_idle_connections": threads_busy},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer iterations")
    parser.add_argument("--label", default="", help="what code was measured (kept in the result)")
    args = parser.parse_args()
    result = {**run(args.quick), "label": args.label}
    print(json.dumps(result, indent=2))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    with RESULTS.open("a") as out:
        out.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
