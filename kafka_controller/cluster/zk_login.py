"""ZooKeeper authentication for a secured local cluster: a ``kafka`` DIGEST-MD5 login, as Kafka's
docs set a secured ZooKeeper up (``docs/security.html``, "ZooKeeper Authentication").

A secured cluster's brokers keep their users' SCRAM credentials in ``/config/users`` and their whole
state in ZooKeeper; a ZooKeeper anyone on the host can read and write would undo the listeners'
TLS, SASL and ACLs (rewrite ``/brokers/topics``, read the credentials). So the embedded server
requires a SASL login, the brokers create znodes with Kafka's ``zookeeper.set.acl=true`` ACLs
(``ZkData.defaultAcls``: the creator only under ``/config/users``, world-readable elsewhere), and
everything of this cluster logs in as the one ZooKeeper user ``kafka``:

* the embedded server gets the ``Server`` JAAS section (``zk.server_security``);
* each broker gets a ``Client`` JAAS file, mode 0600 in its data directory, named in its
  ``KAFKA_OPTS`` (``-Djava.security.auth.login.config=FILE``) exactly as a Java broker would: the
  password never reaches a command line, and a broker restarted from its saved command line and
  environment (Airflow's ``local`` lifecycle) logs in again;
* the CLI and Airflow get the same kind of file, ``zookeeper-client.jaas`` in the data directory
  (``KAFKA_OPTS`` for the CLI, the cluster connection's ``zk_jaas_config_file`` for Airflow).
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafka_controller.zk.client_security import (
    DIGEST_LOGIN_MODULE,
    JAAS_CONFIG_PROPERTY,
    KAFKA_OPTS_ENV,
    ZK_SET_ACL,
)
from kafka_controller.zk.server_security import ZkServerSecurity, write_private

#: The ZooKeeper user every process of a secured local cluster logs in as.
ZK_USER = "kafka"
#: The JAAS file for the CLI and Airflow, in the cluster's data directory.
CLIENT_JAAS_FILE = "zookeeper-client.jaas"
#: Each broker's JAAS file, in its data directory.
BROKER_JAAS_FILE = "zookeeper.jaas"


def render_client_jaas(username: str, password: str) -> str:
    """A JAAS file whose ``Client`` section is ZooKeeper's DIGEST-MD5 login."""
    quoted = password.replace("\\", "\\\\").replace('"', '\\"')
    return f'Client {{\n  {DIGEST_LOGIN_MODULE} required username="{username}" password="{quoted}";\n}};\n'


def kafka_opts(jaas_file: Path) -> str:
    """The ``KAFKA_OPTS`` value that names ``jaas_file`` (quoted for a path with spaces)."""
    return f"-D{JAAS_CONFIG_PROPERTY}={shlex.quote(str(jaas_file))}"


@dataclass(frozen=True)
class ClusterZkLogin:
    """The ``kafka`` ZooKeeper login of one secured local cluster (``password`` never logged)."""

    data_dir: Path
    password: str = field(repr=False)

    @staticmethod
    def new(data_dir: Path) -> ClusterZkLogin:
        # Imported on use: cryptography loads only when used (start-up time).
        from kafka_controller.security.certs import new_password

        login = ClusterZkLogin(data_dir, new_password())
        write_private(login.client_jaas, render_client_jaas(ZK_USER, login.password))
        return login

    @property
    def client_jaas(self) -> Path:
        return self.data_dir / CLIENT_JAAS_FILE

    @property
    def client_kafka_opts(self) -> str:
        """What the CLI needs: ``KAFKA_OPTS=<this> kafka-controller ... --zookeeper ...``."""
        return kafka_opts(self.client_jaas)

    def server_security(self) -> ZkServerSecurity:
        """The embedded server: the ``kafka`` user, and no session without a SASL login."""
        return ZkServerSecurity(sasl_users={ZK_USER: self.password}, require_sasl=True)

    def client_settings(self) -> dict[str, Any]:
        """``ZkClientConfig`` keyword arguments for this cluster's own clients."""
        return {"sasl": (ZK_USER, self.password), "set_acl": True}

    @staticmethod
    def broker_settings() -> dict[str, str]:
        """The broker setting that makes it create znodes with Kafka's ACLs."""
        return {ZK_SET_ACL: "true"}

    def broker_environment(
        self, broker_data_dir: Path, base: Mapping[str, str] | None = None
    ) -> dict[str, str]:
        """The broker's environment: ``base`` (this process's) with ``KAFKA_OPTS`` naming the broker's
        own JAAS file, written (mode 0600) into its data directory. Any ``KAFKA_OPTS`` of the caller
        is replaced: its JAAS file, if any, would be another ZooKeeper's login."""
        jaas = write_private(broker_data_dir / BROKER_JAAS_FILE, render_client_jaas(ZK_USER, self.password))
        env = dict(os.environ if base is None else base)
        env[KAFKA_OPTS_ENV] = kafka_opts(jaas)
        return env
