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
from kafka_controller.domain.requests import LeaderAndIsrPartitionState, UpdateMetadataPartitionState
from kafka_controller.domain.values import (
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
    TopicPartition,
)
from kafka_controller.dryrun.memory_store import InMemoryMetadataStore
from kafka_controller.zk import codecs
from kafka_controller.zk import paths as P
from kafka_controller.zk.backend import CREATE, PERSISTENT
from kafka_controller.zk.codecs import decode_partition_state, decode_topic, encode_partition_state


def _store_with_states(states: dict[TopicPartition, bytes]) -> InMemoryMetadataStore:
    store = InMemoryMetadataStore()
    ops: list[tuple[int, str, bytes | None, int]] = []
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


def test_states_that_seldom_repeat_stop_the_sharing_and_still_decode_alike(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A long-lived cluster's states may all differ: once the memo is full with fewer hits than
    entries, the rest is decoded on its own (not shared), to the same values."""
    monkeypatch.setattr("kafka_controller.zk.store_partitions._DECODED_STATES_MAX", 4)
    distinct = [TopicPartition("t", p) for p in range(6)]
    repeated = [TopicPartition("u", p) for p in range(3)]
    datas = {tp: _state(1, 10 + tp.partition, (1, 2)) for tp in distinct}
    datas |= {tp: _state(2, 7, (2, 1)) for tp in repeated}
    reads = _store_with_states(datas).get_partition_states(distinct + repeated)
    assert [reads[tp].leader_and_isr.leader_epoch for tp in distinct] == [10, 11, 12, 13, 14, 15]  # type: ignore[union-attr]
    first, *rest = (reads[tp] for tp in repeated)
    assert first == LeaderIsrAndControllerEpoch(LeaderAndIsr(2, 7, (2, 1), 0), 1)
    assert all(r == first and r is not first for r in rest)  # decoded each, no longer shared


def test_states_that_repeat_keep_being_shared_past_the_memos_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("kafka_controller.zk.store_partitions._DECODED_STATES_MAX", 4)
    tps = [TopicPartition("t", p) for p in range(40)]
    # four distinct states, each repeated: the memo fills with many hits, is cleared and kept
    datas = {tp: _state(1, tp.partition % 4, (1, 2)) for tp in tps[:32]}
    datas |= {tp: _state(2, 99, (2, 1)) for tp in tps[32:]}
    reads = _store_with_states(datas).get_partition_states(tps)
    tail = [reads[tp] for tp in tps[32:]]
    assert all(r is tail[0] for r in tail)  # still shared after the bound was reached


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


def test_topics_with_the_same_replica_lists_share_their_assignments() -> None:
    """A failover's 2,000 topics build one ``ReplicaAssignment`` per distinct replica list, not one
    per topic: equal lists decoded in another topic (another call) give the same value."""
    first = decode_topic("a", orjson.dumps({"version": 3, "partitions": {"0": [1, 2], "1": [2, 1]}}))[1]
    second = decode_topic("b", orjson.dumps({"version": 3, "partitions": {"0": [2, 1], "1": [1, 2]}}))[1]
    assert second[TopicPartition("b", 0)] is first[TopicPartition("a", 1)]
    assert second[TopicPartition("b", 1)] is first[TopicPartition("a", 0)]
    assert second[TopicPartition("b", 1)] == ReplicaAssignment((1, 2))


@pytest.mark.parametrize("equal_list", ["[true, 2]", "[1.0, 2]"])
def test_a_list_equal_to_a_shared_one_but_not_of_ints_is_still_refused(equal_list: str) -> None:
    """``(True, 2) == (1, 2)``: the shared values are looked up by equality, so the type check
    must still run first."""
    decode_topic("a", b'{"version":3,"partitions":{"0":[1,2]}}')
    with pytest.raises(ZNodeDecodeError):
        decode_topic("b", b'{"version":3,"partitions":{"0":%s}}' % equal_list.encode())


def test_decoded_assignments_stay_right_past_the_shared_values_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(codecs, "_SHARED_ASSIGNMENTS_MAX", 3)
    monkeypatch.setattr(codecs, "_SHARED_ASSIGNMENTS", {})
    for t in range(6):
        partitions = {str(p): [t, p, 9] for p in range(4)}
        _, assignment = decode_topic(f"t{t}", orjson.dumps({"version": 3, "partitions": partitions}))
        assert assignment == {TopicPartition(f"t{t}", p): ReplicaAssignment((t, p, 9)) for p in range(4)}
        assert len(codecs._SHARED_ASSIGNMENTS) <= 3 + 4  # cleared when full, then this topic's lists


def test_a_topic_being_reassigned_keeps_its_own_adding_and_removing_replicas() -> None:
    decode_topic("a", b'{"version":3,"partitions":{"0":[1,2,3]}}')
    _, assignment = decode_topic(
        "b",
        b'{"version":3,"partitions":{"0":[1,2,3],"1":[1,2,3]},'
        b'"adding_replicas":{"0":[3]},"removing_replicas":{"0":[4]}}',
    )
    assert assignment[TopicPartition("b", 0)] == ReplicaAssignment((1, 2, 3), (3,), (4,))
    assert assignment[TopicPartition("b", 1)] == ReplicaAssignment((1, 2, 3))


# -- the request batch's bulk path for entries of distinct partitions -------------------------------


def _batch_fixture(seed: int) -> tuple[object, list[TopicPartition]]:
    import random

    from kafka_controller.core.context import ControllerContext
    from kafka_controller.domain.values import Broker, EndPoint, ReplicaAssignment

    rng = random.Random(seed)
    ctx = ControllerContext()
    ctx.set_live_brokers({Broker(b, (EndPoint("h", b),)): b for b in (1, 2, 3, 4) if rng.random() < 0.8})
    tps = [TopicPartition(f"t{t}", p) for t in range(3) for p in range(6)]
    for tp in tps:
        replicas = tuple(rng.sample([1, 2, 3, 4, 5], rng.randint(1, 3)))
        ctx.partition_assignments.setdefault(tp.topic, {})[tp.partition] = ReplicaAssignment(replicas)
        if rng.random() < 0.85:
            isr = replicas[: rng.randint(1, len(replicas))]
            ctx.put_partition_leadership_info(
                tp, LeaderIsrAndControllerEpoch(LeaderAndIsr(isr[0], rng.randint(0, 3), isr, 0), 1)
            )
    if rng.random() < 0.3:
        ctx.topics_to_be_deleted.add("t1")
    return ctx, tps


@pytest.mark.parametrize("seed", range(30))
def test_bulk_queueing_of_distinct_partitions_is_the_per_entry_queueing_in_the_same_order(
    seed: int,
) -> None:
    """Several calls (``is_new`` sticky across them), each with distinct partitions in a random
    order, some entries with a -1 recipient or none: the same per-broker maps, in the same order,
    and the same UpdateMetadata map, in the same order, as Kafka's one call per entry."""
    import random

    from kafka_controller.core.context import ControllerContext
    from kafka_controller.core.request_batch import ControllerBrokerRequestBatch
    from kafka_controller.dryrun.recording_channel import RecordingBrokerChannel

    ctx, tps = _batch_fixture(seed)
    assert isinstance(ctx, ControllerContext)
    rng = random.Random(seed + 1000)
    bulk = ControllerBrokerRequestBatch(1, ctx, RecordingBrokerChannel(), lambda _e: None)
    one_by_one = ControllerBrokerRequestBatch(1, ctx, RecordingBrokerChannel(), lambda _e: None)
    for _ in range(3):
        is_new = rng.random() < 0.4
        entries = []
        for tp in rng.sample(tps, rng.randint(1, len(tps))):
            info = ctx.partition_leadership_info(tp) or LeaderIsrAndControllerEpoch(
                LeaderAndIsr(1, 0, (1,), 0), 1
            )
            recipients = tuple(rng.sample([-1, 1, 2, 3, 4, 5], rng.randint(0, 3)))
            entries.append((recipients, tp, info, ctx.partition_full_replica_assignment(tp)))
        bulk.add_leader_and_isr_requests(iter(entries), is_new)
        for entry in entries:
            one_by_one.add_leader_and_isr_request_for_brokers(*entry, is_new)

    def ordered(batch: ControllerBrokerRequestBatch) -> object:
        return (
            [(b, list(m.items())) for b, m in batch.leader_and_isr_request_map.items()],
            list(batch.update_metadata_request_partition_info_map.items()),
            sorted(batch.update_metadata_request_broker_set),
        )

    assert ordered(bulk) == ordered(one_by_one)
    for batch in (bulk, one_by_one):  # the states are the request classes, not bare tuples
        for m in batch.leader_and_isr_request_map.values():
            assert all(type(state) is LeaderAndIsrPartitionState for state in m.values())
        states = batch.update_metadata_request_partition_info_map.values()
        assert all(type(state) is UpdateMetadataPartitionState for state in states)


def test_distinct_partitions_take_the_bulk_path_and_a_repeated_one_the_entry_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from kafka_controller.core.context import ControllerContext
    from kafka_controller.core.request_batch import ControllerBrokerRequestBatch
    from kafka_controller.dryrun.recording_channel import RecordingBrokerChannel

    ctx, tps = _batch_fixture(7)
    assert isinstance(ctx, ControllerContext)
    batch = ControllerBrokerRequestBatch(1, ctx, RecordingBrokerChannel(), lambda _e: None)
    entry_loop_calls: list[int] = []
    original = ControllerBrokerRequestBatch._queue_leader_and_isr_states

    def counting(self: ControllerBrokerRequestBatch, entries: object, is_new: bool, memo: object) -> None:
        entry_loop_calls.append(1)
        original(self, entries, is_new, memo)  # type: ignore[arg-type]

    monkeypatch.setattr(ControllerBrokerRequestBatch, "_queue_leader_and_isr_states", counting)
    info = LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 0, (1,), 0), 1)
    entries = [((1, 2), tp, info, ctx.partition_full_replica_assignment(tp)) for tp in tps]
    batch.add_leader_and_isr_requests(entries, False)
    assert entry_loop_calls == []
    assert list(batch.leader_and_isr_request_map[1]) == tps
    batch.add_leader_and_isr_requests([*entries[:2], entries[0]], False)
    assert entry_loop_calls == [1]


