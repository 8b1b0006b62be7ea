"""The addresses and process facts of a ``LocalCluster`` (split from ``local`` to keep it small).

A mixin: ``LocalCluster`` sets every attribute declared here in its ``__init__``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kafka_controller.cluster.waits import ClusterError
from kafka_controller.domain.errors import InvalidArgumentError

if TYPE_CHECKING:
    from kafka_controller.cluster.process import BrokerProcess
    from kafka_controller.zk.embedded import EmbeddedZooKeeper
    from kafka_controller.zk.ensemble import ZooKeeperEnsemble


class LocalClusterAddresses:
    broker_ids: tuple[int, ...]
    host: str
    chroot: str
    audit_url: str | None
    data_dir: Path
    external_zookeeper: str | None
    zk: EmbeddedZooKeeper | ZooKeeperEnsemble | None
    broker_hosts: dict[int, tuple[str, Sequence[str]]]
    metrics_base_port: int | None
    processes: dict[int, BrokerProcess]
    ports: dict[int, int]

    # -- addresses -----------------------------------------------------------------------------------
    @property
    def zookeeper_connect(self) -> str:
        """The servers' host:port list (no chroot)."""
        if self.external_zookeeper is not None:
            return self.external_zookeeper
        if self.zk is None:
            raise ClusterError("the cluster is not started")
        return self.zk.connect_string

    @property
    def connect_string(self) -> str:
        """What brokers and admin commands use: host:port plus the chroot."""
        return self.zookeeper_connect + self.chroot

    def metrics_url(self, broker_id: int) -> str | None:
        """Where broker ``broker_id`` serves Prometheus metrics (None without ``metrics_port``)."""
        port = self._metrics_port(broker_id)
        return None if port is None else f"http://{self.host}:{port}/metrics"

    def _metrics_port(self, broker_id: int) -> int | None:
        if self.metrics_base_port is None:
            return None
        return self.metrics_base_port + self.broker_ids.index(self._known(broker_id))

    def listener(self, broker_id: int) -> str:
        return f"{self.broker_host(broker_id)}:{self.ports[self._known(broker_id)]}"

    def broker_host(self, broker_id: int) -> str:
        return self.broker_hosts.get(broker_id, (self.host, ()))[0]

    def running_broker_ids(self) -> list[int]:
        return [b for b in self.broker_ids if b in self.processes and self.processes[b].is_running()]

    def _known(self, broker_id: int) -> int:
        if broker_id not in self.broker_ids:
            raise InvalidArgumentError(
                f"broker {broker_id} is not part of this cluster {list(self.broker_ids)}"
            )
        return broker_id

    def info(self) -> dict[str, Any]:
        """Addresses, pids and log files, for printing."""
        return {
            "zookeeper": self.connect_string,
            "data_dir": str(self.data_dir),
            "audit_url": self.audit_url,
            "brokers": [
                {
                    "id": b,
                    "listener": self.listener(b) if b in self.ports else None,
                    "pid": p.pid if (p := self.processes.get(b)) is not None and p.is_running() else None,
                    "log": str(self.data_dir / "logs" / f"broker-{b}.log"),
                    "metrics": self.metrics_url(b),
                }
                for b in self.broker_ids
            ],
        }
