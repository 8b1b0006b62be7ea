"""Security tests: a private CA with a broker and a client certificate, and in-process brokers."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kafka_controller.broker.config import BrokerConfig
from kafka_controller.broker.server import BrokerServer
from kafka_controller.dryrun.memory_store import InMemoryMetadataStore
from kafka_controller.dryrun.memory_zk import InMemoryZooKeeper
from kafka_controller.security import certs
from tests.broker.helpers import wait_until


@dataclass(frozen=True)
class Pki:
    """PEM files: the CA (truststore), the brokers' keystore and password, one client's files."""

    directory: Path
    truststore: Path
    keystore: Path
    key_password: str
    client_cert: Path
    client_key: Path
    stranger_cert: Path  # signed by another CA
    stranger_key: Path

    def broker_tls(self, **extra: str) -> dict[str, str]:
        """Kafka's settings for an SSL listener with these files."""
        return {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(self.keystore),
            "ssl.key.password": self.key_password,
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.truststore),
            **extra,
        }


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    directory = tmp_path_factory.mktemp("pki")
    ca = certs.make_ca("test CA", organization="kafka-controller tests")
    broker = certs.issue(ca, "broker", organization="kafka-controller")
    password = certs.new_password()
    keystore = certs.write_keystore(directory / "broker.keystore.pem", broker, ca, password)
    truststore = certs.write_truststore(directory / "ca.pem", ca)
    client_cert, client_key = certs.write_client_files(
        directory, "client", certs.issue(ca, "client", organization="org")
    )
    other_ca = certs.make_ca("another CA")
    stranger_cert, stranger_key = certs.write_client_files(
        directory, "stranger", certs.issue(other_ca, "stranger", organization="org")
    )
    return Pki(
        directory, truststore, keystore, password, client_cert, client_key, stranger_cert, stranger_key
    )


BASE_SETTINGS = {"auto.leader.rebalance.enable": "false", "sim.fetch.interval.ms": "50"}


@pytest.fixture
def start_broker() -> Iterator[Callable[..., BrokerServer]]:
    """``start_broker(broker_id, settings, tree=None, **server_kwargs)``: a started in-process
    broker on an in-memory ZooKeeper tree (a new one unless given), returned once the controller's
    UpdateMetadata has told it about itself; all are stopped afterwards.

    Until then its Metadata answers list no broker, as a Kafka broker's do before the controller's
    first UpdateMetadata; a confluent-kafka AdminClient told of no broker then waited past its
    30 s for a DescribeConfigs addressed to broker 1 (seen on a loaded CI machine): a client made
    at once races the controller's startup."""
    servers: list[BrokerServer] = []

    def start(
        broker_id: int, settings: dict[str, str], tree: InMemoryZooKeeper | None = None, **kwargs: Any
    ) -> BrokerServer:
        server = BrokerServer(
            BrokerConfig.of(broker_id, {**BASE_SETTINGS, **settings}),
            InMemoryMetadataStore(tree or InMemoryZooKeeper()),
            **kwargs,
        )
        servers.append(server)
        server.startup()
        wait_until(
            lambda: server.metadata_cache.get_alive_broker(broker_id) is not None,
            f"broker {broker_id} in its own metadata cache",
        )
        return server

    yield start
    for server in servers:
        server.crash()
