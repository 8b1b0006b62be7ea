"""``kafka-controller cluster up``: an embedded ZooKeeper and N brokers in one command, for demos.

It prints the connect string and each broker's listener, pid and log, then runs in the foreground
until SIGINT/SIGTERM; then it stops the brokers one at a time with a controlled shutdown (the
active controller last), and ZooKeeper. Every ``--config`` is checked before anything starts.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
from pathlib import Path
from typing import Any

from kafka_controller.cli import common

PROG = "kafka-controller cluster"


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("cluster", help="run a whole local cluster (ZooKeeper + brokers)")
    sub = p.add_subparsers(dest="cluster_command", metavar="ACTION", required=True)
    up = sub.add_parser(
        "up",
        help="start ZooKeeper and N brokers; stop them on Ctrl-C",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    up.add_argument("--brokers", type=int, default=3, help="number of brokers (default: %(default)s)")
    up.add_argument(
        "--first-broker-id", type=int, default=1, help="id of the first broker (default: %(default)s)"
    )
    up.add_argument(
        "--port",
        type=int,
        default=2181,
        help="ZooKeeper client port (an ensemble: port, port+1...), 0 = any (default: %(default)s)",
    )
    up.add_argument(
        "--zookeeper-servers",
        type=int,
        default=1,
        help="ZooKeeper servers: 1, or an ensemble of 3 or 5, one JVM each (default: %(default)s)",
    )
    up.add_argument(
        "--data-dir",
        type=Path,
        help="ZooKeeper data, broker logs and audit spools, kept on exit (default: a temporary directory)",
    )
    up.add_argument("--audit-url", metavar="URL", help="SQLAlchemy URL every broker audits to")
    up.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="K=V",
        help="a broker setting for every broker, repeated per key (as for `kafka-controller broker`)",
    )
    up.add_argument("--start-timeout", type=float, default=90.0, help="seconds to wait for the cluster")
    up.add_argument(
        "--json", action="store_true", help="print where everything is as one JSON line on stdout"
    )
    up.set_defaults(func=run_up)


def run_up(args: argparse.Namespace) -> int:
    from kafka_controller.broker.config import BrokerConfig, parse_assignments
    from kafka_controller.cluster.local import LocalCluster
    from kafka_controller.domain.errors import InvalidArgumentError

    config = parse_assignments(args.config)
    BrokerConfig.of(max(0, args.first_broker_id), config)  # refuse bad settings before starting anything
    if not 0 <= args.port <= 65535:
        raise InvalidArgumentError(f"--port must be between 0 and 65535, got {args.port}")
    if args.zookeeper_servers not in (1, 3, 5):
        raise InvalidArgumentError(f"--zookeeper-servers must be 1, 3 or 5, got {args.zookeeper_servers}")
    if args.data_dir is not None and args.data_dir.exists() and not args.data_dir.is_dir():
        raise InvalidArgumentError(f"--data-dir {args.data_dir} exists and is not a directory")
    if args.data_dir is not None:
        args.data_dir.mkdir(parents=True, exist_ok=True)
    cluster = LocalCluster(
        args.brokers,
        first_broker_id=args.first_broker_id,
        zk_port=args.port,
        zk_servers=args.zookeeper_servers,
        data_dir=args.data_dir,
        audit_url=args.audit_url,
        broker_config=config,
    )
    stop = threading.Event()
    previous = common.install_stop_handlers(stop)
    try:
        cluster.start(timeout=args.start_timeout)
        controller, epoch = cluster.controller()
        info = cluster.info()
        if args.json:
            common.print_json({**info, "controller": controller, "controller_epoch": epoch}, one_line=True)
        else:
            common.say(f"ZooKeeper: {cluster.connect_string} (data dir {cluster.data_dir})")
            for b in info["brokers"]:
                common.say(f"broker {b['id']}: {b['listener']} (pid {b['pid']}, log {b['log']})")
            common.say(f"controller: broker {controller} (epoch {epoch})")
            common.say(f"try: kafka-controller describe --zookeeper {cluster.connect_string}")
        _say(f"ready; press Ctrl-C to stop (pid {os.getpid()})")
        reported: set[int] = set()
        while not stop.wait(0.5):
            for b, proc in cluster.processes.items():
                if b not in reported and not proc.is_running():
                    _say(f"broker {b} exited with code {proc.returncode}; see {proc.log_path}")
                    reported.add(b)
        _say("stopping: controlled shutdown of each broker, the controller last")
        cluster.close(graceful=True)
        _say("stopped")
        return 0
    finally:
        cluster.close(graceful=False)
        common.restore_handlers(previous)


def _say(message: str) -> None:
    print(f"{PROG}: {message}", file=sys.stderr, flush=True)
