"""Controller benchmark on the in-memory store: the two workloads of Kafka's published figures
(docs/performance.md), run by a real ``KafkaController`` on its event thread.

* **failover**: 5 brokers, 2,000 topics x 50 partitions x RF 1 (100,000 partitions). Timed from
  ``startup()`` until the Startup event is done: election, context load (batched reads of every
  broker, topic znode and partition state), the UpdateMetadata to all brokers, and both state
  machines' startup (LeaderAndIsr for every replica). Kafka 1.1: 14 s.
* **controlled shutdown**: 5 brokers, 25,000 topics x 1 partition x RF 2, broker 0 leading 10,000
  of them. Timed from the request until the answer (every leadership moved, ISRs shrunk).
  Kafka 1.1: 3 s.

Each figure comes with the raw batched store I/O it needs, measured in the same run (the floor:
what is left is the controller's own logic), and the ratio. Auditing is off (``NullAuditSink``),
as it costs nothing then; ``--audit`` reruns failover with a recording sink. Prints one JSON
object and appends it to ``bench/results/controller_inmemory.jsonl``.

    .venv/bin/python bench/controller_inmemory.py            # full size
    .venv/bin/python bench/controller_inmemory.py --scale 0.1
    .venv/bin/python bench/controller_inmemory.py --rf 3 --dead 1   # bench/failover.py --rf 3's case

``--rf 3 --dead 1`` is the failover of ``bench/failover.py --rf 3`` without ZooKeeper: replicas
consecutive from a round-robin start, and one broker (the old controller) dead, so the new one
takes its 60,000 replicas out of the ISR and elects leaders for the 20,000 partitions it led.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import sys
import threading
import time
from itertools import count, repeat
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kafka_controller.controller.config import KafkaConfig
from kafka_controller.controller.failover import new_topic_id
from kafka_controller.controller.kafka_controller import KafkaController
from kafka_controller.domain.values import (
    Broker,
    EndPoint,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
    TopicPartition,
)
from kafka_controller.dryrun.memory_store import InMemoryMetadataStore
from kafka_controller.dryrun.memory_zk import InMemoryZooKeeper
from kafka_controller.dryrun.recording import RecordingAuditSink
from kafka_controller.dryrun.recording_channel import RecordingBrokerChannel
from kafka_controller.ports import AuditSink
from kafka_controller.zk.backend import CREATE, PERSISTENT
from kafka_controller.zk.codecs import encode_topic

BROKERS = 5
KAFKA_1_1_FAILOVER_S = 14.0
KAFKA_1_1_CONTROLLED_SHUTDOWN_S = 3.0


class Cluster:
    """A tree with ``BROKERS`` registered brokers (one session each) and an admin session."""

    def __init__(self) -> None:
        self.tree = InMemoryZooKeeper()
        self.admin = InMemoryMetadataStore(self.tree)
        self.stores: dict[int, InMemoryMetadataStore] = {}
        self.epochs: dict[int, int] = {}
        for b in range(BROKERS):
            store = InMemoryMetadataStore(self.tree, create_paths=False)
            self.epochs[b] = store.register_broker(Broker(b, (EndPoint("localhost", 9092 + b),)))
            self.stores[b] = store

    def load(
        self, assignment: dict[str, dict[int, tuple[int, ...]]], distinct_states: bool = False
    ) -> list[TopicPartition]:
        """Topic znodes (v3, with ids) and partition states as a running Kafka 2.8 cluster leaves
        them, written in batches (leader = first replica, full ISR, leader epoch 1, controller
        epoch 1). ``distinct_states`` gives each partition its own leader epoch, as a long-lived
        cluster's states differ: no two state znodes are then equal (the controller shares the
        decoding of equal ones)."""
        ops = [
            (
                CREATE,
                f"/brokers/topics/{t}",
                encode_topic({p: ReplicaAssignment(r) for p, r in parts.items()}, new_topic_id()),
                PERSISTENT,
            )
            for t, parts in assignment.items()
        ]
        self.admin.batcher.run(ops, -1)
        epochs = count(1) if distinct_states else repeat(1)
        states = {
            TopicPartition(t, p): LeaderIsrAndControllerEpoch(LeaderAndIsr(r[0], next(epochs), r, 0), 1)
            for t, parts in assignment.items()
            for p, r in parts.items()
        }
        failed = [tp for tp, e in self.admin.create_partition_states(states, -1).items() if e is not None]
        if failed:
            raise SystemExit(f"setup failed for {len(failed)} partitions, e.g. {failed[0]}")
        return list(states)

    def controller(self, broker_id: int, audit: AuditSink | None = None) -> KafkaController:
        return KafkaController(
            KafkaConfig.of(broker_id, {"auto.leader.rebalance.enable": "false"}),
            self.stores[broker_id],
            RecordingBrokerChannel(),
            audit=audit,
            broker_info=Broker(broker_id, (EndPoint("localhost", 9092 + broker_id),)),
        )

    def close(self) -> None:
        for s in self.stores.values():
            s.close()
        self.admin.close()


def drain(controller: KafkaController) -> None:
    if not controller.wait_until_idle(600):
        raise SystemExit("the controller did not drain its queue")


def read_floor(store: InMemoryMetadataStore, partitions: list[TopicPartition]) -> float:
    """The batched reads a failover cannot avoid."""
    t0 = time.perf_counter()
    store.get_all_brokers_and_epochs()
    topics = store.get_all_topics()
    store.get_replica_assignment_and_topic_ids(topics)
    store.get_partition_states(partitions)
    return time.perf_counter() - t0


def bench_failover(
    scale: float,
    audit: bool,
    rf: int = 1,
    dead: int = 0,
    distinct_states: bool = False,
    sink: AuditSink | None = None,
) -> dict[str, Any]:
    """The failover; ``audit`` records to ``sink``, or to a ``RecordingAuditSink`` if none is given."""
    topics, per_topic = max(1, int(2000 * scale)), 50
    cluster = Cluster()
    assignment = {
        f"topic-{t}": {
            p: tuple((t * per_topic + p + k) % BROKERS for k in range(rf)) for p in range(per_topic)
        }
        for t in range(topics)
    }
    partitions = cluster.load(assignment, distinct_states)
    floor = min(read_floor(cluster.admin, partitions) for _ in range(2))
    # The old controller(s): the last ``dead`` brokers, their sessions expired before the election.
    for b in range(BROKERS - dead, BROKERS):
        cluster.stores[b].expire_session()
    recording: RecordingAuditSink | None = None
    if not audit:
        sink = None
    elif sink is None:
        sink = recording = RecordingAuditSink()
    controller = cluster.controller(0, sink)
    t0, c0 = time.perf_counter(), time.process_time()
    controller.startup()
    drain(controller)
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    assert controller.is_active, "broker 0 did not become the controller"
    ctx = controller.controller_context
    live = set(range(BROKERS - dead))
    leaders = {tp: info.leader_and_isr.leader for tp, info in ctx.partitions_leadership_info.items()}
    unled = [
        tp
        for tp in partitions
        if leaders.get(tp) not in live and live & set(assignment[tp.topic][tp.partition])
    ]
    assert not unled, f"{len(unled)} partitions with a live replica have no live leader, e.g. {unled[0]}"
    sent = len(controller.channel_manager.sent)  # type: ignore[attr-defined]
    controller.shutdown()
    cluster.close()
    result: dict[str, Any] = {
        "partitions": len(partitions),
        "topics": topics,
        "brokers": BROKERS,
        "rf": rf,
        "dead_brokers": dead,
        "distinct_states": distinct_states,
        "seconds": round(elapsed, 3),
        "cpu_seconds": round(cpu, 3),
        "partitions_per_second": round(len(partitions) / elapsed),
        "baseline_batched_reads_seconds": round(floor, 3),
        "ratio_to_batched_reads": round(elapsed / floor, 2),
        "kafka_1_1_seconds": KAFKA_1_1_FAILOVER_S,
        "ratio_to_kafka_1_1": round(elapsed / KAFKA_1_1_FAILOVER_S, 3),
        "requests_sent": sent,
    }
    if recording is not None:
        result["audit_records"] = len(recording.records)
    return result


def bench_controlled_shutdown(scale: float) -> dict[str, Any]:
    """Broker 0 leads ``10,000 * scale`` partitions (followers cycle over 1-4); the rest of the
    25,000 RF-2 partitions sit on brokers 1-4."""
    total, led = max(5, int(25_000 * scale)), max(1, int(10_000 * scale))
    cluster = Cluster()
    assignment: dict[str, dict[int, tuple[int, ...]]] = {}
    for i in range(total):
        if i < led:
            replicas = (0, 1 + i % (BROKERS - 1))
        else:
            a = 1 + i % (BROKERS - 1)
            replicas = (a, 1 + (a % (BROKERS - 1)))
        assignment[f"cs-{i}"] = {0: replicas}
    partitions = cluster.load(assignment)
    controller = cluster.controller(1)
    controller.startup()
    drain(controller)
    assert controller.is_active, "broker 1 did not become the controller"
    done = threading.Event()
    answer: list[Any] = []

    def callback(result: Any) -> None:
        answer.append(result)
        done.set()

    t0, c0 = time.perf_counter(), time.process_time()
    controller.controlled_shutdown(0, cluster.epochs[0], callback)
    if not done.wait(600):
        raise SystemExit("controlled shutdown did not answer")
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    still_led = answer[0]
    if isinstance(still_led, Exception) or still_led:
        raise SystemExit(f"controlled shutdown left leadership behind: {still_led!r}")
    led_tps = [tp for tp in partitions if assignment[tp.topic][tp.partition][0] == 0]
    controller.shutdown()
    # The floor: the store I/O of the moves, batched (read the led partitions, write them back).
    t1 = time.perf_counter()
    reads = cluster.admin.get_partition_states(led_tps)
    writes = {tp: r.leader_and_isr for tp, r in reads.items() if isinstance(r, LeaderIsrAndControllerEpoch)}
    cluster.admin.update_leader_and_isr(writes, 1, -1)
    floor = time.perf_counter() - t1
    cluster.close()
    return {
        "partitions": len(partitions),
        "led_by_shutting_down_broker": len(led_tps),
        "brokers": BROKERS,
        "seconds": round(elapsed, 3),
        "cpu_seconds": round(cpu, 3),
        "baseline_batched_io_seconds": round(floor, 3),
        "ratio_to_batched_io": round(elapsed / floor, 2),
        "kafka_1_1_seconds": KAFKA_1_1_CONTROLLED_SHUTDOWN_S,
        "ratio_to_kafka_1_1": round(elapsed / KAFKA_1_1_CONTROLLED_SHUTDOWN_S, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of Kafka's layouts (default 1)")
    parser.add_argument("--audit", action="store_true", help="also time failover with a recording audit sink")
    parser.add_argument("--rf", type=int, default=1, choices=[1, 2, 3], help="failover replication factor")
    parser.add_argument("--dead", type=int, default=0, help="brokers dead at the failover (default 0)")
    parser.add_argument("--note", default=None, help="a note stored with the result")
    parser.add_argument("--no-shutdown", action="store_true", help="skip the controlled shutdown case")
    parser.add_argument(
        "--distinct-states",
        action="store_true",
        help="every partition state znode different (its own leader epoch), as in a long-lived cluster",
    )
    args = parser.parse_args()
    if not 0 < args.scale <= 10:
        parser.error(f"--scale must be in (0, 10], got {args.scale}")
    if not 0 <= args.dead < BROKERS - 1:
        parser.error(f"--dead must be in 0..{BROKERS - 2}, got {args.dead}")
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("kafka_controller").setLevel(logging.ERROR)
    result: dict[str, Any] = {
        "bench": "controller_inmemory",
        "scale": args.scale,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_1m": round(os.getloadavg()[0], 2),
        "failover": bench_failover(
            args.scale, audit=False, rf=args.rf, dead=args.dead, distinct_states=args.distinct_states
        ),
    }
    if not args.no_shutdown:
        result["controlled_shutdown"] = bench_controlled_shutdown(args.scale)
    if args.audit:
        result["failover_audited"] = bench_failover(
            args.scale, audit=True, rf=args.rf, dead=args.dead, distinct_states=args.distinct_states
        )
    if args.note:
        result["note"] = args.note
    line = json.dumps(result)
    print(line)
    results = os.environ.get("KAFKA_CONTROLLER_BENCH_RESULTS") or Path(__file__).resolve().parent / "results"
    out = Path(results) / "controller_inmemory.jsonl"
    out.parent.mkdir(exist_ok=True)
    with out.open("a") as f:
        f.write(line + "\n")


if __name__ == "__main__":
    main()
