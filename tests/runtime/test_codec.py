"""Codec: domain values round-trip exactly through the wire bodies; malformed bodies get one-line errors."""

from __future__ import annotations

import gc
import sys
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_controller.domain.errors import InvalidArgumentError
from kafka_controller.domain.requests import (
    Errors,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    StopReplicaPartitionState,
    StopReplicaRequest,
    StopReplicaResponse,
    UpdateMetadataResponse,
)
from kafka_controller.domain.values import TopicPartition
from kafka_controller.transport import framing
from kafka_controller.transport.codec import (
    DEFAULT_APIS,
    LEADER_AND_ISR,
    STOP_REPLICA,
    UPDATE_METADATA,
    ApiCodec,
    ApiRegistry,
    error_response,
)
from kafka_controller.transport.columns import GC_PAUSE_MIN_ROWS, gc_paused
from kafka_controller.transport.errors import ProtocolError
from tests.runtime.builders import broker, leader_and_isr, stop_replica, update_metadata


def wire(api: str, value: Any, *, response: bool = False) -> Any:
    """Encode with the api's codec, go through JSON bytes, decode."""
    codec = DEFAULT_APIS.get(api)
    body = orjson.loads(orjson.dumps((codec.encode_response if response else codec.encode_request)(value)))
    return DEFAULT_APIS.decode_response(api, body) if response else DEFAULT_APIS.decode_request(api, body)


ints = st.integers(min_value=-2, max_value=2**31 - 1)
replica_lists = st.lists(st.integers(0, 1000), max_size=4).map(tuple)
lai_states = st.builds(
    LeaderAndIsrPartitionState,
    st.sampled_from(["a", "b", "topic.with-dots_", "ünï"]),
    st.integers(0, 10_000),
    ints,
    ints,
    ints,
    replica_lists,
    ints,
    replica_lists,
    replica_lists,
    replica_lists,
    st.booleans(),
)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(lai_states, max_size=30), st.dictionaries(st.text(max_size=5), st.text(max_size=8), max_size=3)
)
def test_leader_and_isr_round_trips_any_states_in_order(
    states: list[LeaderAndIsrPartitionState], topic_ids: dict[str, str]
) -> None:
    request = LeaderAndIsrRequest(5, 1, 9, -1, tuple(states), topic_ids, (broker(3, rack="r"),))
    assert wire(LEADER_AND_ISR, request) == request


def test_large_leader_and_isr_round_trips_and_is_columnar() -> None:
    request = leader_and_isr(topics=200, partitions_per_topic=50)
    body = DEFAULT_APIS.get(LEADER_AND_ISR).encode_request(request)
    assert len(body["topics"]) == 200 and len(body["partitions"]["leader"]) == 10_000
    assert len(body["replica_sets"]) <= 5 * 4 * 3  # distinct ordered replica lists of RF 3 over 5 brokers
    assert "adding_replicas" not in body["partitions"]  # all-empty columns are left out
    assert wire(LEADER_AND_ISR, request) == request


def test_update_metadata_and_stop_replica_round_trip() -> None:
    um = update_metadata()
    assert wire(UPDATE_METADATA, um) == um
    sr = stop_replica()
    decoded = wire(STOP_REPLICA, sr)
    assert decoded == sr and list(decoded.partition_states) == list(sr.partition_states)


def test_responses_round_trip_with_errors() -> None:
    errors = {
        TopicPartition("foo", 0): Errors.NONE,
        TopicPartition("bar", 0): Errors.FENCED_LEADER_EPOCH,
        TopicPartition("foo", 1): Errors.KAFKA_STORAGE_ERROR,
    }
    for api, response in (
        (LEADER_AND_ISR, LeaderAndIsrResponse(Errors.NONE, errors)),
        (STOP_REPLICA, StopReplicaResponse(Errors.STALE_CONTROLLER_EPOCH, errors)),
        (UPDATE_METADATA, UpdateMetadataResponse(Errors.STALE_BROKER_EPOCH)),
    ):
        decoded = wire(api, response, response=True)
        assert decoded == response
        assert list(getattr(decoded, "partition_errors", {})) == list(
            getattr(response, "partition_errors", {})
        )


