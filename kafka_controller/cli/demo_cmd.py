"""``kafka-controller demo``: the README's main job.

An embedded cluster (ZooKeeper + 3 broker processes, auditing into a SQLite file in a temporary
directory) and a scripted scenario that prints what happens step by step: create topics, hard-kill
a broker, restart it, controlled shutdown of the busiest broker, preferred-replica election, a
reassignment with its leader epochs, a controller failover drill, topic deletion, and finally the
audit store's account of it all. Every process is stopped on exit, on failure and on Ctrl-C.
``--keep`` leaves the cluster running in the foreground afterwards (until Ctrl-C) to explore it
with the other subcommands; ``--json`` prints a machine-readable summary on stdout (the narration
then goes to stderr).
"""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Any

from kafka_controller.cli import common

PROG = "kafka-controller demo"


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "demo",
        help="run the scripted demo scenario on an embedded cluster",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--keep", action="store_true", help="keep the cluster running afterwards, until Ctrl-C")
    p.add_argument("--audit-url", metavar="URL", help="audit store (default: a SQLite file in the temp dir)")
    common.add_json_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kafka_controller.cluster.demo import DemoScenario
    from kafka_controller.cluster.demo_audit import audit_summary, render_audit_summary, wait_settled
    from kafka_controller.cluster.local import LocalCluster
    from kafka_controller.domain.errors import KafkaControllerError

    out = sys.stderr if args.json else sys.stdout

    def say(line: str) -> None:
        print(line, file=out, flush=True)

    workdir = Path(tempfile.mkdtemp(prefix="kc-demo-"))
    url = args.audit_url or f"sqlite:///{workdir / 'audit.db'}"
    previous = signal.signal(signal.SIGTERM, _raise_interrupt) if _main_thread() else None
    cluster = LocalCluster(3, data_dir=workdir / "cluster", audit_url=url)
    started = time.monotonic()
    ok = False
    interrupted = False
    try:
        say(f"Starting ZooKeeper and 3 brokers in {workdir} ...")
        cluster.start()
        steps = DemoScenario(cluster, say).run()
        if not args.keep:
            say("")
            say("Stopping the cluster: controlled shutdown of each broker, the controller last")
            cluster.close(graceful=True)
        wait_settled(url)
        digest = audit_summary(url)
        say("")
        say(f"== {len(steps) + 1}. What the audit store recorded")
        for line in render_audit_summary(digest):
            say(line)
        total = time.monotonic() - started
        say("")
        say(f"Demo finished in {total:.0f}s.")
        if args.json:
            common.print_json(
                {
                    "ok": True,
                    "seconds": round(total, 3),
                    "steps": [
                        {"name": s.name, "title": s.title, "seconds": s.seconds, **s.facts} for s in steps
                    ],
                    "audit": digest,
                }
            )
        ok = True
        if args.keep:
            _keep_running(cluster, url, say)
        return 0
    except KeyboardInterrupt:
        interrupted = True
        raise
    except KafkaControllerError:
        raise
    except Exception as e:  # a bug in a step must still end in one line and a clean-up
        raise common.CommandFailedError(f"the demo failed: {type(e).__name__}: {e}") from e
    finally:
        cluster.close(graceful=False)
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        if ok or interrupted:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            print(f"{PROG}: broker and ZooKeeper logs kept in {workdir}", file=sys.stderr, flush=True)


def _keep_running(cluster: Any, url: str, say: Any) -> None:
    say("")
    say(f"The cluster keeps running: --zookeeper {cluster.connect_string}; audit --url {url}")
    say(f"  e.g. kafka-controller describe --zookeeper {cluster.connect_string}")
    say("Press Ctrl-C to stop it.")
    stop = threading.Event()
    try:
        while not stop.wait(0.5):
            pass
    except KeyboardInterrupt:
        say("stopping the cluster")
        cluster.close(graceful=True)


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt
