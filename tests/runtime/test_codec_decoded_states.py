"""The decoders build partition states with ``tuple.__new__`` over zipped columns instead of one
Python call per partition: what they build must be exactly what the per-partition builders built
(same NamedTuple type, same fields, same order), and the bytes on the wire must not move."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from kafka_controller.domain.requests import (
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    StopReplicaPartitionState,
    StopReplicaRequest,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
    build_leader_and_isr_partition_state,
    build_stop_replica_partition_state,
    build_update_metadata_partition_state,
)
from kafka_controller.domain.values import TopicPartition
from kafka_controller.transport.codec import DEFAULT_APIS, LEADER_AND_ISR, STOP_REPLICA, UPDATE_METADATA
from kafka_controller.transport.columns import GC_PAUSE_MIN_ROWS


def _lai(n: int, *, optional: bool) -> LeaderAndIsrRequest:
    states = tuple(
        build_leader_and_isr_partition_state(
            f"t{i % 7}", i, i % 3, i % 5, i, (i % 5, (i + 1) % 5), -1 if i % 11 == 0 else i,
            (i % 5, (i + 1) % 5, (i + 2) % 5),
            (i % 5,) if optional and i % 3 == 0 else (),
            ((i + 2) % 5,) if optional and i % 4 == 0 else (),
            optional and i % 2 == 0,
        )
        for i in range(n)
    )  # fmt: skip
    return LeaderAndIsrRequest(5, 1, 7, 42, states, {"t0": "id0"}, ())


def _um(n: int) -> UpdateMetadataRequest:
    states = tuple(
        build_update_metadata_partition_state(
            f"t{i // 3}",
            i,
            2,
            -2 if i % 13 == 0 else i % 5,
            i,
            (i % 5,),
            3,
            (i % 5, 4),
            (4,) if i % 2 else (),
        )
        for i in range(n)
    )
    return UpdateMetadataRequest(7, 1, 7, 42, states, ())


def _stop(n: int) -> StopReplicaRequest:
    states = {
        TopicPartition(f"t{i % 4}", i): build_stop_replica_partition_state(i, i - 2, i % 2 == 0)
        for i in range(n)
    }
    return StopReplicaRequest(3, 1, 7, 42, True, states)


def _round_trip(api: str, request: Any) -> Any:
    codec = DEFAULT_APIS.get(api)
    return DEFAULT_APIS.decode_request(api, orjson.loads(orjson.dumps(codec.encode_request(request))))


@pytest.mark.parametrize("n", [0, 1, 40, GC_PAUSE_MIN_ROWS + 3])
@pytest.mark.parametrize("optional", [False, True])
def test_leader_and_isr_states_are_the_builders_states(n: int, optional: bool) -> None:
    request = _lai(n, optional=optional)
    decoded = _round_trip(LEADER_AND_ISR, request)
    assert decoded == request
    assert {type(s) for s in decoded.partition_states} <= {LeaderAndIsrPartitionState}
    assert [s._asdict() for s in decoded.partition_states] == [s._asdict() for s in request.partition_states]


@pytest.mark.parametrize("n", [0, 1, 40, GC_PAUSE_MIN_ROWS + 3])
def test_update_metadata_states_are_the_builders_states(n: int) -> None:
    request = _um(n)
    decoded = _round_trip(UPDATE_METADATA, request)
    assert decoded == request
    assert {type(s) for s in decoded.partition_states} <= {UpdateMetadataPartitionState}
    assert [s._asdict() for s in decoded.partition_states] == [s._asdict() for s in request.partition_states]


@pytest.mark.parametrize("n", [0, 1, 40, GC_PAUSE_MIN_ROWS + 3])
def test_stop_replica_states_are_the_builders_states(n: int) -> None:
    request = _stop(n)
    decoded = _round_trip(STOP_REPLICA, request)
    assert decoded == request
    assert {type(s) for s in decoded.partition_states.values()} <= {StopReplicaPartitionState}
    assert list(decoded.partition_states.items()) == list(request.partition_states.items())


def test_the_wire_bytes_are_pinned() -> None:
    lai = orjson.dumps(DEFAULT_APIS.get(LEADER_AND_ISR).encode_request(_lai(3, optional=True)))
    assert lai == (
        b'{"version":5,"controller_id":1,"controller_epoch":7,"broker_epoch":42,"topic_ids":{"t0":"id0"},'
        b'"live_leaders":[],"topics":["t0","t1","t2"],'
        b'"replica_sets":[[0,1],[1,2],[2,3],[0,1,2],[1,2,3],[2,3,4],[0],[],[2]],'
        b'"partitions":{"topic":[0,1,2],"partition":[0,1,2],"controller_epoch":[0,1,2],"leader":[0,1,2],'
        b'"leader_epoch":[0,1,2],"zk_version":[-1,1,2],"isr":[0,1,2],"replicas":[3,4,5],'
        b'"adding_replicas":[6,7,7],"removing_replicas":[8,7,7],"is_new":[true,false,true]}}'
    )
