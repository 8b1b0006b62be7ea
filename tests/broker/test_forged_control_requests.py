"""A control request whose controller epoch ZooKeeper does not back is refused by a real broker.

Three ``BrokerServer``s (real listeners, real controller) on an in-memory ZooKeeper tree. A peer
that is not the controller sends LeaderAndIsr, UpdateMetadata and StopReplica frames claiming
controller epoch 2^31-1 to a broker: each is STALE_CONTROLLER_EPOCH, logged with the sender's
address, and changes nothing; the real controller's requests are still acted on afterwards, and a
real failover's newer epoch (written to ``/controller_epoch`` first) is adopted, and while the
broker cannot read that znode a newer epoch's requests go unanswered until it can.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from kafka_controller.broker.config import BrokerConfig
from kafka_controller.broker.epoch_guard import ControllerEpochGuard
from kafka_controller.broker.server import BrokerServer
from kafka_controller.domain.errors import StoreUnavailableError
from kafka_controller.domain.requests import Errors
from kafka_controller.domain.values import ReplicaAssignment, TopicPartition
from kafka_controller.dryrun.memory_store import InMemoryMetadataStore
from kafka_controller.dryrun.memory_zk import InMemoryZooKeeper
from kafka_controller.transport.client import TransportClient
from kafka_controller.transport.codec import LEADER_AND_ISR, STOP_REPLICA, UPDATE_METADATA
from kafka_controller.transport.errors import TransportConnectionError
from tests.broker.helpers import leader_and_isr, state, stop_replica, um_state, update_metadata, wait_until

FORGED_EPOCH = 2**31 - 1
SETTINGS = {"auto.leader.rebalance.enable": "false", "sim.fetch.interval.ms": "50"}


class Cluster:
    def __init__(self) -> None:
        self.tree = InMemoryZooKeeper()
        self.zk = InMemoryMetadataStore(self.tree)
        self.brokers = {
            b: BrokerServer(BrokerConfig.of(b, SETTINGS), InMemoryMetadataStore(self.tree)).startup()
            for b in (1, 2, 3)
        }

    def controller(self) -> int:
        return int(wait_until(self.zk.get_controller_id, "a controller"))

    def epoch(self) -> int:
        read = self.zk.get_controller_epoch()
        assert read is not None
        return read[0]

    def close(self) -> None:
        for server in self.brokers.values():
            server.crash()
        self.zk.close()


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    c = Cluster()
    try:
        yield c
    finally:
        c.close()


def _sees_everyone(server: BrokerServer, controller: int) -> bool:
    cache = server.metadata_cache
    return len(cache.alive_brokers()) == 3 and cache.controller_id == controller


def test_forged_epoch_is_refused_and_the_real_controllers_still_count(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    controller = cluster.controller()
    target_id = next(b for b in cluster.brokers if b != controller)
    target = cluster.brokers[target_id]
    wait_until(lambda: _sees_everyone(target, controller), "the target sees 3 brokers and the controller")
    known = target.replica_manager.controller_epoch
    assert known == cluster.epoch()

    forged_tp = TopicPartition("forged", 0)
    frames = [
        (
            UPDATE_METADATA,
            update_metadata(
                [um_state("forged", 0, 99, [99])], controller_id=99, controller_epoch=FORGED_EPOCH
            ),
        ),
        (
            LEADER_AND_ISR,
            leader_and_isr([state("forged", 0, target_id, 5, [target_id])], controller_epoch=FORGED_EPOCH),
        ),
        (STOP_REPLICA, stop_replica({forged_tp: (-2, True)}, controller_epoch=FORGED_EPOCH)),
    ]
    caplog.set_level(logging.WARNING, logger="kafka_controller.broker.epoch_guard")
    with TransportClient("127.0.0.1", target.transport.port, timeout_s=10) as forger:
        for api, request in frames:
            assert forger.request(api, request).error == Errors.STALE_CONTROLLER_EPOCH, api
        assert forger._sock is not None
        host, port = forger._sock.getsockname()[:2]

    assert target.replica_manager.controller_epoch == known
    assert _sees_everyone(target, controller)  # not the forged empty broker list, not controller 99
    assert target.metadata_cache.get_partition_info(forged_tp) is None
    assert forged_tp not in target.replica_manager.partitions
    refusals = [r.getMessage() for r in caplog.records if "Refused" in r.getMessage()]
    assert refusals, "the refusal is logged"
    assert f"from {host}:{port}" in refusals[0]
    assert "UpdateMetadata" in refusals[0] and str(FORGED_EPOCH) in refusals[0]

    # The real controller's requests are still acted on: a new topic reaches the target.
    cluster.zk.create_topic("after", {0: ReplicaAssignment.of([target_id, controller])})
    wait_until(
        lambda: TopicPartition("after", 0) in target.replica_manager.partitions,
        "the real controller's LeaderAndIsr for the new topic acted on",
    )
    wait_until(
        lambda: target.metadata_cache.get_partition_info(TopicPartition("after", 0)) is not None,
        "the real controller's UpdateMetadata for the new topic in the cache",
    )

    # A real failover: the new controller's epoch, already in ZooKeeper, is adopted.
    cluster.brokers.pop(controller).crash()
    new_controller = wait_until(
        lambda: (c := cluster.zk.get_controller_id()) not in (None, controller) and c,
        "a new controller",
    )
    new_epoch = cluster.epoch()
    assert new_epoch > known
    for broker_id, server in cluster.brokers.items():
        wait_until(
            lambda server=server: (
                server.replica_manager.controller_epoch == new_epoch
                and server.metadata_cache.controller_id == new_controller
            ),
            f"broker {broker_id} to adopt controller {new_controller} at epoch {new_epoch}",
        )


def test_a_claim_the_broker_cannot_check_goes_unanswered_until_zookeeper_answers(cluster: Cluster) -> None:
    """While ``/controller_epoch`` cannot be read (the broker's session is suspended while the
    ensemble elects a leader), a newer controller's requests are neither adopted nor refused: the
    connection closes unanswered and the new controller sends them again until the broker can
    check the epoch. A refusal would be final, and the broker would never learn what it leads."""
    controller = cluster.controller()
    target_id = next(b for b in cluster.brokers if b != controller)
    target = cluster.brokers[target_id]
    wait_until(lambda: _sees_everyone(target, controller), "the target sees 3 brokers and the controller")
    known = target.replica_manager.controller_epoch
    reachable = True
    attempts = 0

    def read_epoch() -> int | None:
        nonlocal attempts
        if not reachable:
            attempts += 1
            raise StoreUnavailableError("ZooKeeper session is suspended")
        read = cluster.zk.get_controller_epoch()
        return None if read is None else read[0]

    target.handler.epoch_guard = ControllerEpochGuard(read_epoch)
    reachable = False

    request = update_metadata([], controller_id=99, controller_epoch=FORGED_EPOCH)
    with (
        TransportClient("127.0.0.1", target.transport.port, timeout_s=10) as forger,
        pytest.raises(TransportConnectionError),
    ):
        forger.request(UPDATE_METADATA, request)
    assert attempts == 1

    cluster.brokers.pop(controller).crash()
    wait_until(lambda: cluster.zk.get_controller_id() not in (None, controller), "a new controller")
    new_epoch = cluster.epoch()
    assert new_epoch > known
    wait_until(lambda: attempts >= 3, "the new controller to send its request again")
    assert target.replica_manager.controller_epoch == known  # nothing unchecked was adopted
    reachable = True
    wait_until(
        lambda: target.replica_manager.controller_epoch == new_epoch,
        f"the target to adopt epoch {new_epoch} once ZooKeeper answers",
    )
    assert target.metadata_cache.controller_id == cluster.zk.get_controller_id()
