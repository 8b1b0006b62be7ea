"""``kafka-controller reconcile``: snapshots, the PySpark reconciliation job, and its remediation plan.

* ``reconcile export --zookeeper CONNECT --out DIR [--broker-views] [--controller-view]``: a
  snapshot from ZooKeeper, with each broker's own view through its ``DescribeReplicas`` API when
  ``--broker-views`` is given, and the active controller's context through its
  ``DescribeControllerContext`` API when ``--controller-view`` is (a controller that does not
  answer within ``--timeout`` leaves the snapshot without it, and the output says why).
* ``reconcile export-audit --audit-url URL --out DIR``: a Parquet copy of the audit history.
* ``reconcile run --snapshot DIR (--audit-url URL | --audit-parquet DIR) --out DIR``: the Spark job
  in local mode (the same as ``spark-submit kafka_controller/reconcile/job.py ...``).
* ``reconcile synth --partitions N --out DIR [--plant KIND ...]``: a synthetic fleet and audit history.
* ``reconcile plan FILE [--election-json LIST]``: check a remediation plan; print one list as the
  JSON ``kafka-controller elect --path-to-json-file`` takes.
* ``reconcile schema``: the snapshot's Parquet schema.

pyspark, pandas and pyarrow are imported only by the subcommand that needs them.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import signal
from pathlib import Path
from typing import Any

from kafka_controller.cli.common import add_command_config_option, add_zookeeper_option
from kafka_controller.cli.connections import open_admin_client, open_store
from kafka_controller.cluster.process import children_of
from kafka_controller.domain.errors import InvalidArgumentError
from kafka_controller.reconcile.export import export_audit_history, export_snapshot
from kafka_controller.reconcile.job import add_arguments, run_from_args
from kafka_controller.reconcile.remediation import PLAN_LISTS, election_json, load_plan
from kafka_controller.reconcile.snapshot_schema import describe_schema
from kafka_controller.reconcile.sources import admin_broker_source, admin_controller_source


def register(subparsers: Any, summary: str) -> None:
    p = subparsers.add_parser("reconcile", help=summary)
    sub = p.add_subparsers(dest="reconcile_command", metavar="ACTION", required=True)

    e = sub.add_parser("export", help="export a snapshot from ZooKeeper (and the brokers' own views)")
    add_zookeeper_option(e)
    add_command_config_option(e)  # --broker-views asks every broker
    e.add_argument("--out", required=True, help="snapshot directory to create")
    e.add_argument("--broker-views", action="store_true", help="ask every broker for its replicas")
    e.add_argument(
        "--controller-view",
        action="store_true",
        help="ask the active controller for its context (left out, with the reason, if it does not answer)",
    )
    e.add_argument("--min-insync-replicas", type=int, default=1, help="broker default (default: 1)")
    e.add_argument("--unclean-leader-election", action="store_true", help="broker default is true")
    e.add_argument("--overwrite", action="store_true", help="replace an existing snapshot directory")
    e.set_defaults(func=run_export)

    a = sub.add_parser("export-audit", help="copy the audit history to Parquet")
    a.add_argument("--audit-url", required=True, help="SQLAlchemy URL of the audit store")
    a.add_argument("--out", required=True, help="directory to create")
    a.set_defaults(func=run_export_audit)

    r = sub.add_parser("run", help="run the reconciliation job (Spark, local mode by default)")
    add_arguments(r)
    r.set_defaults(func=run_job)

    s = sub.add_parser("synth", help="generate a synthetic fleet snapshot and audit history")
    s.add_argument("--partitions", type=int, required=True)
    s.add_argument("--out", required=True, help="directory to create (snapshot/ and audit/ inside)")
    s.add_argument("--brokers", type=int, help="default: enough for 4,000 replicas per broker (min 6)")
    s.add_argument("--partitions-per-topic", type=int, default=50)
    s.add_argument(
        "--plant", action="append", default=[], metavar="KIND", help="plant a problem ('all' = each)"
    )
    s.add_argument("--seed", type=int, default=0)
    s.set_defaults(func=run_synth)

    pl = sub.add_parser("plan", help="check a remediation plan; optionally print a list as election JSON")
    pl.add_argument("file", help="remediation_plan.json")
    pl.add_argument("--election-json", metavar="LIST", help="preferred_election | online_transition | ...")
    pl.set_defaults(func=run_plan)

    sc = sub.add_parser("schema", help="print the snapshot's Parquet schema")
    sc.set_defaults(func=run_schema)


def run_export(args: argparse.Namespace) -> int:
    if args.min_insync_replicas < 1:
        raise InvalidArgumentError(f"--min-insync-replicas must be >= 1, got {args.min_insync_replicas}")
    with open_store(args) as store:
        if args.broker_views or args.controller_view:
            with open_admin_client(args, store) as client:
                brokers = admin_broker_source(client) if args.broker_views else None
                controller = admin_controller_source(client, args.timeout) if args.controller_view else None
                result = _export(export_snapshot, store, args, brokers, controller)
        else:
            result = _export(export_snapshot, store, args, None, None)
    print(
        json.dumps(
            {
                "snapshot": str(result.path),
                "snapshot_id": result.snapshot_id,
                "rows": result.rows,
                "skipped_topics": result.skipped_topics,
                "controller_view": result.controller_view,
                "controller_view_error": result.controller_view_error,
            },
            indent=1,
        )
    )
    return 0


def _export(export_snapshot: Any, store: Any, args: argparse.Namespace, brokers: Any, controller: Any) -> Any:
    return export_snapshot(
        store,
        args.out,
        broker_source=brokers,
        controller_source=controller,
        source=f"zookeeper:{args.zookeeper}",
        default_min_insync_replicas=args.min_insync_replicas,
        default_unclean_leader_election_enable=args.unclean_leader_election,
        overwrite=args.overwrite,
    )


def run_export_audit(args: argparse.Namespace) -> int:
    counts = export_audit_history(args.audit_url, args.out)
    print(json.dumps({"audit": args.out, "rows": counts}, indent=1))
    return 0


def run_job(args: argparse.Namespace) -> int:
    _drop_py4j_tracebacks()
    try:
        return run_from_args(args)
    except KeyboardInterrupt:
        _stop_own_jvms()  # interrupted while Spark started: nothing else would stop its JVM
        raise


def _stop_own_jvms() -> None:
    """Kill this process's Java children (Spark's driver JVM). pyspark starts it ignoring SIGINT and
    stops it through the gateway, which a Ctrl-C during start-up leaves unconnected: the JVM would
    outlive the command (and hold its output pipes)."""
    for pid in children_of(os.getpid()):
        with contextlib.suppress(OSError):
            if Path(os.readlink(f"/proc/{pid}/exe")).name == "java":
                os.kill(pid, signal.SIGKILL)


def _drop_py4j_tracebacks() -> None:
    """Ctrl-C during a Spark call makes py4j log tracebacks on the root logger (its socket read is
    interrupted, then pyspark's own SIGINT handler calls back into the JVM), and with no handler
    there Python prints them. The command ends in one line (``main``) and the job reports its own
    errors, so the root logger gets a handler that drops what nobody configured a place for."""
    root = logging.getLogger()
    if not root.handlers:
        root.addHandler(logging.NullHandler())


def run_synth(args: argparse.Namespace) -> int:
    # Imported on use: pyarrow is optional (the 'spark' extra).
    from kafka_controller.reconcile.synthetic import PLANTS, generate

    if args.partitions < 1:
        raise InvalidArgumentError(f"--partitions must be positive, got {args.partitions}")
    if args.partitions_per_topic < 1:
        raise InvalidArgumentError("--partitions-per-topic must be positive")
    plants = list(PLANTS) if "all" in args.plant else args.plant
    fleet = generate(
        args.out,
        args.partitions,
        brokers=args.brokers,
        partitions_per_topic=args.partitions_per_topic,
        plants=plants,
        seed=args.seed,
    )
    print(
        json.dumps(
            {
                "snapshot": str(fleet.snapshot),
                "audit": str(fleet.audit),
                "partitions": fleet.partitions,
                "brokers": fleet.brokers,
                "audit_rows": fleet.audit_rows,
                "planted_findings": len(fleet.expected),
            },
            indent=1,
        )
    )
    return 0


def run_plan(args: argparse.Namespace) -> int:
    plan = load_plan(args.file)
    if args.election_json:
        print(json.dumps(election_json(plan, args.election_json)))
    else:
        print(json.dumps({name: len(plan[name]) for name in PLAN_LISTS}))
    return 0


def run_schema(args: argparse.Namespace) -> int:
    print(describe_schema())
    return 0