def test_error_response_sets_the_error_on_every_partition() -> None:
    lai = leader_and_isr(2, 2)
    resp = error_response(lai, Errors.STALE_CONTROLLER_EPOCH)
    assert isinstance(resp, LeaderAndIsrResponse)
    assert resp.error is Errors.STALE_CONTROLLER_EPOCH
    assert set(resp.partition_errors) == {TopicPartition(s.topic, s.partition) for s in lai.partition_states}
    assert set(resp.partition_errors.values()) == {Errors.STALE_CONTROLLER_EPOCH}
    assert error_response(update_metadata(), Errors.NOT_CONTROLLER) == UpdateMetadataResponse(
        Errors.NOT_CONTROLLER
    )


def _lai_body() -> dict[str, Any]:
    return orjson.loads(orjson.dumps(DEFAULT_APIS.get(LEADER_AND_ISR).encode_request(leader_and_isr(2, 3))))


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda b: b.pop("controller_epoch"), "missing field 'controller_epoch'"),
        (lambda b: b["partitions"].pop("leader"), "missing field 'leader'"),
        (lambda b: b["partitions"]["leader"].pop(), "column partitions.leader must be a list of 6 values"),
        (
            lambda b: b["partitions"]["is_new"].__setitem__(0, 1),
            "column partitions.is_new holds values of the wrong",
        ),
        (
            lambda b: b["partitions"]["isr"].__setitem__(0, 999),
            "column partitions.isr has indexes outside its table",
        ),
        (
            lambda b: b["partitions"]["topic"].__setitem__(0, -1),
            "column partitions.topic has indexes outside",
        ),
        (
            lambda b: b["replica_sets"].__setitem__(0, ["1"]),
            "'replica_sets' must be a list of lists of integers",
        ),
        (lambda b: b.__setitem__("topics", [1]), "'topics' must be a list of str"),
        (lambda b: b.__setitem__("broker_epoch", "x"), "header fields"),
        (lambda b: b.__setitem__("partitions", []), "'partitions' must be an object of columns"),
        (lambda b: b.__setitem__("topic_ids", {"a": 1}), "'topic_ids' must map"),
        (lambda b: b.__setitem__("live_leaders", [1]), "'live_leaders' must be a list of broker objects"),
    ],
)
def test_malformed_leader_and_isr_bodies_name_the_problem(mutate: Any, message: str) -> None:
    body = _lai_body()
    mutate(body)
    with pytest.raises(ProtocolError, match="malformed LeaderAndIsr request body") as err:
        DEFAULT_APIS.decode_request(LEADER_AND_ISR, body)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_unknown_error_name_in_a_response_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError, match="NOT_AN_ERROR"):
        DEFAULT_APIS.decode_response(UPDATE_METADATA, {"error": "NOT_AN_ERROR"})


def test_inconsistent_stop_replica_state_is_refused_at_encode() -> None:
    bad = StopReplicaRequest(
        3, 1, 1, 1, False, {TopicPartition("t", 0): StopReplicaPartitionState(1, 0, True)}
    )
    with pytest.raises(InvalidArgumentError, match="t-0 names partition 1"):
        DEFAULT_APIS.get(STOP_REPLICA).encode_request(bad)


def test_registry_one_line_json_api_and_duplicates() -> None:
    apis = DEFAULT_APIS.copy()
    apis.register_json("CreateTopics")
    body = {"topics": [{"name": "t", "partitions": 3}]}
    assert apis.decode_request("CreateTopics", body) == body
    assert "CreateTopics" not in DEFAULT_APIS.names()
    with pytest.raises(InvalidArgumentError, match="already registered"):
        apis.register(ApiCodec(LEADER_AND_ISR))
    with pytest.raises(ProtocolError, match="unknown api 'Nope'"):
        ApiRegistry().get("Nope")


