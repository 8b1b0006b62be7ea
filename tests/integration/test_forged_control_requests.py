"""A forged control request against broker processes on a real ZooKeeper.

A peer that is not the controller sends UpdateMetadata with controller epoch 2^31-1 and no live
brokers to a broker process. Kafka's broker would adopt it: every client would be told of no
broker, and the real controller's requests would be STALE_CONTROLLER_EPOCH until a restart. Here
the broker reads ``/controller_epoch``, refuses it, and names the sender in its log; the real
controller's requests still count, and a real failover's epoch is adopted.
"""

from __future__ import annotations

import pytest

from kafka_controller.broker import apis as A
from kafka_controller.cluster.local import LocalCluster
from kafka_controller.domain.requests import Errors, UpdateMetadataRequest
from kafka_controller.transport.client import TransportClient
from kafka_controller.transport.codec import UPDATE_METADATA
from tests.broker.helpers import wait_until
from tests.integration.conftest import ClusterFactory
from tests.integration.helpers import wait_healthy

pytestmark = [pytest.mark.integration, pytest.mark.zk]

FORGED_EPOCH = 2**31 - 1


def _client(cluster: LocalCluster, broker_id: int) -> TransportClient:
    host, port = cluster.listener(broker_id).rsplit(":", 1)
    return TransportClient(host, int(port), timeout_s=10)


def _seen_by(cluster: LocalCluster, broker_id: int) -> tuple[int, int, int]:
    """``(controller epoch it acts on, controller id, live brokers)`` as the broker tells them."""
    with _client(cluster, broker_id) as c:
        described = c.request(A.DESCRIBE_REPLICAS, None)
        metadata = c.request(A.METADATA, None)
    return described.controller_epoch, metadata.controller_id, len(metadata.brokers)


def test_a_forged_epoch_does_not_lock_the_controller_out(make_cluster: ClusterFactory) -> None:
    cluster = make_cluster(3, broker_config={"auto.leader.rebalance.enable": "false"})
    controller, epoch = cluster.controller()
    assert controller is not None and epoch is not None
    target = next(b for b in cluster.broker_ids if b != controller)
    wait_until(lambda: _seen_by(cluster, target) == (epoch, controller, 3), "the target to know everyone")

    forged = UpdateMetadataRequest(7, controller, FORGED_EPOCH, -1, (), ())
    with _client(cluster, target) as forger:
        assert forger.request(UPDATE_METADATA, forged).error == Errors.STALE_CONTROLLER_EPOCH
        assert forger._sock is not None
        host, port = forger._sock.getsockname()[:2]
    assert _seen_by(cluster, target) == (epoch, controller, 3)
    log = cluster.processes[target].log_path.read_text()
    assert f"Refused UpdateMetadata from {host}:{port} claiming controller {controller} at epoch" in log

    # The real controller still counts: a new topic gets leaders and a full ISR on the target too.
    others = [b for b in cluster.broker_ids if b != target]
    cluster.create_topic("after-forgery", {0: [target, others[0]], 1: [others[1], target]})
    wait_healthy(cluster)

    # A real failover: the new controller's epoch is in ZooKeeper before its requests, and adopted.
    cluster.kill_broker(controller, wait_deregistered=True)
    new_controller, new_epoch = cluster.waits.wait_for_controller(exclude=[controller], min_epoch=epoch + 1)
    survivors = [b for b in cluster.broker_ids if b != controller]
    for b in survivors:
        wait_until(
            lambda b=b: _seen_by(cluster, b) == (new_epoch, new_controller, 2),
            f"broker {b} to act on controller {new_controller} at epoch {new_epoch}",
        )


def test_the_epoch_check_can_sync_a_real_zookeeper_session(zk_connect: str) -> None:
    """The broker's guard syncs through the store's kazoo client (chroot applied) before it
    refuses; on a real session that sync must go through, not fail quietly."""
    from kafka_controller.broker.server import _epoch_sync
    from kafka_controller.zk.kazoo_backend import KazooMetadataStore

    store = KazooMetadataStore(zk_connect)
    try:
        sync = _epoch_sync(store)
        assert sync is not None
        sync()  # raises on a bad path or a dead session
    finally:
        store.close()
