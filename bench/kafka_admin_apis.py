"""Benchmark: a broker's Kafka-protocol ElectLeaders v2 answer for many partitions.

The request goes through ``KafkaProtocolHandler.handle`` as a client's would: the length check
(``kio_guard``), ``kio``'s native decode, the translation to the private request, a private answer
(here made up at once, so the controller's own work is left out: that is ``bench/failover.py``'s),
the translation back and ``kio``'s pure-Python encode. Also timed apart: the length check alone and
the native decode alone. Median of ``--reps`` runs.

    .venv/bin/python bench/kafka_admin_apis.py [--partitions 100 10000] [--reps 5]
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import io
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kio.serial import entity_writer
from kio.static.primitive import i32, i32Timedelta

from bench._common import report
from kafka_controller.broker import apis as A
from kafka_controller.broker.kafka_wire.controller_admin_apis import ELECT_LEADERS, controller_admin_apis
from kafka_controller.broker.kafka_wire.handler import KafkaProtocolHandler
from kafka_controller.broker.kafka_wire.header import RequestHeader, encode_request_header
from kafka_controller.broker.kafka_wire.kio_api import _reader, request_schema
from kafka_controller.broker.kafka_wire.kio_guard import check_lengths
from kafka_controller.broker.kafka_wire.primitives import Writer
from kafka_controller.broker.metadata_cache import MetadataCache
from kafka_controller.domain.requests import Errors

PER_TOPIC = 100
VERSION = 2


def private(_api: str, r: Any) -> A.ElectLeadersResponse:
    return A.ElectLeadersResponse(
        Errors.NONE, {tp: A.PartitionElectionResult(Errors.NONE, 1) for tp in r.partitions}
    )


def body(partitions: int) -> bytes:
    schema = request_schema(ELECT_LEADERS, VERSION)
    m = importlib.import_module(schema.__module__)
    topics = tuple(
        m.TopicPartitions(topic=f"topic-{t:05d}", partitions=tuple(i32(p) for p in range(PER_TOPIC)))
        for t in range(max(1, partitions // PER_TOPIC))
    )
    timeout = i32Timedelta.parse(datetime.timedelta(seconds=30))
    buf = io.BytesIO()
    entity_writer(schema)(buf, schema(election_type=0, topic_partitions=topics, timeout=timeout))
    return buf.getvalue()


def measure(partitions: int, reps: int) -> dict[str, Any]:
    cache = MetadataCache(1)
    handler = KafkaProtocolHandler(cache, lambda: "bench", controller_admin_apis(private, cache))
    w = Writer()
    encode_request_header(
        w, RequestHeader(ELECT_LEADERS, VERSION, 1, "kafka-controller-ops/op=b"), handler.table
    )
    raw = body(partitions)
    payload = bytearray(w.getvalue() + raw)  # as the listener hands a frame over
    view = memoryview(raw)
    times: dict[str, list[float]] = {"answer_s": [], "length_check_s": [], "native_decode_s": []}
    answer = b""
    for _ in range(reps):
        t0 = time.perf_counter()
        answer = handler.handle(payload) or b""
        t1 = time.perf_counter()
        check_lengths(request_schema(ELECT_LEADERS, VERSION), view, 0)
        t2 = time.perf_counter()
        _reader(ELECT_LEADERS, VERSION)(view, 0)
        t3 = time.perf_counter()
        times["answer_s"].append(t1 - t0)
        times["length_check_s"].append(t2 - t1)
        times["native_decode_s"].append(t3 - t2)
    assert answer, "the handler closed the connection"
    return {
        "partitions": max(1, partitions // PER_TOPIC) * PER_TOPIC,
        **{k: round(statistics.median(v), 4) for k, v in times.items()},
        "request_bytes": len(payload),
        "response_bytes": len(answer),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, nargs="+", default=[100, 10_000])
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    runs = [measure(n, args.reps) for n in args.partitions]
    report("kafka_admin_apis", {"api": "ElectLeaders", "version": VERSION, "runs": runs})


if __name__ == "__main__":
    main()
