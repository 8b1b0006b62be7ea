"""The RF 3 failover's arithmetic alone, in columns: the floor of a columnar bulk path.

``docs/bulk-path.md`` proposes carrying the failover's bulk steps as columns from ZooKeeper's bytes
to the wire. Before building it, this measures how little the work itself costs that way, against
the controller as it is, in one process and in the same run:

* **baseline**: the real ``KafkaController``'s failover on the in-memory store
  (``controller_inmemory``'s cluster: 2,000 topics x 50 partitions x RF 3, broker 4 dead, broker 0
  the new controller), on the CPU clock, plus the encoding of every LeaderAndIsr and
  UpdateMetadata it sent with the transport's codec (what its send threads do);
* **columns**: the same failover's decisions over numpy arrays of the same layout — each replica's
  liveness and first state, the OnlineReplica move's LeaderAndIsr recipients (partitions with a
  live leader), the dead broker's ISR removal (leader kept, ISR without it, next leader epoch), the
  offline elections of the partitions it led (the first live replica of the assignment in the ISR,
  the ISR's live members), and every one of those requests and the three UpdateMetadata encoded
  from the columns with orjson (numpy arrays serialised as they are).

The outcomes are compared partition by partition (leader, leader epoch, ISR) with what the
controller left in its context: a sketch that decided differently would measure nothing, so a
mismatch ends the run. It is a floor, not an implementation: only this layout's cases of each
rule (full ISRs, one broker dead, nothing offline on a live broker, no topic being deleted), no
ZooKeeper writes, no audit rows, no context kept for the next event.

    .venv/bin/python bench/columnar_floor.py [--scale 1] [--reps 5]

Prints one JSON line and appends it to ``bench/results/columnar_floor.jsonl``.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import report
from bench.controller_inmemory import BROKERS, Cluster, drain
from bench.failover_requests import cpu, encode
from kafka_controller.domain.requests import LeaderAndIsrRequest, UpdateMetadataRequest

RF = 3
PER_TOPIC = 50
CONTROLLER, DEAD = 0, BROKERS - 1
CONTROLLER_EPOCH = 2  # the new controller's: the layout was written at epoch 1


def layout(topics: int) -> dict[str, dict[int, tuple[int, ...]]]:
    """``controller_inmemory``'s: replicas consecutive from a round-robin start."""
    return {
        f"topic-{t}": {
            p: tuple((t * PER_TOPIC + p + k) % BROKERS for k in range(RF)) for p in range(PER_TOPIC)
        }
        for t in range(topics)
    }


def controller_failover(assignment: dict[str, dict[int, tuple[int, ...]]]) -> dict[str, Any]:
    """The real controller's failover: its CPU, what it sent, what it left in its context."""
    cluster = Cluster()
    cluster.load(assignment)
    cluster.stores[DEAD].expire_session()
    controller = cluster.controller(CONTROLLER)

    def fail_over() -> None:
        controller.startup()
        drain(controller)

    spent = cpu(fail_over)
    ctx = controller.controller_context
    outcome = {
        (tp.topic, tp.partition): (
            info.leader_and_isr.leader,
            info.leader_and_isr.leader_epoch,
            info.leader_and_isr.isr,
        )
        for tp, info in ctx.partitions_leadership_info.items()
    }
    sent = [
        s.request
        for s in controller.channel_manager.sent  # type: ignore[attr-defined]
        if isinstance(s.request, LeaderAndIsrRequest | UpdateMetadataRequest)
    ]
    controller.shutdown()
    cluster.close()
    return {"cpu": spent, "outcome": outcome, "sent": sent}