def test_envelopes_reject_what_is_not_the_protocol() -> None:
    with pytest.raises(ProtocolError, match="not valid JSON"):
        framing.decode_request(b"{nope")
    with pytest.raises(ProtocolError, match="JSON list, not an object"):
        framing.decode_request(b"[1]")
    with pytest.raises(ProtocolError, match="no 'body' field") as err:
        framing.decode_request(orjson.dumps({"api": "X", "v": 1, "cid": 5}))
    assert err.value.cid == 5
    with pytest.raises(ProtocolError, match="wire version 9"):
        framing.decode_request(orjson.dumps({"api": "X", "v": 9, "cid": 5, "body": {}}))
    assert framing.decode_request(framing.encode_request("X", 3, {"a": 1})) == ("X", 3, {"a": 1})
    assert framing.decode_response(framing.encode_error(4, "INVALID_REQUEST", "m")) == (
        4,
        None,
        ("INVALID_REQUEST", "m"),
    )


topic_partitions = st.builds(TopicPartition, st.sampled_from(["x", "y", "z.1"]), st.integers(0, 500))


@settings(max_examples=40, deadline=None)
@given(st.dictionaries(topic_partitions, st.sampled_from(list(Errors)), max_size=25), st.booleans())
def test_stop_replica_and_partition_errors_round_trip_in_order(
    errors: dict[TopicPartition, Errors], delete: bool
) -> None:
    states = {tp: StopReplicaPartitionState(tp.partition, tp.partition % 5 - 2, delete) for tp in errors}
    request = StopReplicaRequest(3, 1, 2, 3, not delete, states)
    decoded = wire(STOP_REPLICA, request)
    assert decoded == request and list(decoded.partition_states) == list(states)
    response = wire(LEADER_AND_ISR, LeaderAndIsrResponse(Errors.NONE, errors), response=True)
    assert response.partition_errors == errors and list(response.partition_errors) == list(errors)


def test_gc_pause_is_scoped_and_restores_the_collector() -> None:
    assert gc.isenabled()
    with gc_paused(10):
        assert gc.isenabled()  # small bodies leave the collector alone
    with pytest.raises(RuntimeError), gc_paused(GC_PAUSE_MIN_ROWS):
        assert not gc.isenabled()
        raise RuntimeError("decode failed")
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused(GC_PAUSE_MIN_ROWS):
            pass
        assert not gc.isenabled()  # a collector someone else disabled stays disabled
    finally:
        gc.enable()
    wire(LEADER_AND_ISR, leader_and_isr(10, GC_PAUSE_MIN_ROWS // 10))
    assert gc.isenabled()


@pytest.mark.parametrize("bad", [1.0, "1", None, [1], {"a": 1}])
def test_an_index_column_refuses_what_is_not_an_integer_by_its_use(bad: Any) -> None:
    for column in ("isr", "topic"):
        body = _lai_body()
        body["partitions"][column][1] = bad
        with pytest.raises(ProtocolError, match=f"column partitions.{column} holds values of the wrong type"):
            DEFAULT_APIS.decode_request(LEADER_AND_ISR, body)


def test_a_boolean_index_picks_the_table_entry_it_equals() -> None:
    """Index columns are not type-scanned first: a boolean is the integer it equals, and the value
    decoded is a table entry, of the table's checked type (``Columns.lookup``)."""
    body = _lai_body()
    body["partitions"]["isr"] = [bool(i) if i in (0, 1) else i for i in body["partitions"]["isr"]]
    decoded = DEFAULT_APIS.decode_request(LEADER_AND_ISR, body)
    assert decoded == DEFAULT_APIS.decode_request(LEADER_AND_ISR, _lai_body())


def _errors_body(
    topics: list[Any], topic: list[Any], partition: list[Any], names: list[Any], error: list[Any]
) -> Any:
    return {
        "error": "NONE",
        "topics": topics,
        "errors": names,
        "partitions": {"topic": topic, "partition": partition, "error": error},
    }


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 2), st.integers(0, 3), st.sampled_from(list(Errors)[:6])), max_size=30)
)
def test_decoded_partition_errors_are_the_dict_of_their_columns_even_with_repeated_partitions(
    entries: list[tuple[int, int, Errors]],
) -> None:
    """A response listing a partition twice (no broker of ours does; a hostile or broken one may)
    decodes to what ``dict`` makes of the pairs, the last error winning, and ``values()`` answers
    membership for every error as that dict does, also for an error only an overridden entry lists."""
    names = sorted({e for _, _, e in entries}) or [Errors.NONE]
    body = _errors_body(
        ["x", "y", "z"],
        [t for t, _, _ in entries],
        [p for _, p, _ in entries],
        [e.value for e in names],
        [names.index(e) for _, _, e in entries],
    )
    expected = {TopicPartition("xyz"[t], p): e for t, p, e in entries}
    for api in (LEADER_AND_ISR, STOP_REPLICA):
        for first_question in ("values", "mapping"):
            decoded = DEFAULT_APIS.decode_response(api, body).partition_errors
            if first_question == "mapping":
                assert decoded == expected and list(decoded.items()) == list(expected.items())
            for error in Errors:
                assert (error in decoded.values()) == (error in expected.values()), error
            assert list(decoded.values()) == list(expected.values())
            assert decoded == expected and len(decoded) == len(expected)
            assert decoded.get(TopicPartition("x", 0)) is expected.get(TopicPartition("x", 0))
            assert set(decoded.listed_errors()) >= set(expected.values())  # type: ignore[attr-defined]


