"""Builders and waits shared by the broker tests."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from kafka_controller.domain.requests import (
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    StopReplicaPartitionState,
    StopReplicaRequest,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
)
from kafka_controller.domain.values import Broker, EndPoint, TopicPartition
from kafka_controller.transport.codec import DEFAULT_APIS

DEADLINE_S = 20.0


def broker(broker_id: int, port: int = 9092) -> Broker:
    return Broker(broker_id, (EndPoint("127.0.0.1", port),))


def state(
    topic: str,
    partition: int,
    leader: int,
    leader_epoch: int,
    isr: Sequence[int],
    replicas: Sequence[int] | None = None,
    zk_version: int = 0,
    controller_epoch: int = 1,
) -> LeaderAndIsrPartitionState:
    reps = tuple(replicas if replicas is not None else isr)
    return LeaderAndIsrPartitionState(
        topic, partition, controller_epoch, leader, leader_epoch, tuple(isr), zk_version, reps, (), (), False
    )


def leader_and_isr(
    states: Iterable[LeaderAndIsrPartitionState],
    *,
    controller_epoch: int = 1,
    broker_epoch: int = -1,
    live_leaders: Iterable[Broker] = (),
) -> LeaderAndIsrRequest:
    return LeaderAndIsrRequest(5, 1, controller_epoch, broker_epoch, tuple(states), {}, tuple(live_leaders))


def stop_replica(
    entries: dict[TopicPartition, tuple[int, bool]], *, controller_epoch: int = 1, broker_epoch: int = -1
) -> StopReplicaRequest:
    states = {
        tp: StopReplicaPartitionState(tp.partition, epoch, delete) for tp, (epoch, delete) in entries.items()
    }
    return StopReplicaRequest(3, 1, controller_epoch, broker_epoch, False, states)


def update_metadata(
    states: Iterable[UpdateMetadataPartitionState] = (),
    *,
    controller_id: int = 1,
    controller_epoch: int = 1,
    broker_epoch: int = -1,
    brokers: Iterable[Broker] = (),
) -> UpdateMetadataRequest:
    return UpdateMetadataRequest(
        7, controller_id, controller_epoch, broker_epoch, tuple(states), tuple(brokers)
    )


def um_state(topic: str, partition: int, leader: int, isr: Sequence[int]) -> UpdateMetadataPartitionState:
    return UpdateMetadataPartitionState(topic, partition, 1, leader, 0, tuple(isr), 0, tuple(isr), ())


class LoopbackClient:
    """A ``request(api, body)`` client that calls a handler in-process, through the real codecs
    (encode, JSON-compatible body, decode) so the wire format is exercised without sockets."""

    def __init__(self, handle: Callable[[str, Any], Any]) -> None:
        self.handle = handle
        self.calls: list[str] = []
        self.closed = False

    def request(self, api: str, body: Any) -> Any:
        self.calls.append(api)
        codec = DEFAULT_APIS.get(api)
        decoded = DEFAULT_APIS.decode_request(api, codec.encode_request(body))
        response = self.handle(api, decoded)
        return DEFAULT_APIS.decode_response(api, codec.encode_response(response))

    def close(self) -> None:
        self.closed = True


def wait_until(predicate: Callable[[], object], message: str, timeout: float = DEADLINE_S) -> Any:
    """Poll until ``predicate()`` is truthy (and return it), or fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for: {message}")
        time.sleep(0.02)
