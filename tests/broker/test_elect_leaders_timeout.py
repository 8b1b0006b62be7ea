"""ElectLeaders' ``timeout_ms``, as Kafka 2.8's ``ReplicaManager.electLeaders`` and
``DelayedElectLeader``: from the request's arrival, the answer waits for this broker's metadata cache
to show each new leader, and a partition whose leader has not shown in time is REQUEST_TIMED_OUT.
The controller is a fake (``FakeBroker``); the cache is the broker's real ``MetadataCache``."""

from __future__ import annotations

import datetime
import threading
from typing import Any

from kio.static.primitive import i32Timedelta

from kafka_controller.broker import apis as A
from kafka_controller.broker.kafka_wire.controller_admin_apis import ELECT_LEADERS, elect_leaders_api
from kafka_controller.broker.kafka_wire.handler import KafkaProtocolHandler
from kafka_controller.broker.metadata_cache import MetadataCache
from kafka_controller.domain.requests import Errors
from kafka_controller.domain.values import TopicPartition
from tests.broker.test_controller_admin_apis import (
    T0,
    T1,
    T2,
    FakeBroker,
    cache_with,
    call,
    elect_request,
    elect_results,
    lead,
    make,
)


def ms(n: int) -> Any:
    return i32Timedelta.parse(datetime.timedelta(milliseconds=n))


class WaitSpy(MetadataCache):
    """A metadata cache that records how long each ``wait_until`` was allowed."""

    def __init__(self) -> None:
        super().__init__(1)
        self.waits: list[float] = []

    def wait_until(self, predicate: Any, timeout_s: float) -> bool:
        self.waits.append(timeout_s)
        return super().wait_until(predicate, timeout_s)


def elected(*tps: TopicPartition, leader: int = 2) -> A.ElectLeadersResponse:
    return A.ElectLeadersResponse(
        Errors.NONE, {tp: A.PartitionElectionResult(Errors.NONE, leader) for tp in tps}
    )


#: Kafka's ``Errors.ELECTION_NOT_NEEDED.message()``, which its controller's ``ApiError`` carries.
NOT_NEEDED = "Leader election not needed for topic partition."


def test_elect_leaders_waits_for_the_new_leaders_in_the_metadata_cache_up_to_timeout_ms() -> None:
    """Kafka's DelayedElectLeader: an elected partition whose new leader this broker's cache does not
    show within the request's timeout_ms is REQUEST_TIMED_OUT; one it shows is NONE."""
    fake = FakeBroker()
    fake.answers[A.ELECT_LEADERS] = A.ElectLeadersResponse(
        Errors.NONE,
        {
            T0: A.PartitionElectionResult(Errors.NONE, 2),
            T1: A.PartitionElectionResult(Errors.ELECTION_NOT_NEEDED, -1),
        },
    )
    cache = WaitSpy()
    lead(cache, T0, T1, leader=1)  # the UpdateMetadata with leader 2 never comes
    response = call(make(fake, cache), ELECT_LEADERS, 2, elect_request(2, {"t": [0, 1]}, timeout=ms(200)))
    assert elect_results(response) == {
        T0: (7, None),
        T1: (84, "Leader election not needed for topic partition."),
    }
    assert len(fake.requests) == 1  # the election itself was asked for (and happened)
    (wait,) = cache.waits
    assert 0 < wait <= 0.2

    # The cache already shows it: NONE even with timeout_ms 0 (checked once, as Kafka does).
    lead(cache, T0, leader=2)
    response = call(make(fake, cache), ELECT_LEADERS, 2, elect_request(2, {"t": [0, 1]}, timeout=ms(0)))
    assert elect_results(response) == {T0: (0, None), T1: (84, NOT_NEEDED)}


def test_elect_leaders_answers_when_the_update_metadata_arrives() -> None:
    fake = FakeBroker()
    cache = cache_with(T0, T2, leader=1)

    def elect(request: Any) -> A.ElectLeadersResponse:
        # The controller's UpdateMetadata reaches this broker from another thread, whenever it does.
        threading.Thread(target=lead, args=(cache, T0, T2), kwargs={"leader": 2}).start()
        return elected(T0, T2)

    fake.answers[A.ELECT_LEADERS] = elect
    response = call(make(fake, cache), ELECT_LEADERS, 1, elect_request(1, {"t": [0], "u": [0]}))
    assert elect_results(response) == {T0: (0, None), T2: (0, None)}


def test_elect_leaders_timeout_runs_from_the_request_arrival() -> None:
    """A controller slower than timeout_ms leaves nothing to wait: only what the cache shows at once."""
    now = [100.0]
    fake = FakeBroker()

    def slow_controller(request: Any) -> A.ElectLeadersResponse:
        now[0] += 10.0  # the election took 10 s of the 5 s asked
        return elected(T0, T1)

    fake.answers[A.ELECT_LEADERS] = slow_controller
    cache = WaitSpy()
    lead(cache, T0, leader=2)
    lead(cache, T1, leader=1)
    handler = KafkaProtocolHandler(
        cache, lambda: "c", {ELECT_LEADERS: elect_leaders_api(fake.handle, cache, lambda: now[0])}
    )
    response = call(handler, ELECT_LEADERS, 2, elect_request(2, {"t": [0, 1]}))
    assert elect_results(response) == {T0: (0, None), T1: (7, None)}
    assert cache.waits == [-5.0]  # MetadataCache.wait_until checks once for a wait <= 0
