"""``kafka-controller zookeeper``: a real ZooKeeper server, or ensemble, in the foreground
(docs/external-contract.md §2.1).

For development, demos and tests. It prints one ``ready`` line with the connect string on stderr,
so scripts can wait for it, and stops the server (every server of an ``--servers N`` ensemble)
cleanly on SIGINT/SIGTERM (exit 0). A missing Java runtime or missing ZooKeeper jars is a set-up
problem: one line naming what is missing, exit 2.
"""

from __future__ import annotations

import argparse
import sys
import threading
from pathlib import Path
from typing import Any

from kafka_controller.cli import common
from kafka_controller.domain.errors import InvalidArgumentError
from kafka_controller.security.properties import read_properties
from kafka_controller.zk.embedded import EmbeddedZooKeeper
from kafka_controller.zk.ensemble import ZooKeeperEnsemble
from kafka_controller.zk.java import EmbeddedZooKeeperError, JavaNotFoundError, ZooKeeperJarsNotFoundError
from kafka_controller.zk.server_security import ZkServerSecurity

PROG = "kafka-controller zookeeper"


def register(subparsers: Any, summary: str) -> None:
    p = subparsers.add_parser(
        "zookeeper",
        help=summary,
        description=(
            "Run a real ZooKeeper server (a Java 17 process using the ZooKeeper jars "
            "shipped with pyspark, or $ZOOKEEPER_HOME) until SIGINT/SIGTERM; with --servers N, "
            "an ensemble of N such servers, one JVM each, with the connect string listing all."
        ),
    )
    p.add_argument(
        "--port",
        type=int,
        default=2181,
        help="client port on 127.0.0.1, then port+1... for an ensemble (0: any free ports)",
    )
    p.add_argument(
        "--servers",
        type=int,
        default=1,
        help="number of servers: 1, or an ensemble of 3 or 5 (default: %(default)s)",
    )
    p.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help=(
            "data directory (an ensemble: zk-<id> per server in it), kept on exit "
            "(default: a temporary directory removed on exit)"
        ),
    )
    p.add_argument("--java", default=None, help="java binary (default: $JAVA_HOME/bin/java, then PATH)")
    p.add_argument(
        "--jars-dir",
        default=None,
        help="folder holding the ZooKeeper jars (default: $ZOOKEEPER_HOME, then pyspark's jars)",
    )
    p.add_argument("--start-timeout", type=float, default=60.0, help="seconds to wait for the server")
    p.add_argument(
        "--jaas-config",
        type=Path,
        metavar="FILE",
        default=None,
        help="JAAS file whose Server section (org.apache.zookeeper.server.auth.DigestLoginModule "
        'required user_kafka="...";) lists the SASL DIGEST-MD5 logins the server accepts',
    )
    p.add_argument(
        "--require-sasl",
        action="store_true",
        help="refuse every client that has not authenticated with SASL (needs --jaas-config)",
    )
    p.add_argument(
        "--secure-port",
        type=int,
        default=None,
        metavar="PORT",
        help="also serve TLS on this client port on 127.0.0.1 (0: any free port; needs --tls-config-file)",
    )
    p.add_argument(
        "--tls-config-file",
        type=Path,
        metavar="FILE",
        default=None,
        help="properties file with ZooKeeper's server TLS keys (ssl.keyStore.location, "
        "ssl.keyStore.password, ssl.keyStore.type=PEM, ssl.trustStore.location, "
        "ssl.trustStore.type, ssl.clientAuth=need|want|none)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.servers not in (1, 3, 5):
        _say(f"error: --servers must be 1, 3 or 5, got {args.servers}")
        return 2
    try:
        security = _security(args)
    except InvalidArgumentError as e:
        _say(f"error: {e}")
        return 2
    if security.enabled and args.servers != 1:
        _say("error: --jaas-config, --require-sasl and --secure-port need --servers 1")
        return 2
    stop_requested = threading.Event()
    previous = common.install_stop_handlers(stop_requested)
    server: EmbeddedZooKeeper | ZooKeeperEnsemble | None = None
    try:
        if args.servers == 1:
            server = EmbeddedZooKeeper(
                port=args.port,
                data_dir=args.data_dir,
                java=args.java,
                jars_dir=args.jars_dir,
                security=security,
            )
        else:
            server = ZooKeeperEnsemble(
                args.servers, args.port, args.data_dir, java=args.java, jars_dir=args.jars_dir
            )
        server.start(timeout=args.start_timeout)
        secure = getattr(server, "secure_connect_string", None)
        tls = f", TLS on {secure}" if secure else ""
        _say(f"ready on {server.connect_string}{tls} ({_describe(server)}, data dir {server.data_dir})")
        while not stop_requested.wait(0.5):
            if not server.is_running():
                _say(f"error: ZooKeeper exited unexpectedly; see {_logs(server)}")
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


def _security(args: argparse.Namespace) -> Any:
    """The server's SASL and TLS settings from the command line (secrets stay in the files)."""
    if args.tls_config_file is not None and args.secure_port is None:
        raise InvalidArgumentError("--tls-config-file needs --secure-port")
    tls = (
        read_properties(str(args.tls_config_file), "ZooKeeper TLS config file")
        if args.tls_config_file is not None
        else {}
    )
    if args.secure_port is not None and not tls:
        raise InvalidArgumentError("--secure-port needs --tls-config-file")
    return ZkServerSecurity(
        jaas_config_file=args.jaas_config,
        require_sasl=args.require_sasl,
        secure_port=args.secure_port,
        tls=tls,
    )


def _describe(server: object) -> str:
    if isinstance(server, ZooKeeperEnsemble):
        pids = ", ".join(f"server {m.server_id} pid {m.pid}" for m in server.members)
        return f"{len(server.members)} servers: {pids}"
    return f"pid {getattr(server, 'pid', None)}"


def _logs(server: object) -> str:
    if isinstance(server, ZooKeeperEnsemble):
        return ", ".join(str(m.log_path) for m in server.members if not m.is_running())
    return str(getattr(server, "log_path", "?"))


def _say(message: str) -> None:
    print(f"{PROG}: {message}", file=sys.stderr, flush=True)
