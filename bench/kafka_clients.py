"""Benchmark: what a Kafka client pays to read a broker's metadata, against the internal protocol.

A server process holds one broker's listener (both protocols on one port, as a broker runs it) over
a metadata cache filled as the controller's UpdateMetadata would (5 brokers, RF 3, topics of 100
partitions). In the same run:

* **all-topics Metadata** for ``--partitions`` partitions, read three ways: kafka-python's
  ``KafkaAdminClient.describe_topics()`` (Metadata v11, decoded by the client), ``kcat -L -J``
  (librdkafka, Metadata v4, a C client) and the project's private ``Metadata`` request through
  ``TransportClient`` (the internal protocol's columnar answer, decoded into domain values);
* **small requests per second**: Metadata v11 for one topic, sent back-to-back on one connection by
  1 and by 16 concurrent client processes for ``--seconds`` each (request pre-encoded, answer read
  whole but not decoded: the figure is the broker's).

    .venv/bin/python bench/kafka_clients.py [--partitions 100000] [--reps 3] [--seconds 5]
"""

from __future__ import annotations

import argparse
import json
import shutil
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import report
from bench.kafka_metadata import BROKERS, PER_TOPIC, filled_cache
from kafka_controller.broker import apis as A
from kafka_controller.broker.kafka_wire import metadata as md
from kafka_controller.broker.kafka_wire.handler import KafkaProtocolHandler
from kafka_controller.broker.kafka_wire.header import METADATA, RequestHeader, encode_request_header
from kafka_controller.broker.kafka_wire.primitives import Writer
from kafka_controller.broker.metadata_cache import MetadataCache
from kafka_controller.domain.requests import Errors
from kafka_controller.transport import framing
from kafka_controller.transport.client import TransportClient
from kafka_controller.transport.server import TransportServer


def serve(partitions: int) -> None:
    """The server process: one listener, both protocols, until stdin closes."""
    cache = MetadataCache(1)
    kafka = KafkaProtocolHandler(cache, lambda: "bench-cluster")

    def private(api: str, _request: Any) -> Any:
        assert api == A.METADATA
        return A.MetadataCacheResponse(
            Errors.NONE, cache.controller_id, tuple(cache.alive_brokers()), tuple(cache.partition_states())
        )

    server = TransportServer("127.0.0.1", 0, private, name="bench", raw_handler=kafka.handle).start()
    filled_cache(partitions, port=server.port, cache=cache)  # every broker advertises this listener
    print(server.port, flush=True)
    sys.stdin.read()
    server.stop()


def one_topic_request() -> bytes:
    w = Writer()
    encode_request_header(w, RequestHeader(METADATA, 11, 1, "bench"))
    md.encode_request(w, md.MetadataRequest((md.MetadataRequestTopic("topic-00000"),)), 11)
    return w.getvalue()


def load_client(port: int, seconds: float) -> None:
    """A client process: Metadata of one topic back-to-back; prints how many were answered."""
    payload = one_topic_request()
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    count = 0
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        framing.write_frame(sock, payload)
        if framing.read_frame(sock, framing.DEFAULT_MAX_FRAME_BYTES) is None:
            raise SystemExit("the server closed the connection")
        count += 1
    print(count, flush=True)


def requests_per_second(port: int, clients: int, seconds: float) -> dict[str, Any]:
    procs = [
        subprocess.Popen(
            [sys.executable, __file__, "--load-client", str(port), str(seconds)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(clients)
    ]
    counts = [int((p.communicate()[0] or "0").strip()) for p in procs]
    assert all(c > 0 for c in counts), f"a client got no answer: {counts}"
    return {"clients": clients, "requests": sum(counts), "per_second": round(sum(counts) / seconds, 1)}


def timed(fn: Any, reps: int) -> tuple[list[float], Any]:
    times, out = [], None
    for _ in range(reps):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return times, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=100_000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args()

    server = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(args.partitions)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        runs: dict[str, Any] = {}

        from kafka.admin import KafkaAdminClient  # a dev dependency; only this benchmark needs it

        admin = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{port}", request_timeout_ms=120_000)
        times, topics = timed(admin.describe_topics, args.reps)
        admin.close()
        assert sum(len(t["partitions"]) for t in topics) == args.partitions
        runs["kafka_python_describe_topics_s"] = round(statistics.median(times), 3)

        kcat = shutil.which("kcat")
        if kcat:
            cmd = [kcat, "-L", "-J", "-b", f"127.0.0.1:{port}", "-m", "120"]
            times, out = timed(lambda: subprocess.run(cmd, capture_output=True, check=True).stdout, args.reps)
            assert sum(len(t["partitions"]) for t in json.loads(out)["topics"]) == args.partitions
            runs["kcat_metadata_s"] = round(statistics.median(times), 3)

        client = TransportClient("127.0.0.1", port, timeout_s=120)
        times, answer = timed(lambda: client.request(A.METADATA, None), args.reps)
        client.close()
        assert len(answer.partitions) == args.partitions
        runs["internal_protocol_metadata_s"] = round(statistics.median(times), 3)

        small = [requests_per_second(port, n, args.seconds) for n in (1, 16)]
    finally:
        if server.stdin is not None:
            server.stdin.close()
        server.wait(timeout=30)
    report(
        "kafka_clients",
        {
            "partitions": args.partitions,
            "brokers": BROKERS,
            "rf": 3,
            "per_topic": PER_TOPIC,
            **runs,
            "small": small,
        },
    )


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--serve":
        serve(int(sys.argv[2]))
    elif len(sys.argv) == 4 and sys.argv[1] == "--load-client":
        load_client(int(sys.argv[2]), float(sys.argv[3]))
    else:
        main()