def test_a_large_response_is_asked_for_an_absent_error_without_building_its_partitions() -> None:
    """The controller's question of a failover's answers (is KAFKA_STORAGE_ERROR among 60,000
    errors?) builds no key per partition: checked by the heap's block count, which building the
    60,000 ``TopicPartition`` keys and their dict would raise by more than 60,000."""
    n = 60_000
    response = LeaderAndIsrResponse(
        Errors.NONE, {TopicPartition(f"t{i // 50}", i % 50): Errors.NONE for i in range(n)}
    )
    raw = orjson.dumps(DEFAULT_APIS.get(LEADER_AND_ISR).encode_response(response))
    body = orjson.loads(raw)
    gc.collect()
    before = sys.getallocatedblocks()
    decoded = DEFAULT_APIS.decode_response(LEADER_AND_ISR, body)
    assert Errors.KAFKA_STORAGE_ERROR not in decoded.partition_errors.values()
    assert Errors.NONE in decoded.partition_errors.values()  # every entry's error
    after_question = sys.getallocatedblocks()
    assert decoded.partition_errors == response.partition_errors
    assert sys.getallocatedblocks() - before > n  # the blocks the mapping takes once built
    assert after_question - before < n // 10


@pytest.mark.parametrize(
    ("column", "value", "message"),
    [
        ("topic", 3, r"column partitions\.topic has indexes outside its table of 3"),
        ("topic", -1, r"column partitions\.topic has indexes outside its table of 3"),
        ("error", 1, "column partitions.error has indexes outside its table of 1"),
        ("error", True, "column partitions.error holds values of the wrong type"),
        ("topic", "0", "column partitions.topic holds values of the wrong type"),
        ("partition", 1.5, "column partitions.partition holds values of the wrong type"),
    ],
)
def test_a_malformed_partition_errors_column_is_refused_when_decoded(
    column: str, value: Any, message: str
) -> None:
    body = _errors_body(["x", "y", "z"], [0, 1, 2], [0, 0, 0], ["NONE"], [0, 0, 0])
    body["partitions"][column][1] = value
    for api in (LEADER_AND_ISR, STOP_REPLICA):
        with pytest.raises(ProtocolError, match=message):
            DEFAULT_APIS.decode_response(api, body)
    body = _errors_body(["x"], [0, 0], [0, 1], ["NONE"], [0])
    with pytest.raises(ProtocolError, match=r"column partitions\.error must be a list of 2 values"):
        DEFAULT_APIS.decode_response(LEADER_AND_ISR, body)
