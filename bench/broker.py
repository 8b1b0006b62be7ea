"""How fast a broker applies a LeaderAndIsr: 10,000 and 100,000 partitions (Kafka 1.1's layouts).

Prints one JSON document. For each size, the median over ``--repeat`` runs of:

* ``handle_new_ms``: a broker taking every partition for the first time (leaders and followers,
  fetchers assigned), and ``handle_bump_ms``: the same partitions again with the leader epoch + 1
  (every partition changes state: a controller failover or a mass election);
* baselines measured in the same run: ``decode_ms``, the transport decoding the same request from
  its wire bytes (what every broker pays before handling anything), and ``floor_ms``, the least any
  Python handler can do (build each key and record an error code per partition);
* ``end_to_end_ms``: over a loopback socket through ``TransportServer``, encode to decoded response;
* ratios ``handle_bump / decode`` and ``handle_bump / floor``, and ``us_per_partition``.

Usage: ``.venv/bin/python bench/broker.py [--sizes 10000,100000] [--repeat 5]``
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kafka_controller.broker.alter_isr import AlterIsrManager
from kafka_controller.broker.controller_apis import AlterIsrResponse
from kafka_controller.broker.data_plane import DataPlane
from kafka_controller.broker.replica_manager import ReplicaManager
from kafka_controller.domain.requests import Errors, LeaderAndIsrRequest
from kafka_controller.domain.values import TopicPartition
from kafka_controller.transport.client import TransportClient
from kafka_controller.transport.codec import (
    decode_leader_and_isr_request,
    encode_leader_and_isr_request,
)
from kafka_controller.transport.server import TransportServer
from tests.runtime.builders import leader_and_isr

BROKER = 0  # builders.leader_and_isr spreads replicas over brokers 0-4; broker 0 hosts 60%


def _median_ms(fn: Callable[..., Any], repeat: int, setup: Callable[[], Any] | None = None) -> float:
    times = []
    for _ in range(repeat):
        arg = setup() if setup else None
        start = time.perf_counter()
        fn() if setup is None else fn(arg)
        times.append((time.perf_counter() - start) * 1000.0)
    return statistics.median(times)


def _broker() -> ReplicaManager:
    rm = ReplicaManager(BROKER, lambda: 0, produce_rate_per_s=100.0)
    DataPlane(rm, AlterIsrManager(rm, lambda: 1, lambda r, f: AlterIsrResponse("NONE")), start_threads=False)
    return rm


def _bumped(request: LeaderAndIsrRequest) -> LeaderAndIsrRequest:
    states = tuple(s._replace(leader_epoch=s.leader_epoch + 1) for s in request.partition_states)
    return dataclasses.replace(request, partition_states=states)


def _floor(request: LeaderAndIsrRequest) -> None:
    errors = {}
    none = Errors.NONE
    for s in request.partition_states:
        errors[TopicPartition(s.topic, s.partition)] = none


def measure(partitions: int, repeat: int) -> dict[str, Any]:
    request = leader_and_isr(partitions // 10, 10, replication=3, brokers=5)
    bumped = _bumped(request)
    wire = orjson.dumps(encode_leader_and_isr_request(request))

    new_ms = _median_ms(lambda rm: rm.become_leader_or_follower(request), repeat, setup=_broker)

    def primed() -> ReplicaManager:
        rm = _broker()
        rm.become_leader_or_follower(request)
        return rm

    bump_ms = _median_ms(lambda rm: rm.become_leader_or_follower(bumped), repeat, setup=primed)
    decode_ms = _median_ms(lambda: decode_leader_and_isr_request(orjson.loads(wire)), repeat)
    floor_ms = _median_ms(lambda: _floor(request), repeat)

    rm = _broker()
    epochs = iter(range(1, 10_000))

    def next_request() -> LeaderAndIsrRequest:
        e = next(epochs)
        states = tuple(s._replace(leader_epoch=s.leader_epoch + e) for s in request.partition_states)
        return dataclasses.replace(request, partition_states=states)

    with (
        TransportServer("127.0.0.1", 0, lambda api, r: rm.become_leader_or_follower(r)) as server,
        TransportClient("127.0.0.1", server.port, timeout_s=120) as client,
    ):
        e2e_ms = _median_ms(lambda r: client.request("LeaderAndIsr", r), repeat, setup=next_request)
    return {
        "partitions": partitions,
        "hosted_here": sum(1 for s in request.partition_states if BROKER in s.replicas),
        "handle_new_ms": round(new_ms, 2),
        "handle_bump_ms": round(bump_ms, 2),
        "us_per_partition": round(bump_ms * 1000 / partitions, 3),
        "baseline_decode_ms": round(decode_ms, 2),
        "baseline_floor_ms": round(floor_ms, 2),
        "ratio_handle_to_decode": round(bump_ms / decode_ms, 3),
        "ratio_handle_to_floor": round(bump_ms / floor_ms, 3),
        "end_to_end_ms": round(e2e_ms, 2),
        "wire_bytes": len(wire),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    results = [measure(int(n), args.repeat) for n in args.sizes.split(",")]
    print(
        orjson.dumps(
            {"benchmark": "broker_leader_and_isr", "repeat": args.repeat, "results": results},
            option=orjson.OPT_INDENT_2,
        ).decode()
    )


if __name__ == "__main__":
    main()
