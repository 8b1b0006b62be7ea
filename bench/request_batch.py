"""Benchmark: ControllerBrokerRequestBatch on Kafka-1.1-like layouts; prints JSON.

Baseline in the same run: the floor = building the same request-state objects in a bare loop
(what any implementation must pay); ratio = batch time / floor.
"""

from __future__ import annotations

import gc
import json
import sys
import time

from kafka_controller.core.context import ControllerContext
from kafka_controller.core.request_batch import ControllerBrokerRequestBatch
from kafka_controller.domain.requests import (
    LeaderAndIsrPartitionState,
    StopReplicaPartitionState,
    UpdateMetadataPartitionState,
)
from kafka_controller.domain.values import (
    Broker,
    EndPoint,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
    TopicPartition,
)


class NullChannel:
    def __init__(self) -> None:
        self.count = 0

    def send_request(self, broker_id, request, callback=None) -> None:
        self.count += 1


def build(n_partitions: int, brokers: int = 5, rf: int = 2, per_topic: int = 50):
    ctx = ControllerContext()
    ctx.set_live_brokers({Broker(b, (EndPoint("h", 9000 + b),)): 1 for b in range(brokers)})
    items = []
    for i in range(n_partitions):
        tp = TopicPartition(f"t{i // per_topic}", i % per_topic)
        replicas = tuple((i + k) % brokers for k in range(rf))
        a = ReplicaAssignment(replicas)
        ctx.all_topics.add(tp.topic)
        ctx.update_partition_full_replica_assignment(tp, a)
        lice = LeaderIsrAndControllerEpoch(LeaderAndIsr(replicas[0], 1, replicas, 1), 1)
        ctx.put_partition_leadership_info(tp, lice)
        items.append((tp, a, lice))
    return ctx, items


def best(fn, repeat=5):
    times = []
    for _ in range(repeat):
        gc.collect()
        t0 = time.process_time()
        fn()
        times.append(time.process_time() - t0)
    return min(times)


def main(n: int) -> None:
    ctx, items = build(n)
    if FREEZE:
        gc.freeze()  # what a controller can do after loading its context: gen-2 scans skip it
    ch = NullChannel()
    batch = ControllerBrokerRequestBatch(0, ctx, ch, lambda e: None)

    def lai_batch():
        batch.new_batch()
        for tp, a, lice in items:
            batch.add_leader_and_isr_request_for_brokers(a.replicas, tp, lice, a, False)
        batch.send_requests_to_brokers(1)

    def lai_floor():
        per = {}
        um = {}
        for tp, a, lice in items:
            lai = lice.leader_and_isr
            s = LeaderAndIsrPartitionState(
                tp.topic,
                tp.partition,
                lice.controller_epoch,
                lai.leader,
                lai.leader_epoch,
                lai.isr,
                lai.zk_version,
                a.replicas,
                a.adding_replicas,
                a.removing_replicas,
                False,
            )
            for b in a.replicas:
                per.setdefault(b, {})[tp] = s
            um[tp] = UpdateMetadataPartitionState(
                tp.topic,
                tp.partition,
                lice.controller_epoch,
                lai.leader,
                lai.leader_epoch,
                lai.isr,
                lai.zk_version,
                a.replicas,
                (),
            )

    def um_batch():
        batch.new_batch()
        batch.add_update_metadata_request_for_brokers(
            ctx.live_or_shutting_down_broker_ids, [tp for tp, _, _ in items]
        )
        batch.send_requests_to_brokers(1)

    def um_floor():
        um = {}
        for tp, a, lice in items:
            lai = lice.leader_and_isr
            um[tp] = UpdateMetadataPartitionState(
                tp.topic,
                tp.partition,
                lice.controller_epoch,
                lai.leader,
                lai.leader_epoch,
                lai.isr,
                lai.zk_version,
                a.replicas,
                (),
            )

    def sr_batch():
        batch.new_batch()
        for tp, a, _ in items:
            batch.add_stop_replica_request_for_brokers(a.replicas[1:], tp, False)
        batch.send_requests_to_brokers(1)

    def sr_floor():
        per = {}
        for tp, a, lice in items:
            s = StopReplicaPartitionState(tp.partition, lice.leader_and_isr.leader_epoch, False)
            for b in a.replicas[1:]:
                per.setdefault(b, {})[tp] = s

    out = {
        "partitions": n,
        "brokers": 5,
        "replication_factor": 2,
        "python": sys.version.split()[0],
        "gc_freeze": FREEZE,
        "results": [],
    }
    for name, fn, floor in (
        ("leader_and_isr+update_metadata", lai_batch, lai_floor),
        ("update_metadata_all_brokers", um_batch, um_floor),
        ("stop_replica", sr_batch, sr_floor),
    ):
        t, f = best(fn), best(floor)
        out["results"].append(
            {
                "workload": name,
                "cpu_seconds": round(t, 4),
                "partitions_per_second": round(n / t),
                "baseline": "bare object construction (floor)",
                "baseline_cpu_seconds": round(f, 4),
                "ratio_to_floor": round(t / f, 2),
            }
        )
    print(json.dumps(out, indent=1))


FREEZE = "--gc-freeze" in sys.argv

if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    main(int(args[0]) if args else 100_000)
