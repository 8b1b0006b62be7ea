"""Benchmark: a broker's Kafka-protocol Metadata answer (all topics) for 10,000 partitions and more.

A metadata cache is filled as the controller's UpdateMetadata would (5 brokers, RF 3, topics of 100
partitions); then the broker's ``KafkaProtocolHandler`` answers one Metadata request for every topic,
as ``kcat -L`` (v4) and confluent-kafka / kafka-python (v11) send it: decode the request, read the
cache, build the response and encode it. Also timed: decoding that response with the project's
own decoder (a client's share of the work). For v11, the same answer with ``kio`` (Kafka's
generated schemas) as the codec, which must be byte for byte the project's: why the hot path keeps
its own encoder. Median of ``--reps`` runs.

    .venv/bin/python bench/kafka_metadata.py [--partitions 10000 100000] [--reps 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import _kio_metadata
from bench._common import report
from kafka_controller.broker.kafka_wire import metadata as md
from kafka_controller.broker.kafka_wire.handler import KafkaProtocolHandler
from kafka_controller.broker.kafka_wire.header import METADATA, RequestHeader, encode_request_header
from kafka_controller.broker.kafka_wire.primitives import Reader, Writer
from kafka_controller.broker.metadata_cache import MetadataCache
from kafka_controller.domain.requests import UpdateMetadataPartitionState, UpdateMetadataRequest
from kafka_controller.domain.values import Broker, EndPoint

BROKERS = 5
PER_TOPIC = 100


def filled_cache(
    partitions: int, port: int | None = None, cache: MetadataCache | None = None
) -> MetadataCache:
    """Brokers 1..5 listen on 127.0.0.1:9091.. or, given ``port``, all on that one port."""
    states = []
    for i in range(partitions):
        topic, p = f"topic-{i // PER_TOPIC:05d}", i % PER_TOPIC
        replicas = tuple((i + k) % BROKERS + 1 for k in range(3))
        states.append(UpdateMetadataPartitionState(topic, p, 1, replicas[0], 3, replicas, 7, replicas, ()))
    brokers = tuple(Broker(b, (EndPoint("127.0.0.1", port or 9090 + b),)) for b in range(1, BROKERS + 1))
    cache = cache or MetadataCache(1)
    cache.update_metadata(UpdateMetadataRequest(7, 1, 1, -1, tuple(states), brokers))
    return cache


def _header_bytes(version: int) -> bytes:
    w = Writer()
    encode_request_header(w, RequestHeader(METADATA, version, 1, "bench"))
    return w.getvalue()


def request(version: int) -> bytes:
    w = Writer()
    encode_request_header(w, RequestHeader(METADATA, version, 1, "bench"))
    md.encode_request(w, md.MetadataRequest(None if version else ()), version)
    return w.getvalue()


def measure(partitions: int, version: int, reps: int) -> dict[str, Any]:
    handler = KafkaProtocolHandler(filled_cache(partitions), lambda: "bench-cluster")
    payload = request(version)
    answer_s, decode_s = [], []
    answer = b""
    for _ in range(reps):
        t0 = time.perf_counter()
        answer = handler.handle(payload) or b""
        t1 = time.perf_counter()
        r = Reader(answer, 4 + (1 if version >= 9 else 0))
        decoded = md.decode_response(r, version)
        t2 = time.perf_counter()
        answer_s.append(t1 - t0)
        decode_s.append(t2 - t1)
    assert sum(len(t.partitions) for t in decoded.topics) == partitions
    extra: dict[str, Any] = {}
    if version == _kio_metadata.VERSION:  # the same answer with kio as the codec, in the same run
        body = payload[len(_header_bytes(version)) :]
        kio_s = []
        for _ in range(reps):
            t0 = time.perf_counter()
            kio_answer = _kio_metadata.answer(handler, body)
            kio_s.append(time.perf_counter() - t0)
        # byte for byte what the project's encoder wrote after its response header (v1: 5 bytes)
        assert kio_answer == answer[5:], "kio and the project's codec encode different answers"
        extra = {"kio_answer_s": round(statistics.median(kio_s), 4), "kio_response_bytes": len(kio_answer)}
    return {
        "partitions": partitions,
        "version": version,
        "answer_s": round(statistics.median(answer_s), 4),
        "answer_s_all": [round(x, 4) for x in answer_s],
        "decode_s": round(statistics.median(decode_s), 4),
        "response_bytes": len(answer),
        **extra,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    runs = [measure(n, v, args.reps) for n in args.partitions for v in (4, 11)]
    report("kafka_metadata", {"brokers": BROKERS, "rf": 3, "partitions_per_topic": PER_TOPIC, "runs": runs})


if __name__ == "__main__":
    main()
