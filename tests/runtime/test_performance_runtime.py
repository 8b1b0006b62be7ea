"""Runtime performance changes keep behaviour: UpdateMetadata states shared by several brokers'
requests are encoded once, even when their send threads ask at once, and decode the same; the
event thread pauses the cyclic GC only while it processes an event, and leaves it as it found it."""

from __future__ import annotations

import gc
import sys
import threading
import time

import orjson
import pytest

from kafka_controller.controller.event_manager import ControllerEventManager
from kafka_controller.domain.requests import UpdateMetadataPartitionState, UpdateMetadataRequest
from kafka_controller.domain.values import Broker, EndPoint
from kafka_controller.ports import SystemClock
from kafka_controller.transport import codec, codec_common, framing
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


def _waiting_for_an_encoder(thread: threading.Thread) -> bool:
    """``thread`` is blocked in ``_encode_shared_states``, waiting for another thread's columns."""
    frame = sys._current_frames().get(thread.ident or -1)
    names = []
    while frame is not None:
        names.append(frame.f_code.co_name)
        frame = frame.f_back
    return bool(names) and names[0] == "wait" and "_encode_shared_states" in names


def _send_at_once(
    monkeypatch: pytest.MonkeyPatch, fail_first: bool
) -> tuple[list[str], dict[str, dict[str, object]], dict[str, Exception]]:
    """Five send threads encode UpdateMetadata with the same states at the same moment; the first
    encoding is held until every other thread waits for it (or, without the wait, has come to
    encode too), and fails if ``fail_first``. Returns the encoders, the bodies and the errors."""
    states = tuple(UpdateMetadataPartitionState("t", i, 3, 1, 2, (1,), 5, (1,), ()) for i in range(20))
    encode = codec_common._encode_states_once
    encoders: list[str] = []
    threads: list[threading.Thread] = []

    def held_encode(s: tuple[UpdateMetadataPartitionState, ...]) -> dict[str, object]:
        encoders.append(threading.current_thread().name)
        if len(encoders) == 1:
            deadline = time.monotonic() + DEADLINE_S
            me = threading.current_thread()
            while not all(t is me or _waiting_for_an_encoder(t) or t.name in encoders for t in threads):
                assert time.monotonic() < deadline, "the send threads neither waited nor encoded"
                time.sleep(0.001)
            if fail_first:
                raise MemoryError("encoding failed")
        return encode(s)

    monkeypatch.setattr(codec_common, "_encode_states_once", held_encode)
    bodies: dict[str, dict[str, object]] = {}
    errors: dict[str, Exception] = {}
    start = threading.Barrier(5)

    def send(epoch: int) -> None:
        start.wait(DEADLINE_S)
        name = threading.current_thread().name
        try:
            bodies[name] = codec.encode_update_metadata_request(_request(states, epoch))
        except MemoryError as e:
            errors[name] = e

    threads.extend(threading.Thread(target=send, args=(e,), name=f"send-{e}") for e in range(5))
    for t in threads:
        t.start()
    for t in threads:
        t.join(DEADLINE_S)
    return encoders, bodies, errors


def test_brokers_send_threads_asking_at_once_encode_shared_states_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first encodes, the other four wait for its columns (each used to find nothing cached
    yet and encode the same states again)."""
    encoders, bodies, errors = _send_at_once(monkeypatch, fail_first=False)
    assert len(encoders) == 1 and not errors and len(bodies) == 5
    assert len({id(body["partitions"]) for body in bodies.values()}) == 1


def test_threads_waiting_for_a_failed_encoding_encode_for_themselves(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    encoders, bodies, errors = _send_at_once(monkeypatch, fail_first=True)
    assert list(errors) == encoders[:1]  # only the encoder that failed saw the error
    assert len(bodies) == 4 and len(encoders) == 5
    assert len({orjson.dumps(body["partitions"]) for body in bodies.values()}) == 1


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


def test_audit_records_of_an_event_are_held_from_the_store_until_it_ends() -> None:
    """Recorded at once (journaled: a kill -9 loses none), written to the store only once the event
    ends: the writer's inserts take no CPU from the event."""
    from kafka_controller.controller.auditing import ControllerAuditSink
    from kafka_controller.domain.audit_records import PartitionTransition
    from kafka_controller.testing.doubles import HoldingAuditSink
    from tests.runtime.fakes import ManualClock

    sink = HoldingAuditSink()
    clock = ManualClock()
    audit = ControllerAuditSink(sink, 3, clock, lambda: 9)
    audit.begin_event("BrokerChange")
    audit.record([PartitionTransition("t", 0, "OnlinePartition", "OfflinePartition")])
    clock.advance(1.0)
    audit.record([PartitionTransition("t", 1, "OnlinePartition", "OfflinePartition")])
    held = list(sink.records)
    assert (sink.writable, sink.calls) == (0, ["hold"])  # in the sink, held while the event runs
    assert [(r.partition, r.sequence, r.event, r.controller_epoch) for r in held] == [
        (0, 1, "BrokerChange", 9),
        (1, 2, "BrokerChange", 9),
    ]
    assert held[1].timestamp_ms - held[0].timestamp_ms == 1000  # stamped when recorded
    audit.end_event()
    assert (sink.writable, sink.calls) == (2, ["hold", "release"])
    audit.record([PartitionTransition("t", 2, "OnlinePartition", "OfflinePartition")])
    assert sink.writable == 3 and sink.records[2].event is None  # outside an event: not held
    assert sink.calls == ["hold", "release"]


def test_shared_update_metadata_columns_are_written_once_and_framed_as_plain_json() -> None:
    """Each broker's frame splices the columns' JSON written at encoding, and equals the frame a
    plain body gives (the bytes on the wire are unchanged)."""
    states = tuple(
        UpdateMetadataPartitionState(f"t{i % 2}", i, 3, 1, 2, (1, 2), 5, (1, 2), ()) for i in range(8)
    )
    first = codec.encode_update_metadata_request(_request(states, 100))
    second = codec.encode_update_metadata_request(_request(states, 200))
    columns = first["partitions"]
    assert type(columns) is framing.EncodedObject
    assert columns.json == orjson.dumps(dict(columns))
    for cid, body in ((1, first), (2, second)):
        plain = {k: dict(v) if isinstance(v, dict) else v for k, v in body.items()}
        assert framing.encode_request(codec.UPDATE_METADATA, cid, body) == orjson.dumps(
            {"api": codec.UPDATE_METADATA, "v": framing.WIRE_VERSION, "cid": cid, "body": plain}
        )


def test_a_frame_uses_the_bytes_an_encoded_object_was_written_with() -> None:
    encoded = framing.EncodedObject({"leader": [1, 2]})
    dict.__setitem__(encoded, "leader", [9])  # not done in the code: shows what is framed
    _, _, body = framing.decode_request(framing.encode_request("X", 1, {"partitions": encoded}))
    assert body == {"partitions": {"leader": [1, 2]}}
