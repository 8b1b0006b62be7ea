"""The CLI's Kafka admin client: kafka-python's ``KafkaAdminClient`` over Kafka's protocol, so the
commands built on it work against this project's brokers and against Apache Kafka alike.

It bootstraps from ``--bootstrap-server`` or, without it, from the listeners of the brokers
registered in ZooKeeper (``/brokers/ids``). Every client error becomes one line naming what failed.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from kafka_controller.broker.kafka_admin import client_id, describe_kafka_error
from kafka_controller.cli import common, connections

CLIENT_ID = "kafka-controller-ops"


def add_connection_options(p: argparse.ArgumentParser) -> None:
    """``--bootstrap-server``, and ``--zookeeper`` to find the brokers without it, and ``--timeout``."""
    p.add_argument(
        "--bootstrap-server",
        metavar="HOST:PORT[,HOST:PORT]",
        help="brokers to reach over Kafka's protocol (default: the brokers registered in ZooKeeper)",
    )
    p.add_argument(
        "--zookeeper",
        dest="zk_connect",
        metavar="CONNECT",
        help=f"ZooKeeper connect string to find the brokers in when --bootstrap-server is not given "
        f"(default: ${common.ZOOKEEPER_ENV})",
    )
    common.add_command_config_option(p)
    common.add_zk_tls_option(p)
    p.add_argument(
        "--timeout",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="how long to wait for the brokers and the request (default: %(default)s)",
    )


def bootstrap_servers(args: argparse.Namespace, listener_name: str = "PLAINTEXT") -> list[str]:
    if args.bootstrap_server:
        servers = [s.strip() for s in args.bootstrap_server.split(",") if s.strip()]
        if not servers or not all(map(_host_and_port, servers)):
            raise common.UsageError(
                f"bad --bootstrap-server {args.bootstrap_server!r}: expected HOST:PORT[,HOST:PORT]"
            )
        return servers
    args.zookeeper = args.zk_connect
    common.resolve_zookeeper(args)
    with connections.open_store(args) as store:
        brokers = sorted(store.get_all_brokers_and_epochs(), key=lambda b: b.id)
    servers = [ep.connection_string() for b in brokers if (ep := b.endpoint(listener_name)) is not None]
    if not servers:
        raise common.CommandFailedError(f"no broker is registered at {args.zookeeper}: nothing to connect to")
    return servers


def _host_and_port(server: str) -> bool:
    """``HOST:PORT`` with a host and a port in 1-65535 (``[::1]:9092`` for IPv6): kafka-python
    raises a bare ValueError for an empty or non-numeric port."""
    host, _, port = server.rpartition(":")
    return bool(host.strip("[]")) and port.isascii() and port.isdigit() and 0 < int(port) <= 65535


@contextmanager
def kafka_admin(args: argparse.Namespace, *, answer_margin_s: float = 0.0) -> Iterator[Any]:
    """A connected ``KafkaAdminClient`` (closed on exit); connection failures are one line. Its
    request timeout is ``--timeout`` plus ``answer_margin_s``: a request that itself carries
    ``--timeout`` as timeout_ms is answered when that runs out, and the answer must still arrive."""
    from kafka.admin import KafkaAdminClient
    from kafka.errors import KafkaError

    security = connections.client_security(args)  # a bad file is named before anything is reached
    servers = bootstrap_servers(args, security.listener_name)
    timeout_ms = max(1000, round(common.check_timeout(args) * 1000))
    try:
        admin = KafkaAdminClient(
            bootstrap_servers=servers,
            client_id=client_id(common.operation_id(args)),  # the broker links the change to it
            request_timeout_ms=timeout_ms + round(answer_margin_s * 1000),
            bootstrap_timeout_ms=timeout_ms,
            **security.kafka_python(),
        )
    except KafkaError as e:
        raise common.CommandFailedError(
            f"cannot reach a Kafka broker at {','.join(servers)}: {describe_error(e)}"
        ) from None
    try:
        yield admin
    finally:
        admin.close()


def describe_error(e: BaseException) -> str:
    """One line with Kafka's error name from a kafka-python error (``broker.kafka_admin``)."""
    return describe_kafka_error(e)


def send_to_any_broker(admin: Any, request: Any, process: Any) -> Any:
    """``process([response])`` of ``request`` sent to any broker, with kafka-python's own request
    classes and manager. Its public config calls refuse the cluster-default broker entity (resource
    name ``""``: "Broker resource names must be an integer"), which Kafka sends to any broker."""

    async def call() -> Any:
        return process([await admin._manager.send(request)])

    return admin._manager.run(call)
