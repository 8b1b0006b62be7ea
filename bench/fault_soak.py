"""The fault soak: ``--trials`` fault trials of ``tests/faults`` run by ``--jobs``
pytest processes at once (each with its own ZooKeeper, ensemble, network lab and seeds: one
consecutive range per process), merged into one results file with one summary line, which is also
printed (JSON).

    .venv/bin/python bench/fault_soak.py --trials 500 --jobs 2 --base-seed 500000

A trial that fails prints its seed; replay it alone with ``KAFKA_CONTROLLER_FAULT_SEED=<seed>``.
Each process's pytest output is kept beside the results (``<out>.job<N>.log``).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.faults.conftest import Report  # noqa: E402
from tests.faults.trial import TrialResult  # noqa: E402

_FIELDS = [f.name for f in dataclasses.fields(TrialResult)]


def _ranges(trials: int, jobs: int, base: int) -> list[tuple[int, int]]:
    """``(first seed, count)`` per job, consecutive and together exactly ``trials`` seeds."""
    share, extra = divmod(trials, jobs)
    out, start = [], base
    for j in range(jobs):
        count = share + (j < extra)
        out.append((start, count))
        start += count
    return [r for r in out if r[1]]


def _results(path: Path) -> list[TrialResult]:
    if not path.exists():
        return []
    rows = [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]
    return [TrialResult(**{k: r[k] for k in _FIELDS}) for r in rows if r.get("type") == "trial"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=500)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--base-seed", type=int, default=500_000)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "reliability_soak.jsonl")
    args = ap.parse_args(argv)
    if args.trials < 1 or not 1 <= args.jobs <= 8:
        ap.error("--trials must be >= 1 and --jobs 1..8")
    started = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="fault-soak-"))
    procs: list[tuple[subprocess.Popen[bytes], Path]] = []
    for j, (first, count) in enumerate(_ranges(args.trials, args.jobs, args.base_seed)):
        part = work / f"part{j}.jsonl"
        env = {
            **os.environ,
            "KAFKA_CONTROLLER_FAULT_TRIALS": str(count),
            "KAFKA_CONTROLLER_FAULT_BASE_SEED": str(first),
            "KAFKA_CONTROLLER_FAULT_RESULTS": str(part),
        }
        log = args.out.with_name(f"{args.out.name}.job{j}.log")
        with log.open("wb") as out:
            cmd = [sys.executable, "-m", "pytest", "tests/faults/test_fault_trials.py", "-m", "faults"]
            cmd += ["-q", "-p", "no:cacheprovider"]
            procs.append(
                (subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT), part)
            )
    codes = [p.wait() for p, _ in procs]
    report = Report(args.out)
    report.results = [r for _, part in procs for r in _results(part)]
    report.started = started
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    summary = {
        **report.summary(),
        "jobs": args.jobs,
        "pytest_exit_codes": codes,
        "commit": commit.stdout.strip(),
        "load_avg_at_end": os.getloadavg(),
    }
    summary["command"] = f".venv/bin/python bench/fault_soak.py --trials {args.trials} --jobs {args.jobs}"
    lines = [orjson.dumps(r.line()) for r in report.results] + [orjson.dumps(summary)]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(b"\n".join(lines) + b"\n")
    print(orjson.dumps(summary).decode())
    return 0 if summary["trials"] == args.trials and summary["passed"] == args.trials else 1


if __name__ == "__main__":
    raise SystemExit(main())
