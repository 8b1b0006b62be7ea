"""Preferred-replica election on real brokers (docs/controller-behaviour.md §8.11; Kafka's
ControllerIntegrationTest testPreferredReplicaLeaderElection,
testAutoPreferredReplicaLeaderElection): leadership returns to the first replica when it is back in
the ISR, through the legacy znode and by the auto rebalance (``leader.imbalance.check.interval.seconds=1``).
"""

from __future__ import annotations

import pytest

from kafka_controller.cluster.local import LocalCluster
from tests.integration.conftest import ClusterFactory
from tests.integration.helpers import TIMEOUT, state, wait_state

pytestmark = [pytest.mark.integration, pytest.mark.zk]


@pytest.fixture(scope="module")
def cluster(make_cluster: ClusterFactory) -> LocalCluster:
    return make_cluster(2, broker_config={"auto.leader.rebalance.enable": "false"})


@pytest.fixture(scope="module")
def auto_cluster(make_cluster: ClusterFactory) -> LocalCluster:
    return make_cluster(2, broker_config={"leader.imbalance.check.interval.seconds": "1"})


def _bounce_preferred(cluster: LocalCluster, topic: str, *, wait_isr: bool = True) -> tuple[int, int, int]:
    """Topic on [other, controller]; stop other (leader moves to the controller), start it again and
    (with ``wait_isr``) wait until it is back in the ISR. Returns (other, controller, leader epoch
    while the controller leads)."""
    c = cluster.controller()[0]
    assert c is not None
    other = next(b for b in cluster.broker_ids if b != c)
    cluster.create_topic(topic, {0: [other, c]})
    _, _, e0, _ = wait_state(cluster, topic, 0, leader=other, isr=(other, c))
    cluster.stop_broker(other, timeout=TIMEOUT)
    _, _, e1, _ = wait_state(cluster, topic, 0, leader=c)
    assert e1 == e0 + 1
    cluster.start_broker(other, timeout=TIMEOUT)
    if not wait_isr:
        return other, c, e1
    _, _, e2, _ = wait_state(cluster, topic, 0, leader=c, isr=(other, c))
    return other, c, e2


def test_back_to_back_preferred_elections_through_the_znode(cluster: LocalCluster, zk_admin_client) -> None:  # type: ignore[no-untyped-def]
    from kafka_controller.domain.values import TopicPartition
    from kafka_controller.zk import paths as P

    for round_ in range(2):
        topic = f"preferred-{round_}"
        other, c, epoch = _bounce_preferred(cluster, topic)
        assert state(cluster, topic)[1] == c  # no auto rebalance here: it stays on the controller
        cluster.store.create_preferred_replica_election([TopicPartition(topic, 0)])
        _, _, leader_epoch, _ = wait_state(cluster, topic, 0, leader=other)
        assert leader_epoch == epoch + 1
        cluster.waits.wait_until(
            lambda: zk_admin_client.exists(cluster.chroot + P.PREFERRED_REPLICA_ELECTION_PATH) is None,
            TIMEOUT,
            "/admin/preferred_replica_election to be removed",
        )


def test_auto_rebalance_moves_leadership_back(auto_cluster: LocalCluster) -> None:
    other, c, epoch = _bounce_preferred(auto_cluster, "auto", wait_isr=False)
    _, _, leader_epoch, isr = wait_state(auto_cluster, "auto", 0, leader=other)
    assert leader_epoch == epoch + 1  # one election: the rebalance, once other was back in the ISR
    assert set(isr) == {other, c}
