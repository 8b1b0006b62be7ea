"""``kafka-controller demo``: the README's main job.

An embedded cluster (ZooKeeper + 3 broker processes, auditing into a SQLite file in a temporary
directory), then one of two scenarios, each narrated step by step and ending with the audit store's
account of it all:

``--scenario airflow`` (the default; needs the ``airflow`` extra and the checkout's ``dags/``)
    a private Airflow (temporary ``AIRFLOW_HOME``, SQLite metadata DB, connections pointed at the
    cluster) runs the ``controller_failover_drill`` and ``rolling_controlled_shutdown`` DAGs for
    real with ``dag.test()``: the controller resigns and the run times the recovery, then every
    broker is restarted once with a controlled shutdown, the controller last.
``--scenario scripted``
    create topics, hard-kill a broker, restart it, controlled shutdown of the busiest broker,
    preferred-replica election, a reassignment with its leader epochs, a controller failover drill,
    topic deletion.

Every process is stopped on exit, on failure and on Ctrl-C. ``--keep`` leaves the cluster running
in the foreground afterwards (until Ctrl-C) to explore it with the other subcommands, and keeps the
temporary directory (with the Airflow home); ``--json`` prints a machine-readable summary on stdout
(the narration then goes to stderr).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib.util
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

from kafka_controller.airflow.demo_home import dags_folder
from kafka_controller.cli import common
from kafka_controller.cluster.demo import DemoScenario
from kafka_controller.cluster.demo_audit import audit_summary, render_audit_summary, wait_settled
from kafka_controller.cluster.local import LocalCluster
from kafka_controller.domain.errors import KafkaControllerError

PROG = "kafka-controller demo"
SCENARIOS = ("airflow", "scripted")


def register(subparsers: Any, summary: str) -> None:
    p = subparsers.add_parser(
        "demo",
        help=summary,
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--scenario",
        choices=SCENARIOS,
        default="airflow",
        help="airflow: the failover-drill and rolling-restart DAGs end to end (default); "
        "scripted: the controller's jobs one by one, without Airflow",
    )
    p.add_argument("--keep", action="store_true", help="keep the cluster running afterwards, until Ctrl-C")
    p.add_argument(
        "--dags-folder",
        metavar="DIR",
        help="where the airflow scenario finds its DAG files (default: dags/ of the source checkout)",
    )
    p.add_argument("--audit-url", metavar="URL", help="audit store (default: a SQLite file in the temp dir)")
    common.add_json_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.scenario == "scripted":
        return run_scripted(args)
    return run_airflow(args)


def run_airflow(args: argparse.Namespace) -> int:
    if importlib.util.find_spec("airflow") is None:
        raise common.CommandFailedError(
            "Airflow is not installed (pip install -e '.[airflow]'); "
            "run the demo without it: kafka-controller demo --scenario scripted"
        )
    # Imported on use: the Airflow demo imports SQLAlchemy (the 'audit' extra) and drives Airflow (the
    # 'airflow' extra); the scripted scenario needs neither.
    from kafka_controller.airflow.demo import AirflowDemo

    dags = dags_folder(args.dags_folder)  # before anything starts: a bad folder is one line, nothing left
    out = sys.stderr if args.json else sys.stdout

    def say(line: str) -> None:
        print(line, file=out, flush=True)

    workdir = Path(tempfile.mkdtemp(prefix="kc-demo-"))
    url = args.audit_url or f"sqlite:///{workdir / 'audit.db'}"
    demo = AirflowDemo(workdir, say, audit_url=url, dags=dags)
    started = time.monotonic()
    outcome = "failed"
    with _Interrupts() as interrupts:
        try:
            try:
                with _stdout_to_stderr(args.json):  # Airflow logs task failures to stdout
                    summary = demo.run()
            finally:
                if interrupts.seen:  # a run that failed because of Ctrl-C was interrupted
                    raise KeyboardInterrupt
            total = time.monotonic() - started
            say("")
            say(f"Demo finished in {total:.0f}s.")
            if args.json:
                common.print_json({**summary, "seconds": round(total, 3)})
            outcome = "ok"
            if args.keep:
                env_file = demo.write_env_file()
                say("")
                say(f"Airflow: `source {env_file}`, then e.g. `airflow dags list` (AIRFLOW_HOME={demo.home})")
                _keep_running(demo.cluster, url, say, demo.close)
                say(f"kept {workdir}: the Airflow home, the audit store, broker and ZooKeeper logs")
            return 0
        except KeyboardInterrupt:
            outcome = "interrupted"
            raise
        except KafkaControllerError:
            raise
        except Exception as e:  # a bug in a step must still end in one line and a clean-up
            raise common.CommandFailedError(f"the demo failed: {type(e).__name__}: {e}") from e
        finally:
            interrupts.hold()
            demo.close()
            if outcome == "interrupted" or (outcome == "ok" and not args.keep):
                shutil.rmtree(workdir, ignore_errors=True)
            elif outcome == "failed":
                print(
                    f"{PROG}: Airflow, broker and ZooKeeper logs kept in {workdir}",
                    file=sys.stderr,
                    flush=True,
                )
            # Airflow leaves ~650,000 objects behind: the last cyclic collection at interpreter exit
            # would walk them all (~1.5 s). The command ends here, so keep the collector off them.
            gc.freeze()


class _Interrupts:
    """While inside: SIGINT and SIGTERM raise ``KeyboardInterrupt`` and are remembered. Airflow's
    task runner turns a ``KeyboardInterrupt`` during a task into a failed run; the demo must still
    end as interrupted (exit 130, its directory removed), not as a failure. Once the clean-up has
    begun (``hold``) they are only remembered: a second Ctrl-C, or a SIGTERM after a Ctrl-C, must
    not cut short the stop of the brokers and ZooKeeper and leave them running."""

    def __init__(self) -> None:
        self.seen = False
        self._holding = False
        self._previous: dict[int, Any] = {}

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.seen = True
        if not self._holding:
            raise KeyboardInterrupt

    def hold(self) -> None:
        """From now on a signal is remembered, not raised (the clean-up runs)."""
        self._holding = True

    def __enter__(self) -> _Interrupts:
        if _main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)


def run_scripted(args: argparse.Namespace) -> int:
    out = sys.stderr if args.json else sys.stdout

    def say(line: str) -> None:
        print(line, file=out, flush=True)

    workdir = Path(tempfile.mkdtemp(prefix="kc-demo-"))
    url = args.audit_url or f"sqlite:///{workdir / 'audit.db'}"
    with _Interrupts() as interrupts:
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
        except Exception as e:
            # Ctrl-C that lands inside a ZooKeeper call can surface as the call's own error (the
            # session closing under it): after a signal every failure is the interruption.
            if interrupts.seen:
                interrupted = True
                raise KeyboardInterrupt from e
            if isinstance(e, KafkaControllerError):
                raise
            # a bug in a step must still end in one line and a clean-up
            raise common.CommandFailedError(f"the demo failed: {type(e).__name__}: {e}") from e
        finally:
            interrupts.hold()
            cluster.close(graceful=False)
            if ok or interrupted:
                shutil.rmtree(workdir, ignore_errors=True)
            else:
                print(f"{PROG}: broker and ZooKeeper logs kept in {workdir}", file=sys.stderr, flush=True)


def _keep_running(cluster: Any, url: str, say: Any, stop_cluster: Any = None) -> None:
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
        if stop_cluster is not None:
            stop_cluster()
        else:
            cluster.close(graceful=True)


@contextlib.contextmanager
def _stdout_to_stderr(enabled: bool) -> Iterator[None]:
    """With ``--json``, stdout is for the JSON alone: whatever else writes to file descriptor 1
    meanwhile (Airflow's task log, structlog holding its own handle) goes to stderr instead."""
    if not enabled:
        yield
        return
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()
