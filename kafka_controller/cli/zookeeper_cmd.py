"""``kafka-controller zookeeper``: a real single-node ZooKeeper server in the foreground (CONTRACT §2.1).

For development, demos and tests. It prints one ``ready`` line with the connect string on stderr,
so scripts can wait for it, and stops the server cleanly on SIGINT/SIGTERM (exit 0). A missing Java
runtime or missing ZooKeeper jars is a set-up problem: one line naming what is missing, exit 2.
"""

from __future__ import annotations

import argparse
import sys
import threading
from pathlib import Path
from typing import Any

from kafka_controller.cli import common

PROG = "kafka-controller zookeeper"


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "zookeeper",
        help="run a single-node ZooKeeper server in the foreground",
        description=(
            "Run a real single-node ZooKeeper server (a Java 17 process using the ZooKeeper jars "
            "shipped with pyspark, or $ZOOKEEPER_HOME) until SIGINT/SIGTERM."
        ),
    )
    p.add_argument("--port", type=int, default=2181, help="client port on 127.0.0.1 (0: any free port)")
    p.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="data directory, kept on exit (default: a temporary directory removed on exit)",
    )
    p.add_argument("--java", default=None, help="java binary (default: $JAVA_HOME/bin/java, then PATH)")
    p.add_argument(
        "--jars-dir",
        default=None,
        help="folder holding the ZooKeeper jars (default: $ZOOKEEPER_HOME, then pyspark's jars)",
    )
    p.add_argument("--start-timeout", type=float, default=60.0, help="seconds to wait for the server")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kafka_controller.domain.errors import InvalidArgumentError
    from kafka_controller.zk.embedded import (
        EmbeddedZooKeeper,
        EmbeddedZooKeeperError,
        JavaNotFoundError,
        ZooKeeperJarsNotFoundError,
    )

    stop_requested = threading.Event()
    previous = common.install_stop_handlers(stop_requested)
    server: EmbeddedZooKeeper | None = None
    try:
        server = EmbeddedZooKeeper(
            port=args.port, data_dir=args.data_dir, java=args.java, jars_dir=args.jars_dir
        )
        server.start(timeout=args.start_timeout)
        _say(f"ready on {server.connect_string} (pid {server.pid}, data dir {server.data_dir})")
        while not stop_requested.wait(0.5):
            if not server.is_running():
                _say(f"error: ZooKeeper exited unexpectedly; see {server.log_path}")
                return 1
        _say(f"stopping {server.connect_string}")
        return 0
    except (InvalidArgumentError, JavaNotFoundError, ZooKeeperJarsNotFoundError) as e:
        _say(f"error: {e}")
        return 2
    except EmbeddedZooKeeperError as e:
        _say(f"error: {e}")
        return 1
    finally:
        if server is not None:
            server.close()
        common.restore_handlers(previous)


def _say(message: str) -> None:
    print(f"{PROG}: {message}", file=sys.stderr, flush=True)
