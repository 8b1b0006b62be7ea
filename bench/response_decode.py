"""What a channel thread spends on one broker's answer to a failover's LeaderAndIsr.

After a failover each surviving broker answers the OnlineReplica LeaderAndIsr with an error for
every partition it was sent: 60,000 at RF 3 (``--partitions``). The controller asks one question
of it: is KAFKA_STORAGE_ERROR among them (``brokers.process_leader_and_isr_response_received``)?
Timed on the thread's CPU clock, in a process holding a million objects (the controller's heap) with
the collector on, as on a send thread:

* ``decode_and_ask``: parse the answer's JSON, decode it (``PartitionErrors``: checked columns),
  ask the question;
* the baseline, in the same run: the same, plus building the per-partition dict with the collector
  paused, as the decoder did before the answers were kept as columns (every ``TopicPartition``
  key and the dict, then ``transport.columns.gc_paused``'s freeze).

Prints one JSON line and appends it to ``bench/results/response_decode.jsonl``.

    .venv/bin/python bench/response_decode.py [--partitions 60000] [--reps 30]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import report
from kafka_controller.domain.requests import Errors, LeaderAndIsrResponse
from kafka_controller.domain.values import TopicPartition
from kafka_controller.transport.codec import DEFAULT_APIS, LEADER_AND_ISR
from kafka_controller.transport.columns import gc_paused


def _timed(step: Callable[[], object]) -> float:
    """One call of ``step``, on this thread's CPU clock."""
    start = time.thread_time()
    step()
    return time.thread_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=60_000, help="entries in the answer")
    parser.add_argument("--reps", type=int, default=30, help="timed decodes of each kind")
    args = parser.parse_args()
    if args.partitions < 1 or args.reps < 1:
        parser.error("--partitions and --reps must be at least 1")
    heap = [{i: (i, str(i))} for i in range(1_000_000)]  # a controller-sized heap for the collector
    errors = {TopicPartition(f"topic-{i // 50}", i % 50): Errors.NONE for i in range(args.partitions)}
    raw = orjson.dumps(
        DEFAULT_APIS.get(LEADER_AND_ISR).encode_response(LeaderAndIsrResponse(Errors.NONE, errors))
    )

    def decode_and_ask() -> bool:
        decoded = DEFAULT_APIS.decode_response(LEADER_AND_ISR, orjson.loads(raw))
        return Errors.KAFKA_STORAGE_ERROR in decoded.partition_errors.values()

    def decode_into_a_dict() -> bool:
        decoded = DEFAULT_APIS.decode_response(LEADER_AND_ISR, orjson.loads(raw))
        errors = decoded.partition_errors
        with gc_paused(args.partitions):
            len(errors)  # builds the dict
        return Errors.KAFKA_STORAGE_ERROR in errors.values()

    if decode_and_ask() or decode_into_a_dict():
        raise SystemExit("the answer lists KAFKA_STORAGE_ERROR: the benchmark's layout is wrong")
    gc.collect()
    lazy, full = [], []
    for _ in range(args.reps):  # alternated, so that both see the same machine
        lazy.append(_timed(decode_and_ask))
        full.append(_timed(decode_into_a_dict))
    del heap
    lazy_ms, full_ms = statistics.median(lazy) * 1000, statistics.median(full) * 1000
    report(
        "response_decode",
        {
            "partitions": args.partitions,
            "reps": args.reps,
            "answer_bytes": len(raw),
            "decode_and_ask_ms": round(lazy_ms, 2),
            "baseline_decode_into_a_dict_ms": round(full_ms, 2),
            "ratio_to_baseline": round(lazy_ms / full_ms, 2),
        },
    )


if __name__ == "__main__":
    main()
