"""CPU per thread of the store's hot ZooKeeper calls on a real (embedded) ZooKeeper: 80,000 fenced
``update_leader_and_isr`` writes and the 80,000 ``get_partition_states`` reads before them, each
as the whole client process's CPU seconds and as the CPU of every thread but the caller's (kazoo's
connection thread, which holds the GIL the controller's event thread needs). Medians over
``--reps``. Prints one JSON line; nothing is written to ``bench/results``.

    .venv/bin/python bench/zk_write_cpu.py --partitions 80000 --reps 7
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from zk_io import build


def _thread_clocks() -> dict[str, float]:
    out = {}
    for t in threading.enumerate():
        if t.ident is not None:
            with contextlib.suppress(OSError):  # a thread that ended meanwhile
                out[t.name] = time.clock_gettime(time.pthread_getcpuclockid(t.ident))
    return out


def _others(before: dict[str, float], after: dict[str, float]) -> float:
    return sum(v - before.get(k, 0.0) for k, v in after.items() if k != threading.main_thread().name)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=80_000)
    parser.add_argument("--reps", type=int, default=7)
    args = parser.parse_args()

    from kafka_controller.zk.embedded import EmbeddedZooKeeper
    from kafka_controller.zk.kazoo_backend import KazooMetadataStore
    from kafka_controller.zk.security import ZkClientConfig

    figures: dict[str, list[float]] = {"write_cpu_s": [], "write_other_threads_cpu_s": []}
    figures.update({"read_cpu_s": [], "read_other_threads_cpu_s": []})
    with EmbeddedZooKeeper(heap_mb=1024) as zk:
        store = KazooMetadataStore(ZkClientConfig(zk.connect_string + "/bench", session_timeout_ms=30_000))
        try:
            epoch, zkv = store.register_controller_and_increment_controller_epoch(1)
            tps = build(store, args.partitions, epoch, zkv)
            for _ in range(args.reps):
                c0, p0 = _thread_clocks(), time.process_time()
                states = store.get_partition_states(tps)
                p1, c1 = time.process_time(), _thread_clocks()
                lais = {tp: s.leader_and_isr.new_leader(s.leader_and_isr.leader) for tp, s in states.items()}  # type: ignore[union-attr]
                c2, p2 = _thread_clocks(), time.process_time()
                result = store.update_leader_and_isr(lais, epoch, zkv)
                p3, c3 = time.process_time(), _thread_clocks()
                assert not result.to_retry and len(result.finished) == len(tps)
                figures["read_cpu_s"].append(p1 - p0)
                figures["read_other_threads_cpu_s"].append(_others(c0, c1))
                figures["write_cpu_s"].append(p3 - p2)
                figures["write_other_threads_cpu_s"].append(_others(c2, c3))
        finally:
            store.close()
    out = {"bench": "zk_write_cpu", "partitions": args.partitions, "reps": args.reps}
    out.update({k: round(sorted(v)[len(v) // 2], 3) for k, v in figures.items()})
    print(json.dumps(out, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