def test_offline_replicas_lookup_by_replica_list_only_while_no_log_dir_is_offline() -> None:
    from kafka_controller.core.context import ControllerContext
    from kafka_controller.core.request_batch_states import OfflineReplicas
    from kafka_controller.domain.values import Broker, EndPoint

    ctx = ControllerContext()
    ctx.set_live_brokers({Broker(b, (EndPoint("h", b),)): b for b in (1, 3)})
    offline = OfflineReplicas(ctx)
    assert offline.of_replicas is not None
    tp = TopicPartition("t", 0)
    for replicas in [(1, 2, 3), (2, 4), (3, 1), (), (1, 2, 3)]:
        assert (
            offline.of_replicas(replicas)
            == offline(tp, replicas)
            == tuple(r for r in replicas if r != 1 and r != 3)
        )
    ctx.replicas_on_offline_dirs[1] = {tp}
    with_dirs = OfflineReplicas(ctx)
    assert with_dirs.of_replicas is None  # the partition matters then
    assert with_dirs(tp, (1, 2, 3)) == (1, 2)
    assert with_dirs(TopicPartition("t", 1), (1, 2, 3)) == (2,)


@pytest.mark.parametrize("seed", range(20))
def test_initial_replica_states_are_set_in_assignment_order_as_one_at_a_time(seed: int) -> None:
    """``initialize_replica_state`` against Kafka's loop: online (live broker, log dir online) ->
    OnlineReplica, any other -> ReplicaDeletionIneligible, the states set and both lists made in
    the assignments' order, over states already there (they keep their place)."""
    import random

    from kafka_controller.core.context import ControllerContext
    from kafka_controller.core.replica_state_machine import ReplicaStateMachine
    from kafka_controller.domain.states import ReplicaState
    from kafka_controller.domain.values import Broker, EndPoint, PartitionAndReplica, ReplicaAssignment

    rng = random.Random(seed)
    ctx = ControllerContext()
    ctx.set_live_brokers({Broker(b, (EndPoint("h", b),)): b for b in (1, 2, 3, 4) if rng.random() < 0.7})
    tps = [TopicPartition(f"t{t}", p) for t in range(4) for p in range(5)]
    for tp in rng.sample(tps, len(tps)):
        replicas = tuple(rng.sample([1, 2, 3, 4, 5], rng.randint(0, 3)))
        ctx.partition_assignments.setdefault(tp.topic, {})[tp.partition] = ReplicaAssignment(replicas)
    if seed % 2:
        ctx.replicas_on_offline_dirs[rng.choice([1, 2, 3])] = set(rng.sample(tps, 5))
    earlier = PartitionAndReplica(tps[0], 5)
    ctx.replica_states[earlier] = ReplicaState.OFFLINE_REPLICA
    want_states = dict(ctx.replica_states)
    want_online, want_offline = [], []
    for topic, parts in ctx.partition_assignments.items():
        for p, a in parts.items():
            tp = TopicPartition(topic, p)
            for r in a.replicas:
                replica = PartitionAndReplica(tp, r)
                if ctx.is_replica_online(r, tp):
                    want_states[replica] = ReplicaState.ONLINE_REPLICA
                    want_online.append(replica)
                else:
                    want_states[replica] = ReplicaState.REPLICA_DELETION_INELIGIBLE
                    want_offline.append(replica)
    rsm = ReplicaStateMachine(1, ctx, None, None)  # type: ignore[arg-type]  # only the context is used
    online, offline = rsm.initialize_replica_state()
    assert (online, offline) == (want_online, want_offline)
    assert list(ctx.replica_states.items()) == list(want_states.items())
    assert all(type(r) is PartitionAndReplica for r in online + offline)


