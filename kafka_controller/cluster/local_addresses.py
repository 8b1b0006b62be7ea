"""Where the parts of a ``LocalCluster`` listen: ZooKeeper's connect string, each broker's listener
and metrics endpoint.

``ClusterAddresses`` is given the cluster's layout in its constructor and reads nothing else; the
broker ports (picked when a broker starts) and the ZooKeeper servers (started by ``start``) are read
at each call, so an address is always the current one.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from typing import TYPE_CHECKING

from kafka_controller.cluster.waits import ClusterError
from kafka_controller.domain.errors import InvalidArgumentError

if TYPE_CHECKING:
    from kafka_controller.zk.embedded import EmbeddedZooKeeper
    from kafka_controller.zk.ensemble import ZooKeeperEnsemble


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class ClusterAddresses:
    """``broker_ids``: the cluster's brokers; ``ports``: broker id -> listener port, chosen up front
    or by ``assign_listener`` as brokers start (the cluster's own dict, shared); ``broker_hosts``:
    brokers on other hosts (broker id -> (address, command prefix)); ``metrics_base_port``: broker i
    (0-based) serves metrics on this port plus i (None: no metrics); ``zookeeper``: the ZooKeeper
    servers the cluster started, None before ``start`` and when ``external_zookeeper`` is the
    connect string."""

    def __init__(
        self,
        broker_ids: tuple[int, ...],
        *,
        host: str,
        chroot: str,
        ports: MutableMapping[int, int],
        broker_hosts: Mapping[int, tuple[str, Sequence[str]]],
        metrics_base_port: int | None,
        external_zookeeper: str | None,
        zookeeper: Callable[[], EmbeddedZooKeeper | ZooKeeperEnsemble | None],
    ) -> None:
        self.broker_ids = broker_ids
        self._host = host
        self._chroot = chroot
        self._ports = ports
        self._broker_hosts = broker_hosts
        self._metrics_base_port = metrics_base_port
        self._external_zookeeper = external_zookeeper
        self._zookeeper = zookeeper

    @property
    def zookeeper_connect(self) -> str:
        """The servers' host:port list (no chroot)."""
        if self._external_zookeeper is not None:
            return self._external_zookeeper
        zk = self._zookeeper()
        if zk is None:
            raise ClusterError("the cluster is not started")
        return zk.connect_string

    @property
    def connect_string(self) -> str:
        """What brokers and admin commands use: host:port plus the chroot."""
        return self.zookeeper_connect + self._chroot

    def metrics_url(self, broker_id: int) -> str | None:
        """Where broker ``broker_id`` serves Prometheus metrics (None without ``metrics_port``)."""
        port = self.metrics_port(broker_id)
        return None if port is None else f"http://{self._host}:{port}/metrics"

    def metrics_port(self, broker_id: int) -> int | None:
        if self._metrics_base_port is None:
            return None
        return self._metrics_base_port + self.broker_ids.index(self.known(broker_id))

    def listener(self, broker_id: int) -> str:
        return f"{self.broker_host(broker_id)}:{self._ports[self.known(broker_id)]}"

    def assign_listener(self, broker_id: int) -> tuple[str, int, Sequence[str]]:
        """Where broker ``broker_id`` is to listen, and the prefix its command runs under: its port
        kept from before, else a free one (port 9092 on a host of its own), never one that another
        broker of the cluster holds."""
        host, prefix = self._broker_hosts.get(broker_id, (self._host, ()))
        port = self._ports.get(broker_id, 9092 if prefix else 0)
        taken = set(self._ports.values())
        while not prefix and (not port or (port in taken and self._ports.get(broker_id) != port)):
            port = free_port(self._host)
        self._ports[broker_id] = port
        return host, port, prefix

    def broker_host(self, broker_id: int) -> str:
        return self._broker_hosts.get(broker_id, (self._host, ()))[0]

    def known(self, broker_id: int) -> int:
        """``broker_id``, or ``InvalidArgumentError`` when it is not one of this cluster's."""
        if broker_id not in self.broker_ids:
            raise InvalidArgumentError(
                f"broker {broker_id} is not part of this cluster {list(self.broker_ids)}"
            )
        return broker_id
