"""``kafka-controller cluster up``: an embedded ZooKeeper and N brokers in one command, for demos.

It prints the connect string, each broker's listener, pid, log and metrics endpoint, and where the
brokers audit (or that nothing is audited), then runs in the foreground until SIGINT/SIGTERM; then
it stops the brokers one at a time with a controlled shutdown (the active controller last), and
ZooKeeper. Every ``--config`` is checked before anything starts.

``--security ssl`` makes a private CA in DATA_DIR/tls and gives every broker one SSL listener that
requires a client certificate (the brokers' own connections too); it prints a librdkafka client
properties file (``kcat -F FILE``), and ``--json`` adds ``bootstrap_servers`` and ``client_config``
for ``AdminClient({"bootstrap.servers": ..., **client_config})``.

``--security sasl_ssl`` (or ``sasl_plaintext``, without TLS) gives every broker one SASL listener
with SCRAM-SHA-512 and Kafka's ACL authorizer on: a super user ``admin`` and an inter-broker user
``broker`` with random passwords (credentials in ZooKeeper's ``/config/users``), and the super
user's client properties in DATA_DIR/client.properties (mode 0600), which both ``kcat -F FILE`` and
this package's ``--command-config FILE`` read.

Every mode but plaintext also secures the embedded ZooKeeper (one server; an ensemble stays open):
it requires a SASL DIGEST-MD5 login as the user ``kafka`` (random password) and the brokers set
Kafka's ZooKeeper ACLs (``zookeeper.set.acl=true``: the credentials under ``/config/users`` are
readable by that user only, other znodes by anyone but writable only by it). The login is in
DATA_DIR/zookeeper-client.jaas (mode 0600): commands with ``--zookeeper`` read it through
``KAFKA_OPTS=-Djava.security.auth.login.config=FILE``, as Kafka's tools do, and an Airflow cluster
connection through its ``zk_jaas_config_file`` extra; ``--json`` adds ``zookeeper_jaas_config`` and
``zookeeper_kafka_opts``.

While it runs, ``cluster stop-broker N``, ``start-broker N``, ``restart-broker N`` and ``status``
(from another terminal) act on its brokers through its control socket (found by ``--data-dir``, or
as the only ``cluster up`` of this user running).
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kafka_controller.broker.config import BrokerConfig, parse_assignments
from kafka_controller.cli import cluster_control, common
from kafka_controller.cluster.control import ControlServer
from kafka_controller.cluster.local import LocalCluster
from kafka_controller.domain.errors import InvalidArgumentError

PROG = "kafka-controller cluster"


def register(subparsers: Any, summary: str) -> None:
    p = subparsers.add_parser("cluster", help=summary)
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
    up.add_argument(
        "--listener-port",
        type=int,
        metavar="BASE",
        help="broker i listens on port BASE+i (i = 0 for the first broker; default: a free port each)",
    )
    up.add_argument(
        "--metrics-port",
        type=int,
        metavar="BASE",
        help="serve each broker's Prometheus metrics on BASE+i (i = 0 for the first broker)",
    )
    up.add_argument(
        "--security",
        choices=["plaintext", "ssl", "sasl_plaintext", "sasl_ssl"],
        default="plaintext",
        help="plaintext (default, loopback); ssl: a private CA in DATA_DIR/tls, each broker's only "
        "listener SSL with client certificates required, and a client certificate for you; "
        "sasl_ssl/sasl_plaintext: SCRAM-SHA-512 logins (TLS from that CA for sasl_ssl), the ACL "
        "authorizer on, and a super user whose password is in the printed client properties file; "
        "every mode but plaintext also makes ZooKeeper require a SASL login (printed: the "
        "KAFKA_OPTS for --zookeeper commands) and the brokers set Kafka's ZooKeeper ACLs",
    )
    up.add_argument("--start-timeout", type=float, default=90.0, help="seconds to wait for the cluster")
    up.add_argument(
        "--json", action="store_true", help="print where everything is as one JSON line on stdout"
    )
    up.set_defaults(func=run_up)
    cluster_control.register(sub)


def run_up(args: argparse.Namespace) -> int:
    config = parse_assignments(args.config)
    BrokerConfig.of(max(0, args.first_broker_id), config)  # refuse bad settings before starting anything
    if not 0 <= args.port <= 65535:
        raise InvalidArgumentError(f"--port must be between 0 and 65535, got {args.port}")
    if args.zookeeper_servers not in (1, 3, 5):
        raise InvalidArgumentError(f"--zookeeper-servers must be 1, 3 or 5, got {args.zookeeper_servers}")
    if args.data_dir is not None and args.data_dir.exists() and not args.data_dir.is_dir():
        raise InvalidArgumentError(f"--data-dir {args.data_dir} exists and is not a directory")
    _check_ports("--listener-port", args.listener_port, args.first_broker_id, args.brokers)
    _check_ports("--metrics-port", args.metrics_port, args.first_broker_id, args.brokers)
    _check_disjoint(args.listener_port, args.metrics_port, args.brokers)
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
        metrics_port=args.metrics_port,
        listener_port=args.listener_port,
        security=args.security,
    )
    stop = threading.Event()
    previous = common.install_stop_handlers(stop)
    cleanup: list[Callable[[], None]] = []
    try:
        control = ControlServer(cluster.data_dir)  # first: a control socket that cannot be made stops us
        cleanup.append(control.close)
        cluster.start(timeout=args.start_timeout)
        controller, epoch = cluster.controller()
        info = {**cluster.info(), "controller": controller, "controller_epoch": epoch}
        info["audit_url"] = _redacted(cluster.audit_url)
        info["control_socket"] = str(control.path)
        info["bootstrap_servers"] = ",".join(cluster.listener(b) for b in cluster.broker_ids)
        info["client_config"] = (
            cluster.client_security().librdkafka() if cluster.security != "plaintext" else {}
        )
        properties = cluster.client_properties
        if properties is None and cluster.tls is not None:
            properties = cluster.tls.write_client_properties()
        if properties is not None:
            info["client_properties"] = str(properties)
        zk_opts = ""
        if cluster.zk_login is not None:
            info["zookeeper_jaas_config"] = str(cluster.zk_login.client_jaas)
            info["zookeeper_kafka_opts"] = cluster.zk_login.client_kafka_opts
            zk_opts = f"KAFKA_OPTS={shlex.quote(cluster.zk_login.client_kafka_opts)} "
        if args.json:
            common.print_json(info, one_line=True)
            _say(_audit_line(cluster))
        else:
            common.say(f"ZooKeeper: {cluster.connect_string} (data dir {cluster.data_dir})")
            for b in info["brokers"]:
                metrics = f", metrics {b['metrics']}" if b["metrics"] else ""
                common.say(f"broker {b['id']}: {b['listener']} (pid {b['pid']}, log {b['log']}{metrics})")
            common.say(f"controller: broker {controller} (epoch {epoch})")
            if properties is not None:
                common.say(
                    f"{cluster.security.upper()}: client properties {properties} "
                    f"(kcat -F {properties} -b BROKER -L; kafka-controller ... --command-config {properties})"
                )
            if cluster.zk_login is None and cluster.security != "plaintext":
                common.say(
                    "warning: the ZooKeeper ensemble takes no login (only a single server is secured "
                    "here): anyone on this host can read and change the cluster's state in it"
                )
            if cluster.zk_login is not None:
                common.say(
                    f"ZooKeeper SASL login (user kafka): {zk_opts}kafka-controller ... --zookeeper "
                    f"{cluster.connect_string}; Airflow: zk_jaas_config_file {cluster.zk_login.client_jaas}"
                )
            common.say(_audit_line(cluster))
            common.say(f"try: {zk_opts}kafka-controller describe --zookeeper {cluster.connect_string}")
        _say(f"ready; press Ctrl-C to stop (pid {os.getpid()}, control socket {control.path})")
        serve(cluster, control, stop)
        control.drain("cluster up is stopping")
        _say("stopping: controlled shutdown of each broker, the controller last")
        cluster.close(graceful=True)
        _say("stopped")
        return 0
    finally:
        for close in cleanup:
            close()
        cluster.close(graceful=False)
        common.restore_handlers(previous)


def _check_ports(option: str, base: int | None, first_id: int, brokers: int) -> None:
    """BASE .. BASE+brokers-1 must be ports, and free now (a broker that cannot bind its listener
    or metrics port would fail its start with a less direct message)."""
    import socket

    if base is None:
        return
    last = base + max(1, brokers) - 1
    if base < 1 or last > 65535:
        raise InvalidArgumentError(
            f"{option} {base}: ports {base}..{last} (one per broker) must lie in 1-65535"
        )
    for i, port in enumerate(range(base, last + 1)):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError as e:
                raise InvalidArgumentError(
                    f"{option} {base}: port {port} (broker {first_id + i}) cannot be used: {e.strerror or e}"
                ) from None


def _check_disjoint(listener: int | None, metrics: int | None, brokers: int) -> None:
    if listener is None or metrics is None:
        return
    n = max(1, brokers)
    if listener < metrics + n and metrics < listener + n:
        raise InvalidArgumentError(
            f"--listener-port {listener} and --metrics-port {metrics} overlap: each needs {n} port(s)"
        )


def _redacted(url: str | None) -> str | None:
    if not url:
        return None
    # Imported on use: SQLAlchemy is optional (the 'audit' extra).
    from kafka_controller.audit.engine import redacted

    return redacted(url)


def _audit_line(cluster: LocalCluster) -> str:
    if not cluster.audit_url:
        return "audit: not audited (no --audit-url)"
    spool = cluster.data_dir / "spool"
    return f"audit: every broker audits to {_redacted(cluster.audit_url)} (spools in {spool})"


def serve(cluster: LocalCluster, control: ControlServer, stop: threading.Event) -> None:
    """Until ``stop``: answer control requests (in this thread, which owns the brokers) and say when
    a broker exits that nobody asked to stop."""
    reported: set[int] = set()
    while not stop.is_set():
        request = control.next_request(0.5)
        if request is not None:
            cluster_control.handle(cluster, request, reported)
            if "message" in request.reply:
                _say(str(request.reply["message"]))
        for b, proc in cluster.processes.items():
            if b not in reported and not proc.is_running():
                _say(f"broker {b} exited with code {proc.returncode}; see {proc.log_path}")
                reported.add(b)


def _say(message: str) -> None:
    print(f"{PROG}: {message}", file=sys.stderr, flush=True)