class Columns:
    """The layout as the columnar path would load it: one row per partition."""

    def __init__(self, topics: int) -> None:
        n = topics * PER_TOPIC
        row = np.arange(n, dtype=np.int64)
        self.topic_names = [f"topic-{t}" for t in range(topics)]
        self.topic = (row // PER_TOPIC).astype(np.int32)
        self.partition = (row % PER_TOPIC).astype(np.int32)
        self.replicas = np.stack([(row + k) % BROKERS for k in range(RF)], axis=1).astype(np.int32)
        self.leader = self.replicas[:, 0].copy()
        self.leader_epoch = np.ones(n, dtype=np.int32)
        self.isr = self.replicas.copy()  # full ISRs; -1 pads a shrunk one
        self.zk_version = np.zeros(n, dtype=np.int32)


def encode_states(
    cols: Columns, rows: np.ndarray, isr: np.ndarray, leader: np.ndarray, epoch: np.ndarray
) -> bytes:
    """One request's partition states, the transport's fields, as columns."""
    body = {
        "controller_epoch": CONTROLLER_EPOCH,
        "topics": cols.topic_names,
        "partitions": {
            "topic": cols.topic[rows],
            "partition": cols.partition[rows],
            "leader": leader[rows],
            "leader_epoch": epoch[rows],
            "isr": isr[rows],
            "zk_version": cols.zk_version[rows],
            "replicas": cols.replicas[rows],
        },
    }
    return orjson.dumps(body, option=orjson.OPT_SERIALIZE_NUMPY)


def columnar_failover(cols: Columns) -> dict[str, Any]:
    """The failover's decisions and requests over ``cols`` (see the module docs)."""
    live = np.array([b != DEAD for b in range(BROKERS)])
    online = live[cols.replicas]  # every replica's liveness
    replica_states = np.where(online, 1, 5).astype(np.int8)  # OnlineReplica / DeletionIneligible
    led = live[cols.leader]
    size = states = 0
    # OnlineReplica: each live broker is told the led partitions it has a replica of; UpdateMetadata.
    all_rows = np.arange(len(cols.leader))
    for b in range(BROKERS):
        if live[b]:
            rows = np.flatnonzero((cols.replicas == b).any(axis=1) & led)
            size += len(encode_states(cols, rows, cols.isr, cols.leader, cols.leader_epoch))
            states += len(rows)
    size += len(encode_states(cols, all_rows[led], cols.isr, cols.leader, cols.leader_epoch))
    states += int(led.sum())
    # The dead broker's ISR removal: the partitions it follows with a live leader.
    isr = cols.isr.copy()
    leader = cols.leader.copy()
    epoch = cols.leader_epoch.copy()
    follows = (isr == DEAD).any(axis=1) & led
    isr[follows] = np.where(isr[follows] == DEAD, -1, isr[follows])
    epoch[follows] += 1
    # The partitions it led: the first live replica of the assignment that is in the ISR.
    orphans = np.flatnonzero(~led)
    in_isr = (cols.replicas[orphans][:, :, None] == cols.isr[orphans][:, None, :]).any(axis=2)
    candidate = in_isr & live[cols.replicas[orphans]]
    leader[orphans] = np.where(
        candidate.any(axis=1), cols.replicas[orphans][np.arange(len(orphans)), candidate.argmax(axis=1)], -1
    )
    isr[orphans] = np.where(live[cols.isr[orphans]], cols.isr[orphans], -1)
    epoch[orphans] += 1
    for changed in (np.flatnonzero(follows), orphans):
        for b in range(BROKERS):
            if live[b]:
                rows = changed[(cols.replicas[changed] == b).any(axis=1)]
                size += len(encode_states(cols, rows, isr, leader, epoch))
                states += len(rows)
        size += len(encode_states(cols, changed, isr, leader, epoch))
        states += len(changed)
    return {
        "leader": leader,
        "leader_epoch": epoch,
        "isr": isr,
        "replica_states": replica_states,
        "bytes": size,
        "states": states,
    }


def mismatches(cols: Columns, out: dict[str, Any], controller: dict[str, Any]) -> list[str]:
    """Partitions where the columns decided otherwise than the controller (at most 5)."""
    found: list[str] = []
    for i in range(len(cols.leader)):
        key = (cols.topic_names[cols.topic[i]], int(cols.partition[i]))
        mine = (
            int(out["leader"][i]),
            int(out["leader_epoch"][i]),
            tuple(int(b) for b in out["isr"][i] if b >= 0),
        )
        theirs = controller["outcome"].get(key)
        if theirs is None or mine != (theirs[0], theirs[1], tuple(theirs[2])):
            found.append(f"{key}: columns {mine}, controller {theirs}")
            if len(found) == 5:
                break
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of Kafka's 100,000 partitions")
    parser.add_argument("--reps", type=int, default=5, help="runs of each side; medians are reported")
    args = parser.parse_args()
    if not 0 < args.scale <= 4 or args.reps < 1:
        parser.error("--scale must be in (0, 4] and --reps at least 1")
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("kafka_controller").setLevel(logging.ERROR)
    topics = max(1, int(2000 * args.scale))
    assignment = layout(topics)
    controller_cpu: list[float] = []
    encode_cpu: list[float] = []
    controller: dict[str, Any] = {}
    for _ in range(args.reps):
        controller = controller_failover(assignment)
        controller_cpu.append(controller["cpu"])
        # what the controller's send threads do with its requests: the transport's codec and framing
        encode_cpu.append(cpu(partial(list, map(encode, controller["sent"]))))
    cols = Columns(topics)
    columns_cpu = [cpu(lambda: columnar_failover(cols)) for _ in range(args.reps)]
    out = columnar_failover(cols)
    wrong = mismatches(cols, out, controller)
    if wrong:
        raise SystemExit("the columns decided otherwise than the controller: " + "; ".join(wrong))
    baseline = statistics.median(controller_cpu) + statistics.median(encode_cpu)
    columns = statistics.median(columns_cpu)
    # Each request's states once: the brokers' UpdateMetadata share theirs (encoded once, as here).
    sent_states = sum(
        len(s) for s in {id(r.partition_states): r.partition_states for r in controller["sent"]}.values()
    )
    report(
        "columnar_floor",
        {
            "scale": args.scale,
            "partitions": len(cols.leader),
            "rf": RF,
            "dead_brokers": 1,
            "reps": args.reps,
            "controller_cpu_s": round(statistics.median(controller_cpu), 4),
            "controller_encode_cpu_s": round(statistics.median(encode_cpu), 4),
            "baseline_cpu_s": round(baseline, 4),
            "columns_cpu_s": round(columns, 4),
            "columns_share_of_baseline": round(columns / baseline, 4),
            "controller_partition_states_built": sent_states,
            "columns_partition_states_encoded": out["states"],
            "columns_bytes_encoded": out["bytes"],
            "runs": {
                "controller_cpu_s": controller_cpu,
                "encode_cpu_s": encode_cpu,
                "columns_cpu_s": columns_cpu,
            },
        },
    )


if __name__ == "__main__":
    main()
