"""Reconciliation benchmark: the Spark job against the same rules in pandas, on synthetic fleets.

For each size (default 100,000, 1,000,000 and 3,000,000 partitions, RF 3, 10 audit rows per
partition, every finding planted once) it generates the fleet once (cached under ``--cache-dir``),
then runs, on the same files:

* **pandas** (``bench/pandas_reconcile``, the same rules written again), in a subprocess so its
  peak memory is measured on its own: stages ``load`` and ``rules``;
* **Spark** (``reconcile.job.run``, local mode, one session for all sizes, warmed up first): stages
  ``load`` (read, ZooKeeper partitions cached), ``prepare`` (the broker and controller joins and the
  audit window, cached), ``rules``, ``outputs`` (findings and both summaries as Parquet),
  ``remediation``; ``end_to_end`` is all of them.

The like-for-like comparison is Spark's ``load + prepare + rules`` against pandas' ``load + rules``
(the same work: every rule, every finding); both engines' findings are checked to be identical.
Growth with size is the log-log slope of time against partitions, over all sizes and over the two
largest (1.0 = linear; fixed overheads pull it below 1 at small sizes), and the time per million
input rows at each size. The crossover is reported as
measured (where Spark's ratio stops being above 1, if it does) and extrapolated from both fitted
power laws; on one machine Spark mostly pays overhead, and its point is that the same job runs on a
cluster unchanged (see ``CLUSTER_SUBMIT`` and ``kafka_controller/reconcile/job.py``).

Prints one JSON document per size as it goes and a final document, and appends the final one to
``bench/results/reconcile.jsonl``. Absolute seconds drift on shared machines (load averages are
recorded); ratios and slopes hold better.

    .venv/bin/python bench/reconcile.py [--sizes 100000,1000000,3000000] [--cache-dir DIR]
        [--master local[2]] [--driver-memory 6g] [--skip-pandas] [--skip-spark]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

#: ``KAFKA_CONTROLLER_BENCH_RESULTS`` moves it, as for the other benchmarks (the smoke test does).
RESULTS = (
    Path(os.environ.get("KAFKA_CONTROLLER_BENCH_RESULTS") or Path(__file__).resolve().parent / "results")
    / "reconcile.jsonl"
)
GENERATOR_VERSION = 1  # bump when synthetic.py changes what it writes: invalidates the cache
CLUSTER_SUBMIT = (
    "spark-submit --master yarn --deploy-mode cluster --py-files kc.zip "
    "--jars /usr/share/java/postgresql.jar --num-executors 20 --executor-cores 4 --executor-memory 8g "
    "--conf spark.sql.shuffle.partitions=400 "
    "kafka_controller/reconcile/job.py --snapshot hdfs:///kc/snap --audit-url postgresql://kc@audit-db/audit "
    "--out hdfs:///kc/runs"
)


def keys_digest(rows: list[tuple[Any, ...]]) -> str:
    return hashlib.sha256(json.dumps(sorted(rows, key=str)).encode()).hexdigest()[:16]


def fleet_for(cache: Path, n: int) -> dict[str, Any]:
    """The cached fleet of ``n`` partitions (generated on first use); returns its description."""
    from kafka_controller.reconcile import synthetic

    home = cache / f"fleet-{n}-g{GENERATOR_VERSION}"
    marker = home / "fleet.json"
    if marker.is_file():
        return json.loads(marker.read_text())
    tmp = cache / f".tmp-{n}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    t = time.perf_counter()
    f = synthetic.generate(tmp / "data", n, plants=synthetic.PLANTS)
    seconds = time.perf_counter() - t
    shutil.rmtree(home, ignore_errors=True)
    tmp.rename(home)
    info = {
        "partitions": n,
        "brokers": f.brokers,
        "audit_rows": f.audit_rows,
        "generate_s": round(seconds, 2),
        "snapshot": str(home / "data" / "snapshot"),
        "audit": str(home / "data" / "audit"),
        "planted_findings": len(f.expected),
        "input_rows": input_rows(home / "data"),
    }
    marker.write_text(json.dumps(info))
    return info


def input_rows(root: Path) -> int:
    import pyarrow.parquet as pq

    return sum(pq.ParquetFile(p).metadata.num_rows for p in root.rglob("*.parquet"))


# -- pandas, in a subprocess -----------------------------------------------------------------------
def _key(r: Any) -> tuple[Any, ...]:
    partition = None if r.partition is None or r.partition != r.partition else int(r.partition)
    broker = None if r.broker is None or r.broker != r.broker else int(r.broker)
    return (r.kind, r.topic, partition, broker)


def pandas_worker(snapshot: str, audit: str, out: str) -> None:
    from bench import pandas_reconcile

    findings, timings = pandas_reconcile.run(snapshot, audit)
    keys = [_key(r) for r in findings.itertuples(index=False)]
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    Path(out).write_text(
        json.dumps(
            {
                "timings": timings,
                "findings": len(keys),
                "digest": keys_digest(keys),
                "peak_rss_mb": round(peak_mb),
            }
        )
    )


def run_pandas(info: dict[str, Any]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "pandas.json"
        t = time.perf_counter()
        subprocess.run(
            [sys.executable, __file__, "--pandas-worker", info["snapshot"], info["audit"], str(out)],
            check=True,
        )
        wall = time.perf_counter() - t
        r = json.loads(out.read_text())
    total = r["timings"]["load"] + r["timings"]["rules"]
    return {
        "stages_s": {k: round(r["timings"][k], 2) for k in ("load", "rules")},
        "rules_path_s": round(total, 2),
        "process_wall_s": round(wall, 2),
        "rows_per_s": round(info["input_rows"] / total),
        "peak_rss_mb": r["peak_rss_mb"],
        "findings": r["findings"],
        "digest": r["digest"],
    }


# -- Spark -----------------------------------------------------------------------------------------
def run_spark(spark: Any, info: dict[str, Any], out: Path) -> dict[str, Any]:
    import pyarrow.parquet as pq

    from kafka_controller.reconcile import job

    config = job.JobConfig(snapshot=info["snapshot"], out=str(out), audit_parquet=info["audit"])
    t = time.perf_counter()
    result = job.run(spark, config)
    wall = time.perf_counter() - t
    rows = pq.read_table(Path(result.run_dir) / "findings").to_pylist()
    keys = [(r["kind"], r["topic"], r["partition"], r["broker"]) for r in rows]
    stages = {k: v for k, v in result.timings_s.items() if k != "total"}
    rules_path = stages["load"] + stages["prepare"] + stages["rules"]
    return {
        "stages_s": stages,
        "rules_path_s": round(rules_path, 2),
        "end_to_end_s": round(wall, 2),
        "rows_per_s": round(info["input_rows"] / wall),
        "findings": len(keys),
        "digest": keys_digest(keys),
    }


def fit(sizes: list[int], times: list[float]) -> tuple[float, float] | None:
    """Least-squares ``log t = log a + b log n``; returns ``(a, b)``."""
    if len(sizes) < 2:
        return None
    xs, ys = [math.log(n) for n in sizes], [math.log(t) for t in times]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)
    return math.exp(my - b * mx), b


def summarise(per_size: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {"growth": {}, "crossover": {}}
    sizes = [p["partitions"] for p in per_size]
    fits = {}
    for engine, key in (
        ("spark", "rules_path_s"),
        ("spark_end_to_end", "end_to_end_s"),
        ("pandas", "rules_path_s"),
    ):
        src = "pandas" if engine == "pandas" else "spark"
        if not all(src in p for p in per_size):
            continue
        times = [p[src][key] for p in per_size]
        f = fit(sizes, times)
        fits[engine] = f
        top = fit(sizes[-2:], times[-2:])
        out["growth"][engine] = {
            "loglog_slope": None if f is None else round(f[1], 3),
            "loglog_slope_two_largest": None if top is None else round(top[1], 3),
            "s_per_million_input_rows": {
                str(p["partitions"]): round(t / p["input_rows"] * 1e6, 3)
                for p, t in zip(per_size, times, strict=True)
            },
        }
    if "spark" in fits and "pandas" in fits:
        ratios = {str(p["partitions"]): p["ratio_spark_over_pandas"] for p in per_size}
        first_win = next((n for n, r in ratios.items() if r <= 1.0), None)
        out["crossover"]["ratio_by_size"] = ratios
        out["crossover"]["measured"] = (
            f"Spark at or below pandas from {first_win} partitions"
            if first_win
            else "Spark slower than pandas at every measured size on this machine"
        )
        (a_s, b_s), (a_p, b_p) = fits["spark"] or (0, 0), fits["pandas"] or (0, 0)
        if b_p > b_s and a_s > 0 and a_p > 0:
            out["crossover"]["extrapolated_partitions"] = round((a_s / a_p) ** (1 / (b_p - b_s)))
        else:
            out["crossover"]["extrapolated_partitions"] = None
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="100000,1000000,3000000")
    p.add_argument("--cache-dir", type=Path, default=Path(tempfile.gettempdir()) / "kc-reconcile-bench")
    p.add_argument("--master", default="local[2]")
    p.add_argument("--driver-memory", default="6g")
    p.add_argument("--shuffle-partitions", type=int, default=16)
    p.add_argument("--skip-pandas", action="store_true")
    p.add_argument("--skip-spark", action="store_true")
    p.add_argument("--pandas-worker", nargs=3, metavar=("SNAPSHOT", "AUDIT", "OUT"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.pandas_worker:
        pandas_worker(*args.pandas_worker)
        return 0
    try:
        sizes = sorted({int(s) for s in args.sizes.split(",") if s.strip()})
    except ValueError:
        p.error(f"--sizes must be comma-separated integers, got {args.sizes!r}")
    if not sizes or min(sizes) < 1000:
        p.error("--sizes must name sizes of at least 1000 partitions")
    args.cache_dir.mkdir(parents=True, exist_ok=True)
    load_start = os.getloadavg()
    spark = None
    if not args.skip_spark:
        from kafka_controller.reconcile.spark_io import get_spark

        spark, _ = get_spark(
            master=args.master,
            shuffle_partitions=args.shuffle_partitions,
            driver_memory=args.driver_memory,
            app_name="reconcile-bench",
        )
        spark.sparkContext.setLogLevel("ERROR")
        with tempfile.TemporaryDirectory() as d:  # warm-up: JVM, code generation, Python workers
            run_spark(spark, fleet_for(args.cache_dir, 2000), Path(d))
    per_size = []
    with tempfile.TemporaryDirectory() as runs:
        for n in sizes:
            info = fleet_for(args.cache_dir, n)
            entry: dict[str, Any] = {
                k: info[k]
                for k in (
                    "partitions",
                    "brokers",
                    "audit_rows",
                    "input_rows",
                    "planted_findings",
                    "generate_s",
                )
            }
            if not args.skip_pandas:
                entry["pandas"] = run_pandas(info)
            if spark is not None:
                entry["spark"] = run_spark(spark, info, Path(runs) / str(n))
            if "pandas" in entry and "spark" in entry:
                entry["ratio_spark_over_pandas"] = round(
                    entry["spark"]["rules_path_s"] / entry["pandas"]["rules_path_s"], 2
                )
                entry["findings_equal"] = entry["spark"]["digest"] == entry["pandas"]["digest"]
            entry["loadavg"] = os.getloadavg()[0]
            per_size.append(entry)
            print(json.dumps(entry), flush=True)
    if spark is not None:
        spark.stop()
    import pyspark

    doc = {
        "bench": "reconcile",
        "time": datetime.now(UTC).isoformat(timespec="seconds"),
        "environment": {
            "cpus": os.cpu_count(),
            "loadavg_start": load_start[0],
            "loadavg_end": os.getloadavg()[0],
            "python": platform.python_version(),
            "pyspark": pyspark.__version__,
            "master": args.master,
            "driver_memory": args.driver_memory,
            "shuffle_partitions": args.shuffle_partitions,
        },
        "sizes": per_size,
        **summarise(per_size),
        "cluster_submit": CLUSTER_SUBMIT,
    }
    print(json.dumps(doc, indent=1))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    with RESULTS.open("a") as f:
        f.write(json.dumps(doc) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
