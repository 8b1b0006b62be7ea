"""The context load's decode shortcuts give what decoding each znode on its own gives.

``ZkMetadataStore.get_partition_states`` decodes each distinct (data, zk version) pair of a call
once and shares the value; ``decode_topic``'s replica lists are type-checked at C speed.
"""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_controller.domain.errors import ZNodeDecodeError
from kafka_controller.domain.values import LeaderAndIsr, LeaderIsrAndControllerEpoch, TopicPartition
from kafka_controller.testing.memory_store import InMemoryMetadataStore
from kafka_controller.zk import paths as P
from kafka_controller.zk.backend import CREATE, PERSISTENT
from kafka_controller.zk.codecs import decode_partition_state, decode_topic, encode_partition_state


def _store_with_states(states: dict[TopicPartition, bytes]) -> InMemoryMetadataStore:
    store = InMemoryMetadataStore()
    ops = []
    for topic in dict.fromkeys(tp.topic for tp in states):
        ops.append((CREATE, f"/brokers/topics/{topic}", b"{}", PERSISTENT))
        ops.append((CREATE, P.topic_partitions_path(topic), None, PERSISTENT))
    for tp in states:
        ops.append((CREATE, P.topic_partition_path(tp), None, PERSISTENT))
    for tp, data in states.items():
        ops.append((CREATE, P.topic_partition_state_path(tp), data, PERSISTENT))
    store.batcher.run(ops, -1)
    return store


def _state(leader: int, epoch: int, isr: tuple[int, ...], controller_epoch: int = 1) -> bytes:
    return encode_partition_state(
        LeaderIsrAndControllerEpoch(LeaderAndIsr(leader, epoch, isr, 0), controller_epoch)
    )


def test_equal_state_znodes_are_decoded_once_and_share_their_value() -> None:
    same = _state(1, 3, (1, 2, 3))
    tps = [TopicPartition(f"t{i % 7}", i) for i in range(40)]
    store = _store_with_states({tp: same for tp in tps})
    reads = store.get_partition_states(tps)
    first = reads[tps[0]]
    assert first == LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 3, (1, 2, 3), 0), 1)
    assert all(reads[tp] is first for tp in tps)  # one decoded value for the 40 equal znodes


def test_shared_decoding_keeps_each_znodes_own_version_data_and_errors() -> None:
    tps = [TopicPartition("t", p) for p in range(6)]
    datas = {
        tps[0]: _state(1, 3, (1, 2)),
        tps[1]: _state(1, 3, (1, 2)),
        tps[2]: _state(2, 3, (2, 1)),
        tps[3]: b'{"controller_epoch":1,"leader":true,"version":1,"leader_epoch":0,"isr":[1]}',
        tps[4]: b'{"controller_epoch":1,"leader":true,"version":1,"leader_epoch":0,"isr":[1]}',
        tps[5]: b"",
    }
    store = _store_with_states(datas)
    # a second version of tps[1]'s znode, with the same data as tps[0]'s
    store.session.set_data(P.topic_partition_state_path(tps[1]), datas[tps[1]], -1)
    reads = store.get_partition_states(tps)
    for tp in tps:
        path = P.topic_partition_state_path(tp)
        [(_, data, stat)] = store.session.get_data_many([path])
        assert stat is not None
        try:
            expected: object = decode_partition_state(data, stat.version, path)
        except ZNodeDecodeError as e:
            expected = e
        got = reads[tp]
        if isinstance(expected, ZNodeDecodeError):
            assert isinstance(got, ZNodeDecodeError) and got.path == path  # each error names its znode
        else:
            assert got == expected
    assert reads[tps[1]].leader_and_isr.zk_version == 1  # type: ignore[union-attr]
    assert reads[tps[0]].leader_and_isr.zk_version == 0  # type: ignore[union-attr]
    assert reads[tps[5]] is None


_REPLICA = st.one_of(
    st.integers(-(2**40), 2**40),
    st.booleans(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=2),
    st.none(),
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.integers(0, 30), st.lists(_REPLICA, max_size=4), max_size=6))
def test_topic_replica_lists_accept_exactly_lists_of_ints(partitions: dict[int, list[object]]) -> None:
    """The C-speed check takes what the per-element ``type(r) is int`` test takes, no more: a
    bool or a float equal to an int (``True == 1``, ``1.0 == 1``) is still refused."""
    data = orjson.dumps({"version": 3, "partitions": {str(p): r for p, r in partitions.items()}})
    valid = all(type(r) is int for replicas in partitions.values() for r in replicas)
    if valid:
        _, assignment = decode_topic("t", data)
        assert {tp.partition: a.replicas for tp, a in assignment.items()} == {
            p: tuple(r) for p, r in partitions.items()
        }
        assert all(type(r) is int for a in assignment.values() for r in a.replicas)
    else:
        with pytest.raises(ZNodeDecodeError):
            decode_topic("t", data)
