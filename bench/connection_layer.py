"""Benchmark: what the bounded connection layer costs a request, over loopback.

A ``TransportServer`` with an echo handler in a child process, measured from ``TransportClient``s
in this one:

* ``small_rtt_us``: round trips of a ~60-byte request on one connection (p50, p99);
* ``concurrent_rps``: requests per second from 16 connections at once, one request in flight each;
* ``large_echo_ms``: a 6 MB request echoed back (a 100,000-partition LeaderAndIsr is ~6 MB);
* ``server_threads``: the server process's threads with 200 idle connections open, and without.

Each request crosses the network thread twice and a handler thread once (the old layer ran the
handler on the connection's own thread). Prints one JSON document and appends it as a line to
``bench/results/connection_layer.jsonl``.

    .venv/bin/python bench/connection_layer.py [--quick] [--label TEXT]

Run it from an older checkout with ``--label`` to compare layers on the same machine and load.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
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


def _serve(conn: Any) -> None:
    """The server's process: a ``TransportServer`` with an echo handler until told to stop."""
    apis = DEFAULT_APIS.copy()
    apis.register_json("Echo")
    server = TransportServer("127.0.0.1", 0, lambda api, body: body, apis=apis).start()
    conn.send(server.port)
    conn.recv()
    server.stop()


def _status(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} for {pid}")


def run(quick: bool) -> dict[str, Any]:
    """The server runs in a child process, as a broker does apart from its clients: the clients'
    threads do not compete with the server's for one interpreter lock."""
    apis = DEFAULT_APIS.copy()
    apis.register_json("Echo")
    ctx = multiprocessing.get_context("fork")
    parent_end, child_end = ctx.Pipe()
    child = ctx.Process(target=_serve, args=(child_end,), daemon=True)
    child.start()
    port = parent_end.recv()
    try:
        client = TransportClient("127.0.0.1", port, apis=apis)
        for _ in range(200):
            client.request("Echo", {"x": 1})
        rtts = []
        for _ in range(2000 if quick else 20000):
            started = time.perf_counter()
            client.request("Echo", {"topic": "orders", "partition": 7, "leader": 3})
            rtts.append((time.perf_counter() - started) * 1e6)

        per_client = 200 if quick else 2000
        clients = [TransportClient("127.0.0.1", port, apis=apis) for _ in range(16)]

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

        threads_idle = _status(child.pid or 0, "Threads")
        fds = len(os.listdir(f"/proc/{child.pid}/fd"))
        idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(200)]
        deadline = time.monotonic() + 10
        while len(os.listdir(f"/proc/{child.pid}/fd")) < fds + 200 and time.monotonic() < deadline:
            time.sleep(0.01)
        threads_busy = _status(child.pid or 0, "Threads")
        for s in idle:
            s.close()
        for c in (client, *clients):
            c.close()
    finally:
        parent_end.send("stop")
        child.join(30)
    return {
        "bench": "connection_layer",
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_1m": round(os.getloadavg()[0], 2),
        "quick": quick,
        "server": "child process",
        "small_rtt_us": {"p50": round(statistics.median(rtts), 1), "p99": round(_percentile(rtts, 0.99), 1)},
        "concurrent_rps": round(concurrent_rps),
        "large_echo_ms": {"median": round(statistics.median(large), 1), "max": round(max(large), 1)},
        "server_threads": {"idle": threads_idle, "with_200_idle_connections": threads_busy},
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
