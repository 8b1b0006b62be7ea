"""Benchmark: what TLS on a listener costs a request, beside PLAINTEXT on the same server.

A ``TransportServer`` with a PLAINTEXT and an SSL listener (a private CA's certificate, ECDSA
P-256, TLS 1.3 as negotiated by Python's ssl on both ends) and an echo handler runs in a child
process; ``TransportClient``s in this one measure, per listener:

* ``small_rtt_us``: round trips of a ~60-byte request on one connection (p50, p99);
* ``large_echo_ms``: a 6 MB request echoed back (a 100,000-partition LeaderAndIsr is ~6 MB);
* ``connects_per_s``: new connections each doing one request (TCP connect, TLS handshake on SSL).

Prints one JSON document and appends it as a line to ``bench/results/tls_listener.jsonl``.

    .venv/bin/python bench/tls_listener.py [--quick] [--label TEXT]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kafka_controller.security.certs import make_cluster_pki
from kafka_controller.security.listeners import BrokerListeners
from kafka_controller.transport.client import TransportClient
from kafka_controller.transport.codec import DEFAULT_APIS
from kafka_controller.transport.server import TransportServer

RESULTS = Path(__file__).resolve().parent / "results" / "tls_listener.jsonl"


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _settings(directory: str) -> dict[str, str]:
    pki = make_cluster_pki(directory, [1])
    return {
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
        **pki.broker_settings(1),
    }


def _serve(conn: Any, settings: dict[str, str]) -> None:
    """The server's process: both listeners with an echo handler until told to stop."""
    apis = DEFAULT_APIS.copy()
    apis.register_json("Echo")
    endpoints = BrokerListeners.of(settings).endpoints()
    server = TransportServer("", 0, lambda api, body: body, apis=apis, listeners=endpoints).start()
    conn.send(server.ports)
    conn.recv()
    server.stop()


def _client(port: int, tls: Any) -> TransportClient:
    apis = DEFAULT_APIS.copy()
    apis.register_json("Echo")
    return TransportClient("127.0.0.1", port, timeout_s=60, apis=apis, ssl_context=tls)


def _measure(port: int, tls: Any, rounds: int, large_rounds: int, connects: int) -> dict[str, Any]:
    small = {"topic": "orders", "partition": 7, "leader": 2, "isr": [1, 2, 3]}
    with _client(port, tls) as client:
        for _ in range(50):  # warm-up (and the handshake, on SSL)
            client.request("Echo", small)
        rtts = []
        for _ in range(rounds):
            start = time.perf_counter()
            client.request("Echo", small)
            rtts.append((time.perf_counter() - start) * 1e6)
        blob = {"data": "x" * (6 * 1024 * 1024)}
        large = []
        for _ in range(large_rounds):
            start = time.perf_counter()
            client.request("Echo", blob)
            large.append((time.perf_counter() - start) * 1e3)
    start = time.perf_counter()
    for _ in range(connects):
        with _client(port, tls) as client:
            client.request("Echo", small)
    connect_s = time.perf_counter() - start
    return {
        "small_rtt_us": {"p50": round(_percentile(rtts, 0.5), 1), "p99": round(_percentile(rtts, 0.99), 1)},
        "large_echo_ms": round(statistics.median(large), 1),
        "connects_per_s": round(connects / connect_s, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="fewer rounds (a smoke run)")
    parser.add_argument("--label", default="", help="a note stored with the result")
    args = parser.parse_args()
    rounds, large_rounds, connects = (300, 3, 30) if args.quick else (3000, 10, 300)
    with tempfile.TemporaryDirectory(prefix="bench-tls-") as directory:
        settings = _settings(directory)
        ours, theirs = multiprocessing.Pipe()
        child = multiprocessing.get_context("spawn").Process(target=_serve, args=(theirs, settings))
        child.start()
        try:
            ports = ours.recv()
            tls = BrokerListeners.of({**settings, "security.inter.broker.protocol": "SSL"}).client_context()
            results = {
                "plaintext": _measure(ports["PLAINTEXT"], None, rounds, large_rounds, connects),
                "ssl": _measure(ports["SSL"], tls, rounds, large_rounds, connects),
            }
        finally:
            ours.send("stop")
            child.join(30)
    doc = {
        "bench": "tls_listener",
        "label": args.label,
        "quick": args.quick,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "rounds": rounds,
        **results,
    }
    print(json.dumps(doc, indent=2))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    with RESULTS.open("a") as f:
        f.write(json.dumps(doc) + "\n")


if __name__ == "__main__":
    main()
