"""Benchmark: a LeaderAndIsr of 10,000 and 100,000 partitions over loopback, three encodings.

Each variant does the whole round trip a controller and a broker do: encode the request, send it,
decode it into domain values on the server, build a per-partition response, encode it, send it
back, and decode it into a ``LeaderAndIsrResponse``. Compared in the same run:

* ``columnar`` — the project's transport (orjson, columnar runs, dictionary-encoded replica lists);
* ``orjson_rows`` — the same transport and JSON library with one object per partition, so the
  difference is the layout alone;
* ``naive_json`` — stdlib ``json`` with ``dataclasses.asdict`` per partition (what a direct port
  would do); the baseline;
* ``kafka_kio`` — Kafka 2.8's own LeaderAndIsr v5 binary format, coded by ``kio`` (``bench/_kio_control``):
  what the controller would send if its requests spoke Kafka's protocol.

Layouts follow Kafka 1.1's published benchmarks: 10,000 partitions as single-partition topics
(controlled shutdown) and 100,000 as 2,000 topics x 50 partitions (failover), plus the other shape
of each. Prints one JSON document and appends it as a line to ``bench/results/transport.jsonl``.

    .venv/bin/python bench/transport.py [--quick]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import socket
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import _kio_control
from kafka_controller.domain.requests import (
    Errors,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
)
from kafka_controller.domain.values import Broker, EndPoint, TopicPartition
from kafka_controller.transport import framing
from kafka_controller.transport.client import TransportClient
from kafka_controller.transport.codec import DEFAULT_APIS, LEADER_AND_ISR, ApiCodec, ApiRegistry
from kafka_controller.transport.codec_common import decode_broker, encode_broker
from kafka_controller.transport.server import TransportServer

RESULTS = Path(__file__).resolve().parent / "results" / "transport.jsonl"
_ROW_FIELDS = list(LeaderAndIsrPartitionState._fields)
_TUPLE_FIELDS = ("isr", "replicas", "adding_replicas", "removing_replicas")


def build_request(
    topics: int, partitions_per_topic: int, brokers: int = 5, rf: int = 3
) -> LeaderAndIsrRequest:
    states = []
    for t in range(topics):
        topic = f"topic-{t:06d}"
        for p in range(partitions_per_topic):
            replicas = tuple((t + p + i) % brokers for i in range(rf))
            states.append(
                LeaderAndIsrPartitionState(topic, p, 7, replicas[0], 3, replicas, 5, replicas, (), (), False)
            )
    ids = {f"topic-{t:06d}": str(uuid.UUID(int=t + 1)) for t in range(topics)}
    live = tuple(Broker(b, (EndPoint("127.0.0.1", 9092 + b),)) for b in range(brokers))
    return LeaderAndIsrRequest(5, 1, 7, 100, tuple(states), ids, live)


def broker_handler(api: str, request: LeaderAndIsrRequest) -> LeaderAndIsrResponse:
    """What a broker answers: every partition NONE."""
    tps = (TopicPartition(s.topic, s.partition) for s in request.partition_states)
    return LeaderAndIsrResponse(Errors.NONE, dict.fromkeys(tps, Errors.NONE))


# -- one object per partition, through the same transport (orjson) ---------------------------------


def _rows_state(d: dict[str, Any]) -> LeaderAndIsrPartitionState:
    for name in _TUPLE_FIELDS:
        d[name] = tuple(d[name])
    return LeaderAndIsrPartitionState(**d)


def _rows_encode_request(r: LeaderAndIsrRequest) -> Any:
    return {
        "version": r.version,
        "controller_id": r.controller_id,
        "controller_epoch": r.controller_epoch,
        "broker_epoch": r.broker_epoch,
        "topic_ids": r.topic_ids,
        "live_leaders": [encode_broker(b) for b in r.live_leaders],
        "partition_states": [s._asdict() for s in r.partition_states],  # NamedTuples: as objects
    }


def _rows_decode_request(body: Any) -> LeaderAndIsrRequest:
    states = tuple(_rows_state(d) for d in body["partition_states"])
    leaders = tuple(decode_broker(b) for b in body["live_leaders"])
    header = [body[k] for k in ("version", "controller_id", "controller_epoch", "broker_epoch")]
    return LeaderAndIsrRequest(*header, states, body["topic_ids"], leaders)


def _rows_encode_response(r: LeaderAndIsrResponse) -> Any:
    errs = [
        {"topic": tp.topic, "partition": tp.partition, "error": e} for tp, e in r.partition_errors.items()
    ]
    return {"error": r.error, "partition_errors": errs}


def _rows_decode_response(body: Any) -> LeaderAndIsrResponse:
    errs = {TopicPartition(d["topic"], d["partition"]): Errors(d["error"]) for d in body["partition_errors"]}
    return LeaderAndIsrResponse(Errors(body["error"]), errs)


ROWS_APIS = ApiRegistry(
    [
        ApiCodec(
            LEADER_AND_ISR,
            _rows_encode_request,
            _rows_decode_request,
            _rows_encode_response,
            _rows_decode_response,
        )
    ]
)


# -- the naive baseline: stdlib json, dataclasses.asdict per partition -----------------------------


def _naive_request_bytes(r: LeaderAndIsrRequest, cid: int) -> bytes:
    body = dataclasses.asdict(r)  # recursive, but partition states are NamedTuples: make them dicts
    body["partition_states"] = [s._asdict() for s in r.partition_states]
    return json.dumps({"api": LEADER_AND_ISR, "v": 1, "cid": cid, "body": body}).encode()


def _naive_decode_request(payload: bytes | bytearray) -> tuple[int, LeaderAndIsrRequest]:
    doc = json.loads(payload)
    b = doc["body"]
    states = tuple(_rows_state(d) for d in b["partition_states"])
    leaders = tuple(
        Broker(
            x["id"], tuple(EndPoint(**e) for e in x["endpoints"]), x["rack"], tuple(map(tuple, x["features"]))
        )
        for x in b["live_leaders"]
    )
    header = [b[k] for k in ("version", "controller_id", "controller_epoch", "broker_epoch")]
    return doc["cid"], LeaderAndIsrRequest(*header, states, b["topic_ids"], leaders)


def _naive_response_bytes(cid: int, r: LeaderAndIsrResponse) -> bytes:
    errs = [
        {"topic": tp.topic, "partition": tp.partition, "error": e.value}
        for tp, e in r.partition_errors.items()
    ]
    return json.dumps({"cid": cid, "body": {"error": r.error.value, "partition_errors": errs}}).encode()


class NaiveServer:
    def __init__(self, sink: list[LeaderAndIsrRequest]) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._sink = sink
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        conn, _ = self._listener.accept()
        with conn:
            while (payload := framing.read_frame(conn, framing.DEFAULT_MAX_FRAME_BYTES)) is not None:
                cid, request = _naive_decode_request(payload)
                self._sink[:] = [request]
                framing.write_frame(conn, _naive_response_bytes(cid, broker_handler(LEADER_AND_ISR, request)))

    def close(self) -> None:
        self._listener.close()


class NaiveClient:
    def __init__(self, port: int) -> None:
        self._sock = socket.create_connection(("127.0.0.1", port))
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._cid = 0

    def request(self, api: str, r: LeaderAndIsrRequest) -> LeaderAndIsrResponse:
        self._cid += 1
        framing.write_frame(self._sock, _naive_request_bytes(r, self._cid))
        answer = framing.read_frame(self._sock, framing.DEFAULT_MAX_FRAME_BYTES)
        assert answer is not None
        body = json.loads(answer)["body"]
        errs = {
            TopicPartition(d["topic"], d["partition"]): Errors(d["error"]) for d in body["partition_errors"]
        }
        return LeaderAndIsrResponse(Errors(body["error"]), errs)

    def close(self) -> None:
        self._sock.close()


# -- measurement -----------------------------------------------------------------------------------


def _time_round_trips(
    request: LeaderAndIsrRequest, client: Any, received: list[LeaderAndIsrRequest], reps: int
) -> dict[str, Any]:
    times = []
    response = None
    for _ in range(reps + 1):  # the first one warms up and is not counted
        start = time.perf_counter()
        response = client.request(LEADER_AND_ISR, request)
        times.append(time.perf_counter() - start)
    assert received[-1] == request, "the server decoded something else than was sent"
    assert isinstance(response, LeaderAndIsrResponse) and len(response.partition_errors) == len(
        request.partition_states
    )
    counted = times[1:]
    return {
        "round_trip_ms": round(statistics.median(counted) * 1000, 2),
        "round_trip_ms_min": round(min(counted) * 1000, 2),
        "reps": reps,
    }


def run_transport(request: LeaderAndIsrRequest, apis: ApiRegistry, reps: int) -> dict[str, Any]:
    received: list[LeaderAndIsrRequest] = []

    def handler(api: str, r: LeaderAndIsrRequest) -> LeaderAndIsrResponse:
        received[:] = [r]
        return broker_handler(api, r)

    server = TransportServer("127.0.0.1", 0, handler, apis=apis).start()
    client = TransportClient("127.0.0.1", server.port, timeout_s=600, apis=apis)
    try:
        out = _time_round_trips(request, client, received, reps)
    finally:
        client.close()
        server.stop()
    out["request_bytes"] = len(
        framing.encode_request(LEADER_AND_ISR, 0, apis.get(LEADER_AND_ISR).encode_request(request))
    )
    return out


def run_kio(request: LeaderAndIsrRequest, reps: int) -> dict[str, Any]:
    received: list[LeaderAndIsrRequest] = []
    server = _kio_control.KioServer(received, broker_handler)
    client = _kio_control.KioClient(server.port)
    try:
        out = _time_round_trips(request, client, received, reps)
    finally:
        client.close()
        server.close()
    payload = _kio_control.encode_request(request)
    out["request_bytes"] = len(payload)
    out["encode_ms"] = _best_ms(lambda: _kio_control.encode_request(request), reps)
    out["decode_ms"] = _best_ms(lambda: _kio_control.decode_request(payload), reps)
    return out


def run_naive(request: LeaderAndIsrRequest, reps: int) -> dict[str, Any]:
    received: list[LeaderAndIsrRequest] = []
    server = NaiveServer(received)
    client = NaiveClient(server.port)
    try:
        out = _time_round_trips(request, client, received, reps)
    finally:
        client.close()
        server.close()
    out["request_bytes"] = len(_naive_request_bytes(request, 0))
    return out


def _best_ms(fn: Callable[[], Any], reps: int) -> float:
    best = min(_elapsed(fn) for _ in range(reps))
    return round(best * 1000, 2)


def _elapsed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def run_case(name: str, topics: int, per_topic: int, reps: int) -> dict[str, Any]:
    request = build_request(topics, per_topic)
    codec = DEFAULT_APIS.get(LEADER_AND_ISR)
    payload = orjson.dumps(codec.encode_request(request))
    variants = {
        "columnar": run_transport(request, DEFAULT_APIS, reps),
        "orjson_rows": run_transport(request, ROWS_APIS, reps),
        "naive_json": run_naive(request, reps),
        "kafka_kio": run_kio(request, reps),
    }
    variants["columnar"]["encode_ms"] = _best_ms(lambda: orjson.dumps(codec.encode_request(request)), reps)
    variants["columnar"]["decode_ms"] = _best_ms(lambda: codec.decode_request(orjson.loads(payload)), reps)
    base = variants["naive_json"]["round_trip_ms"]
    rows = variants["orjson_rows"]["round_trip_ms"]
    ours = variants["columnar"]["round_trip_ms"]
    return {
        "case": name,
        "partitions": topics * per_topic,
        "topics": topics,
        "partitions_per_topic": per_topic,
        "variants": variants,
        "speedup_vs_naive_json": round(base / ours, 2),
        "speedup_vs_orjson_rows": round(rows / ours, 2),
        "speedup_vs_kafka_kio": round(variants["kafka_kio"]["round_trip_ms"] / ours, 2),
        "bytes_ratio_vs_naive_json": round(
            variants["naive_json"]["request_bytes"] / variants["columnar"]["request_bytes"], 2
        ),
    }


CASES = [
    ("10k_single_partition_topics", 10_000, 1, 5),
    ("10k_in_200_topics_x_50", 200, 50, 5),
    ("100k_in_2000_topics_x_50", 2_000, 50, 3),
    ("100k_single_partition_topics", 100_000, 1, 3),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="only the 10,000-partition cases")
    args = parser.parse_args()
    cases = [c for c in CASES if not args.quick or c[1] * c[2] <= 10_000]
    result = {
        "bench": "transport",
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_avg_1m": round(os.getloadavg()[0], 2),
        "cases": [run_case(*c) for c in cases],
    }
    text = json.dumps(result, indent=2)
    print(text)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    with RESULTS.open("a") as f:
        f.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