@pytest.mark.parametrize("seed", range(10))
def test_bulk_leader_and_isr_states_are_leader_and_isr_state_per_partition(seed: int) -> None:
    """The OnlineReplica phase's one-loop build: each partition's state is ``leader_and_isr_state``
    with the assignment ``partition_full_replica_assignment`` gives (none: the empty one), in the
    partitions' order, topics interleaved or not."""
    import random

    from kafka_controller.core.context import ControllerContext
    from kafka_controller.core.request_batch_states import leader_and_isr_state, leader_and_isr_states

    ctx, tps = _batch_fixture(seed)
    assert isinstance(ctx, ControllerContext)
    rng = random.Random(seed)
    ctx.partition_assignments["t2"] = {}  # a topic without assignments
    led = [tp for tp in tps if ctx.partition_leadership_info(tp) is not None]
    order = rng.sample(led, len(led)) if seed % 2 else led
    for is_new in (False, True):
        got = leader_and_isr_states(order, ctx.partitions_leadership_info, ctx.partition_assignments, is_new)
        want = {
            tp: leader_and_isr_state(
                tp, ctx.partitions_leadership_info[tp], ctx.partition_full_replica_assignment(tp), is_new
            )
            for tp in order
        }
        assert list(got.items()) == list(want.items())
        assert all(type(s) is LeaderAndIsrPartitionState for s in got.values())
