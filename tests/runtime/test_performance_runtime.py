"""Runtime performance changes keep behaviour: UpdateMetadata states shared by several brokers'
requests are encoded once and decode the same; the event thread pauses the cyclic GC only while
it processes an event, and leaves it as it found it."""

from __future__ import annotations

import gc
import threading

import orjson

from kafka_controller.controller.event_manager import ControllerEventManager
from kafka_controller.domain.requests import UpdateMetadataPartitionState, UpdateMetadataRequest
from kafka_controller.domain.values import Broker, EndPoint
from kafka_controller.ports import SystemClock
from kafka_controller.transport import codec
from tests.runtime.fakes import DEADLINE_S, Ev, RecordingProcessor


def _request(states: tuple[UpdateMetadataPartitionState, ...], broker_epoch: int) -> UpdateMetadataRequest:
    return UpdateMetadataRequest(7, 1, 3, broker_epoch, states, (Broker(1, (EndPoint("h", 9),)),), {})


def test_shared_update_metadata_states_are_encoded_once_and_round_trip() -> None:
    states = tuple(
        UpdateMetadataPartitionState(f"t{i % 3}", i, 3, 1, 2, (1, 2), 5, (1, 2, 3), (3,)) for i in range(10)
    )
    first = codec.encode_update_metadata_request(_request(states, 100))
    second = codec.encode_update_metadata_request(_request(states, 200))
    assert first["partitions"] is second["partitions"]  # the columns were built once
    assert (first["broker_epoch"], second["broker_epoch"]) == (100, 200)
    for body, epoch in ((first, 100), (second, 200)):
        wire = orjson.loads(orjson.dumps(body))
        assert codec.decode_update_metadata_request(wire) == _request(states, epoch)


def test_equal_but_distinct_state_tuples_are_encoded_separately() -> None:
    make = lambda leader: tuple(  # noqa: E731
        UpdateMetadataPartitionState("t", i, 3, leader, 2, (1,), 5, (1,), ()) for i in range(3)
    )
    a, b = make(1), make(2)
    body_a = codec.encode_update_metadata_request(_request(a, 1))
    body_b = codec.encode_update_metadata_request(_request(b, 1))
    assert body_a["partitions"]["leader"] == [1, 1, 1]
    assert body_b["partitions"]["leader"] == [2, 2, 2]


def _gc_state_while_processing(manager: ControllerEventManager) -> bool:
    seen: list[bool] = []
    done = threading.Event()
    manager.put(Ev("probe", lambda: (seen.append(gc.isenabled()), done.set(), None)[-1]))
    assert done.wait(DEADLINE_S)
    return seen[0]


def test_event_thread_pauses_gc_only_while_processing_and_restores_it() -> None:
    manager = ControllerEventManager(1, RecordingProcessor(), SystemClock())
    manager.start()
    was_enabled = gc.isenabled()
    try:
        gc.enable()
        assert _gc_state_while_processing(manager) is False
        assert gc.isenabled()
        gc.disable()  # someone else disabled it: the event thread must not turn it back on
        assert _gc_state_while_processing(manager) is False
        assert not gc.isenabled()
    finally:
        manager.close()
        if was_enabled:
            gc.enable()
        else:
            gc.disable()
