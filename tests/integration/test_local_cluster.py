"""``LocalCluster`` itself: a taken listener port is retried on another, misuse is refused clearly."""

from __future__ import annotations

import socket

import pytest

from kafka_controller.cluster.local import LocalCluster
from kafka_controller.cluster.waits import ClusterError
from kafka_controller.domain.errors import InvalidArgumentError
from kafka_controller.zk.embedded import EmbeddedZooKeeper

pytestmark = [pytest.mark.integration, pytest.mark.zk]


def test_a_taken_port_is_retried_and_misuse_is_refused(
    zk_server: EmbeddedZooKeeper, tmp_path_factory: pytest.TempPathFactory
) -> None:
    cluster = LocalCluster(
        1,
        zookeeper=zk_server.connect_string,
        chroot="/it/local-cluster",
        data_dir=tmp_path_factory.mktemp("lc"),
    )
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen(1)
        taken = squatter.getsockname()[1]
        cluster.ports[1] = taken  # as if another program grabbed the port between pick and bind
        try:
            cluster.start(timeout=120)
            assert cluster.ports[1] != taken
            assert cluster.registered().keys() == {1}
            assert cluster.listener(1) == f"127.0.0.1:{cluster.ports[1]}"
            assert "cannot listen on" in cluster.processes[1].log_path.read_text()
            with pytest.raises(ClusterError, match="broker 1 is already running"):
                cluster.start_broker(1)
            with pytest.raises(InvalidArgumentError, match=r"broker 5 is not part of this cluster \[1\]"):
                cluster.kill_broker(5)
        finally:
            cluster.close(graceful=True)
    assert not cluster.processes[1].is_running()
    with pytest.raises(InvalidArgumentError, match="number of brokers must be between 1 and 64, got 0"):
        LocalCluster(0)
