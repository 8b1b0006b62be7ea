"""Integration fixtures: ``LocalCluster``s of real broker processes on the session's ZooKeeper.

Each module gets its own cluster (a fresh chroot, so a fresh tree: the first controller has epoch
1) and reuses it across its tests, which are written to leave it healthy for the next one. Broker
logs and audit spools stay under pytest's temporary directory for post-mortems.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kafka_controller.cluster.local import LocalCluster
from kafka_controller.testing.zk_harness import *  # noqa: F403
from kafka_controller.zk.embedded import EmbeddedZooKeeper

_ids = itertools.count(1)
ClusterFactory = Callable[..., LocalCluster]


@pytest.fixture(scope="module")
def make_cluster(
    request: pytest.FixtureRequest, zk_server: EmbeddedZooKeeper, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ClusterFactory]:
    """``make_cluster(brokers=3, broker_config={...}, audit=True)``: a started cluster, closed after
    the module."""
    clusters: list[LocalCluster] = []
    module = request.module.__name__.rsplit(".", 1)[-1]

    def make(brokers: int = 3, *, audit: bool = False, **kwargs: Any) -> LocalCluster:
        n = next(_ids)
        data_dir = tmp_path_factory.mktemp(f"{module}-cluster")
        cluster = LocalCluster(
            brokers,
            zookeeper=zk_server.connect_string,
            chroot=f"/it/{module}-{n}",
            data_dir=data_dir,
            audit_url=f"sqlite:///{data_dir / 'audit.db'}" if audit else None,
            **kwargs,
        )
        clusters.append(cluster)
        return cluster.start(timeout=120)

    yield make
    for cluster in clusters:
        cluster.close(graceful=False)
