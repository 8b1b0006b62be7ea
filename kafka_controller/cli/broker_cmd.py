"""``kafka-controller broker``: one broker of a cluster, in the foreground
(docs/external-contract.md §2.2).

It registers ``/brokers/ids/N``, runs a controller candidate, serves controller, broker and admin
requests on its listener, and simulates its replicas' logs. Logs go to stderr; one line
``kafka-controller broker: broker N ready on HOST:PORT (broker epoch E)`` says it is serving.
SIGTERM or SIGINT: controlled shutdown, deregistration, exit 0. A bad ``--config`` (unknown key,
bad value, no ``=``) or a bad ``--listener`` is refused before anything starts: one line, exit 2.
A start-up failure (ZooKeeper unreachable, port taken): one line, exit 1.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
from typing import Any

from kafka_controller import heap
from kafka_controller.broker.config import BrokerConfig, parse_assignments
from kafka_controller.cli import common
from kafka_controller.domain.errors import InvalidArgumentError, KafkaControllerError
from kafka_controller.security.properties import read_properties

PROG = "kafka-controller broker"


def register(subparsers: Any, summary: str) -> None:
    p = subparsers.add_parser(
        "broker",
        help=summary,
        description=(
            "Run one broker of a Kafka 2.8 ZooKeeper-mode cluster: it registers /brokers/ids/N, takes part "
            "in controller election and serves LeaderAndIsr, UpdateMetadata, StopReplica, fetch and admin "
            "requests on its listener. Its data plane is simulated (log-end offsets and high watermarks, no "
            "messages). SIGTERM/SIGINT: controlled shutdown, then exit 0."
        ),
        epilog=(
            "Simulation keys for --config: sim.produce.rate.per.sec (100), sim.fetch.interval.ms (200), "
            "sim.alter.isr.retry.backoff.ms (200). Listeners and TLS as Kafka names them: listeners, "
            "advertised.listeners, listener.security.protocol.map, inter.broker.listener.name, "
            "control.plane.listener.name, ssl.keystore.type=PEM, ssl.keystore.location, ssl.key.password, "
            "ssl.truststore.type=PEM, ssl.truststore.location, ssl.client.auth, "
            "ssl.principal.mapping.rules, and listener.name.<name>.ssl.* per listener."
        ),
    )
    p.add_argument("--broker-id", type=int, required=True, help="this broker's id (>= 0)")
    common.add_zookeeper_option(p, timeout=False)
    p.add_argument(
        "--listener",
        default=None,
        metavar="HOST:PORT",
        help="where to listen, shorthand for --config listeners=PLAINTEXT://HOST:PORT (port 0: any free "
        "port; default 127.0.0.1:0); not with the listeners setting",
    )
    p.add_argument("--rack", default=None, help="broker.rack")
    p.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Kafka broker setting or a sim.* setting; repeat once per setting",
    )
    p.add_argument(
        "--config-file",
        default=None,
        metavar="FILE",
        help="Kafka's server.properties: KEY=VALUE lines (# and ! comments); a --config setting wins. "
        "Put secrets (ssl.key.password, sasl.jaas.config) here in a mode-0600 file: a command line "
        "is readable by every local user",
    )
    p.add_argument("--audit-url", default=None, metavar="SQLALCHEMY_URL", help="audit every transition here")
    p.add_argument(
        "--audit-spool-dir", default=None, help="local spool of the audit writer (default: in $TMPDIR)"
    )
    p.add_argument(
        "--data-dir",
        default=None,
        help="where the broker records its ZooKeeper session (mode 0600) for `kafka-controller "
        "close-session` after a crash (default: not recorded)",
    )
    p.add_argument("--metrics-port", type=int, default=None, help="serve Prometheus metrics on this port")
    p.add_argument("--metrics-host", default="127.0.0.1", help="host of the metrics endpoint")
    p.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    p.set_defaults(func=run)


def parse_listener(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise InvalidArgumentError(f"invalid --listener {text!r}: expected HOST:PORT with a port 0-65535")
    return host.strip("[]") or "0.0.0.0", int(port)


def read_server_properties(path: str) -> dict[str, str]:
    """A broker's ``--config-file`` (Kafka's ``server.properties`` form); a line that is not a
    setting is an error naming its number, never its text (it may hold a password)."""
    return read_properties(path, "--config-file", strict=True)


def run(args: argparse.Namespace) -> int:
    try:
        # Imported on use: cryptography loads only when used (start-up time).
        from kafka_controller.security.listeners import BrokerListeners

        settings = read_server_properties(args.config_file) if args.config_file else {}
        config = BrokerConfig.of(args.broker_id, {**settings, **parse_assignments(args.config)})
        listener = None if args.listener is None else parse_listener(args.listener)
        BrokerListeners.of(config.kafka.security_originals(), listener).check()
        if args.metrics_port is not None and not 0 <= args.metrics_port <= 65535:
            raise InvalidArgumentError(f"invalid --metrics-port {args.metrics_port}: expected 0-65535")
    except InvalidArgumentError as e:
        _say(f"error: {e}")
        return 2

    heap.limit_malloc_arenas()  # before any thread: the controller's peak memory (``heap``)
    logging.basicConfig(
        level=getattr(logging, args.log_level),
        stream=sys.stderr,
        format=f"%(asctime)s %(levelname)s [broker {args.broker_id}] %(name)s: %(message)s",
    )
    logging.getLogger("kazoo").setLevel(max(logging.WARNING, logging.getLogger().level))

    # Imported on use: cryptography loads only when used (start-up time).
    from kafka_controller.broker.server import BrokerServer

    server = BrokerServer(
        config,
        args.zookeeper,
        listener=listener,
        rack=args.rack,
        audit_url=args.audit_url,
        audit_spool_dir=args.audit_spool_dir,
        metrics_port=args.metrics_port,
        metrics_host=args.metrics_host,
        data_dir=args.data_dir,
    )
    previous = common.install_stop_handlers(server.shutdown_requested)
    try:
        try:
            server.startup()
        except InvalidArgumentError as e:
            _say(f"error: {e}")
            return 2
        except (KafkaControllerError, OSError) as e:
            _say(f"error: cannot start broker {args.broker_id}: {e}")
            return 1
        _say(
            f"broker {args.broker_id} ready on {server.broker_info.endpoints[0].host}:{server.port} "  # type: ignore[union-attr]
            f"(broker epoch {server.broker_epoch})"
        )
        while not server.shutdown_requested.wait(0.5):
            pass
        _say(f"broker {args.broker_id} shutting down")
        clean = server.shutdown()
        _say(f"broker {args.broker_id} stopped ({'controlled' if clean else 'controlled shutdown failed'})")
        _exit_without_teardown()
        return 0
    finally:
        common.restore_handlers(previous)


def _exit_without_teardown() -> None:
    """End the process now that everything is stopped, flushed and deregistered.

    Interpreter teardown frees the state of every replica object by object, joins leftover
    threads and finalises modules: for a broker of 10,000 replicas that is a tenth of a second or
    more between deregistration and exit, for nothing. Only in a process's main thread; the broker
    command is a process (tests embed ``BrokerServer``, never this function)."""
    if threading.current_thread() is not threading.main_thread():
        return
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _say(message: str) -> None:
    print(f"{PROG}: {message}", file=sys.stderr, flush=True)
