"""The columnar partition-state read (``iter_data_versions_many``): the multi-read reply parsed
into (codes, data, versions), and ``get_partition_states`` over such chunks, against what the
full ``(code, data, Stat)`` reads give."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest

from kafka_controller.domain.errors import MetadataStoreError, ZNodeDecodeError
from kafka_controller.domain.values import LeaderAndIsr, LeaderIsrAndControllerEpoch, TopicPartition
from kafka_controller.dryrun.memory_zk import InMemoryZooKeeper
from kafka_controller.zk.backend import NOAUTH, NONODE, OK, DataVersions, data_version_columns
from kafka_controller.zk.codecs import encode_partition_state
from kafka_controller.zk.multiread import (
    GET_DATA,
    DataVersionsMultiRead,
    MultiRead,
    _header,
    _int,
    _stat,
)
from kafka_controller.zk.store import ZkMetadataStore

TP = TopicPartition


def _reply(results: Sequence[tuple[int, bytes | None, int]]) -> bytes:
    """A multi-read reply body: per result (code, data, version); a code other than OK is an error."""
    parts = []
    for i, (code, data, version) in enumerate(results):
        if code != OK:
            parts += [_header.pack(-1, 0, code), _int.pack(code)]
            continue
        parts.append(_header.pack(GET_DATA, 0, 0))
        parts.append(_int.pack(-1) if data is None else _int.pack(len(data)) + data)
        parts.append(_stat.pack(100 + i, 200 + i, 1, 2, version, 0, 0, 0, len(data or b""), 0, 300 + i))
    parts.append(_header.pack(-1, 1, -1))
    return b"".join(parts)


RESULTS = [(OK, b'{"a":1}', 3), (NONODE, None, -1), (OK, None, 0), (OK, b"", 7), (NOAUTH, None, -1)]


def test_columns_match_the_full_multi_read() -> None:
    paths = [f"/p{i}" for i in range(len(RESULTS))]
    buf = b"xx" + _reply(RESULTS)
    full = MultiRead(GET_DATA, paths, "").deserialize(buf, 2)
    columns = DataVersionsMultiRead(paths, "").deserialize(buf, 2)
    assert columns == data_version_columns(full)
    assert columns == (
        [OK, NONODE, OK, OK, NOAUTH],
        [b'{"a":1}', None, None, b"", None],
        [3, -1, 0, 7, -1],
    )


@pytest.mark.parametrize("answered", [3, 6])
def test_a_reply_with_another_count_of_results_is_refused(answered: int) -> None:
    results = (RESULTS * 2)[:answered]
    with pytest.raises(ValueError, match="other than 5 results"):
        DataVersionsMultiRead([f"/p{i}" for i in range(5)], "").deserialize(_reply(results), 0)


def test_a_truncated_reply_is_refused() -> None:
    with pytest.raises(ValueError, match="other than 2 results"):
        DataVersionsMultiRead(["/a", "/b"], "").deserialize(_reply(RESULTS[:2])[:-15], 0)


class _ChunkedBackend:
    """``iter_data_versions_many`` of an in-memory tree, in chunks of ``size``."""

    def __init__(self, zk: InMemoryZooKeeper, size: int) -> None:
        self.session = zk.open_session()
        self.size = size

    def iter_data_versions_many(self, paths: Sequence[str]) -> Iterator[DataVersions]:
        for i in range(0, len(paths), self.size):
            yield data_version_columns(self.session.get_data_many(paths[i : i + self.size]))


def _state(leader: int, epoch: int) -> LeaderIsrAndControllerEpoch:
    return LeaderIsrAndControllerEpoch(LeaderAndIsr(leader, epoch, (leader,), 0), 1)


def test_partition_states_from_columns_whole_chunks_shared_and_the_rest_one_by_one() -> None:
    """Chunks of 4: the first two all memo hits after the first state (shared in bulk), then a
    chunk with a missing znode, an undecodable one and a new state, then a short last chunk."""
    zk = InMemoryZooKeeper()
    session = zk.open_session()
    tps = [TP("t", p) for p in range(14)]
    states = {tp: _state(1, 0) for tp in tps[:8]}
    states[tps[10]] = _state(2, 5)
    states.update({tp: _state(1, 0) for tp in tps[11:]})
    for path in ["/brokers", "/brokers/topics", "/brokers/topics/t", "/brokers/topics/t/partitions"]:
        session.create(path, None)
    for tp in tps:
        session.create(f"/brokers/topics/t/partitions/{tp.partition}", None)
    for tp, state in states.items():
        session.create(f"/brokers/topics/t/partitions/{tp.partition}/state", encode_partition_state(state))
    session.create("/brokers/topics/t/partitions/9/state", b"{not json")
    store = ZkMetadataStore(zk.open_session())
    store._core.backend = _ChunkedBackend(zk, 4)  # type: ignore[assignment]
    reads = store.get_partition_states(tps)
    assert list(reads) == tps
    assert all(reads[tp] == _state(1, 0) for tp in [*tps[:8], *tps[11:]])
    assert len({id(reads[tp]) for tp in [*tps[:8], *tps[11:]]}) == 1  # one decoded value, shared
    assert reads[tps[8]] is None
    assert isinstance(reads[tps[9]], ZNodeDecodeError) and "partitions/9/state" in str(reads[tps[9]])
    assert reads[tps[10]] == _state(2, 5)
    whole = ZkMetadataStore(zk.open_session()).get_partition_states(tps)  # one chunk, same answers
    assert {tp: repr(r) for tp, r in reads.items()} == {tp: repr(r) for tp, r in whole.items()}


def test_partition_states_refuse_a_short_answer() -> None:
    zk = InMemoryZooKeeper()
    store = ZkMetadataStore(zk.open_session())

    class Short:
        def iter_data_versions_many(self, paths: Sequence[str]) -> Iterator[DataVersions]:
            yield [NONODE], [None], [-1]

    store._core.backend = Short()  # type: ignore[assignment]
    with pytest.raises(MetadataStoreError, match="fewer than the 2"):
        store.get_partition_states([TP("t", 0), TP("t", 1)])


def test_encoded_states_round_trip_through_the_columns() -> None:
    state = _state(3, 9)
    data = encode_partition_state(state)
    columns = DataVersionsMultiRead(["/s"], "").deserialize(_reply([(OK, data, 4)]), 0)
    assert columns == ([OK], [data], [4])
