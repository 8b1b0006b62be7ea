"""The admin client: controller discovery through ZooKeeper and retries while the controller moves."""

from __future__ import annotations

from typing import Any

import pytest

from kafka_controller.broker import apis as A
from kafka_controller.broker.admin_client import (
    AdminClient,
    AdminRequestError,
    ControllerNotAvailableError,
    zk_locator,
)
from kafka_controller.domain.errors import InvalidArgumentError
from kafka_controller.domain.requests import Errors
from kafka_controller.domain.values import TopicPartition
from kafka_controller.dryrun.memory_store import InMemoryMetadataStore
from kafka_controller.testing.clock import ManualClock
from kafka_controller.transport.errors import RemoteError
from kafka_controller.transport.server import TransportServer
from tests.broker.helpers import broker

T0 = TopicPartition("t", 0)


class Node:
    """A broker stand-in: answers ElectLeaders as the controller, or NOT_CONTROLLER."""

    def __init__(self, active: bool) -> None:
        self.active = active
        self.requests = 0
        self.server = TransportServer("127.0.0.1", 0, self.handle).start()

    def handle(self, api: str, body: Any) -> Any:
        self.requests += 1
        if not self.active:
            return A.ElectLeadersResponse(Errors.NOT_CONTROLLER)
        return A.ElectLeadersResponse(
            Errors.NONE, {tp: A.PartitionElectionResult("NONE", 7) for tp in body.partitions}
        )


@pytest.fixture
def nodes() -> Any:
    made = [Node(False), Node(True)]
    yield made
    for n in made:
        n.server.stop()


def test_zk_locator_reads_controller_and_its_registration() -> None:
    store = InMemoryMetadataStore()
    locate = zk_locator(store)
    assert locate(True) is None
    store.register_broker(broker(3, 9333))
    store.register_controller_and_increment_controller_epoch(3)
    assert locate(True) == (3, "127.0.0.1", 9333)


def test_retries_on_not_controller_until_it_reaches_the_new_controller(nodes: list[Node]) -> None:
    old, new = nodes
    seen: list[bool] = []

    def locate(fresh: bool) -> tuple[int, str, int]:
        seen.append(fresh)
        node = new if fresh else old  # a stale cache points at the old controller
        return (2 if fresh else 1, "127.0.0.1", node.server.port)

    clock = ManualClock()
    with AdminClient(
        InMemoryMetadataStore(), locator=locate, sleep=clock.sleep, monotonic=clock.monotonic
    ) as client:
        response = client.elect_leaders("Preferred", [T0])
    assert response.results == {T0: A.PartitionElectionResult("NONE", 7)}
    assert seen == [False, True] and (old.requests, new.requests) == (1, 1)
    assert clock.sleeps == [client.retry_backoff_s]


def test_gives_up_at_the_deadline_with_what_it_saw(nodes: list[Node]) -> None:
    old, _ = nodes
    clock = ManualClock()
    client = AdminClient(
        InMemoryMetadataStore(),
        locator=lambda fresh: (1, "127.0.0.1", old.server.port),
        timeout_s=1.0,
        retry_backoff_s=0.25,  # exact in binary: attempts at 0, 0.25, 0.5, 0.75 and 1.0
        sleep=clock.sleep,
        monotonic=clock.monotonic,
    )
    with pytest.raises(ControllerNotAvailableError, match="NOT_CONTROLLER"):
        client.elect_leaders("preferred", [T0])
    assert old.requests == 5
    client.close()


def test_no_controller_registered_is_not_available() -> None:
    clock = ManualClock()
    client = AdminClient(InMemoryMetadataStore(), timeout_s=0.5, sleep=clock.sleep, monotonic=clock.monotonic)
    with pytest.raises(ControllerNotAvailableError, match="no controller is registered"):
        client.list_partition_reassignments()


def test_bad_input_and_top_level_errors_are_one_line_errors(nodes: list[Node]) -> None:
    _, new = nodes
    store = InMemoryMetadataStore()
    client = AdminClient(store, locator=lambda fresh: (2, "127.0.0.1", new.server.port))
    with pytest.raises(InvalidArgumentError, match="invalid election type 'sideways'"):
        client.elect_leaders("sideways")
    with pytest.raises(InvalidArgumentError, match="broker 9 is not registered"):
        client.describe_replicas(9)
    store.register_broker(broker(9, new.server.port))
    with pytest.raises(RemoteError, match="UNKNOWN_SERVER_ERROR"):
        client.describe_replicas(9)  # this stand-in fails on anything but ElectLeaders
    new.active = False
    with pytest.raises(AdminRequestError, match="NOT_CONTROLLER") as error:
        AdminClient._ok(new.handle(A.ELECT_LEADERS, None), A.ElectLeadersResponse)
    assert error.value.code == "NOT_CONTROLLER"
    client.close()
