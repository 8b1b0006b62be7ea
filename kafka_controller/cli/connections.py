"""The admin subcommands' connections: a read-mostly ZooKeeper session, the controller's admin client
and Kafka's admin APIs, with the ``--command-config`` and ``--zk-tls-config-file`` security they use.

Apart from ``common`` because these modules cost ``kafka-controller --help`` (which imports
``common``) more than its own start-up; a subcommand that connects imports them when it is run. The
connection never creates paths unless asked (no chroot, no top-level znodes), so a refused command
leaves ZooKeeper exactly as it was.
"""

from __future__ import annotations

import argparse
import logging
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from kafka_controller.broker.admin_client import AdminClient
from kafka_controller.broker.kafka_admin import KafkaAdmin
from kafka_controller.cli.common import UsageError, check_timeout, resolve_zookeeper
from kafka_controller.domain.errors import InvalidArgumentError
from kafka_controller.security.client_config import PLAINTEXT, ClientSecurity, read_command_config
from kafka_controller.zk.client_security import client_settings
from kafka_controller.zk.security import ZkClientConfig

if TYPE_CHECKING:
    from kafka_controller.zk.store import ZkMetadataStore


def client_security(args: argparse.Namespace) -> ClientSecurity:
    """The command's ``--command-config``, read once (PLAINTEXT without one); a bad file is a
    ``UsageError`` naming the key."""
    cached = getattr(args, "_client_security", None)
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    path = getattr(args, "command_config", None)
    try:
        security = PLAINTEXT if path is None else read_command_config(path)
    except InvalidArgumentError as e:
        raise UsageError(str(e)) from None
    args._client_security = security
    return security


def quiet_kazoo() -> None:
    """kazoo logs every failed connection attempt; a CLI reports one line instead."""
    for name in ("kazoo", "kazoo.client", "kazoo.protocol.connection"):
        logger = logging.getLogger(name)
        if logger.level == logging.NOTSET:
            logger.setLevel(logging.CRITICAL)


class NoClusterError(UsageError):
    """The chroot (or the server's root) holds no Kafka metadata: most likely a wrong chroot."""

    def __init__(self, connect: str) -> None:
        super().__init__(f"no Kafka cluster at {connect}: {BROKER_IDS} is missing")


BROKER_IDS = "/brokers/ids"


def client_config(args: argparse.Namespace, *, create_paths: bool = False) -> ZkClientConfig:
    """The command's ZooKeeper client settings: connecting waits up to ``--timeout`` (and a failure
    says how long it waited); the session lasts ``--timeout`` too, within ZooKeeper's usual 6-30 s.
    SASL comes from ``$KAFKA_OPTS``' JAAS file and TLS from ``--zk-tls-config-file``, as for
    Kafka's own tools."""
    timeout_ms = max(100, round(check_timeout(args) * 1000))
    connect = resolve_zookeeper(args)
    try:
        security = client_settings(tls_file=getattr(args, "zk_tls_config_file", None), tool=True)
        return ZkClientConfig(
            connect,
            session_timeout_ms=max(6000, min(timeout_ms, 30000)),
            connection_timeout_ms=timeout_ms,
            create_paths=create_paths,
            **security,
        )
    except InvalidArgumentError as e:  # a bad TLS file or JAAS file: nothing was tried yet
        raise UsageError(str(e)) from None


@contextmanager
def open_store(
    args: argparse.Namespace, *, require_cluster: bool = True, create_paths: bool = False
) -> Iterator[ZkMetadataStore]:
    """A ZooKeeper session for the command (closed on exit). It creates no paths unless
    ``create_paths`` (then the chroot and Kafka's top-level paths, as a broker does). With
    ``require_cluster`` a tree without ``/brokers/ids`` (every Kafka broker creates it) is a
    ``NoClusterError``: a read or an operation there would only ever see an empty cluster."""
    # Imported on use: kazoo is optional (the 'zk' extra).
    from kafka_controller.zk.kazoo_backend import KazooMetadataStore

    config = client_config(args, create_paths=create_paths)
    connect = config.connect_string
    quiet_kazoo()
    with warnings.catch_warnings():
        # kazoo warns when the chroot does not exist; the check below says it in one line instead
        warnings.filterwarnings("ignore", message="No chroot path exists", category=UserWarning)
        store = KazooMetadataStore(config)
    try:
        if require_cluster and not cluster_exists(store):
            raise NoClusterError(connect)
        yield store
    finally:
        store.close()


def cluster_exists(store: ZkMetadataStore) -> bool:
    """Whether a Kafka broker ever ran on this tree: ``/brokers/ids`` exists."""
    return store.path_exists(BROKER_IDS)


@contextmanager
def open_admin_client(args: argparse.Namespace, store: ZkMetadataStore) -> Iterator[AdminClient]:
    """A client for the controller's admin APIs, found through ``store``."""
    security = client_security(args)
    client = AdminClient(
        store,
        timeout_s=check_timeout(args),
        listener_name=security.listener_name,
        ssl_context=security.ssl_context(),
        authenticate=security.authenticate(),
    )
    try:
        yield client
    finally:
        client.close()


@contextmanager
def open_kafka_admin(args: argparse.Namespace, store: ZkMetadataStore) -> Iterator[KafkaAdmin]:
    """Kafka's admin APIs through a Kafka client (kafka-python), bootstrapped from
    ``--bootstrap-server`` or the brokers registered in ZooKeeper."""
    client = KafkaAdmin(
        getattr(args, "bootstrap_server", None),
        store,
        timeout_s=check_timeout(args),
        security=client_security(args),
    )
    try:
        yield client
    finally:
        client.close()
