"""Fenced batching over the in-memory tree: caps, result splitting, resubmission, fencing."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import pytest

from kafka_controller.domain.errors import ControllerMovedError, InvalidArgumentError, NoNodeError
from kafka_controller.dryrun.memory_zk import InMemorySession, InMemoryZooKeeper
from kafka_controller.zk.backend import (
    BADVERSION,
    CHECK,
    CREATE,
    DELETE,
    NONODE,
    OK,
    PERSISTENT,
    SET_DATA,
    MultiOutcome,
    Op,
)
from kafka_controller.zk.batching import DEFAULT_MAX_BATCH_OPS, Batcher, op_size, split_batches


class Recording:
    """Wraps a backend and records every multi it is asked to run."""

    def __init__(self, inner: InMemorySession) -> None:
        self.inner = inner
        self.multis: list[list[Op]] = []

    def multi(self, multis: Sequence[Sequence[Op]]) -> list[MultiOutcome]:
        self.multis.extend(list(m) for m in multis)
        return self.inner.multi(multis)

    def iter_multi(self, multis: Iterable[Sequence[Op]]) -> Iterator[MultiOutcome]:
        for m in multis:
            self.multis.append(list(m))
            yield from self.inner.iter_multi([m])


@pytest.fixture
def tree() -> InMemoryZooKeeper:
    t = InMemoryZooKeeper()
    s = t.open_session()
    s.create("/controller_epoch", b"1")
    s.set_data("/controller_epoch", b"2")  # version 1
    s.create("/n", None)
    for i in range(50):
        s.create(f"/n/{i}", b"x")
    return t


def batcher(tree: InMemoryZooKeeper, **kw: int) -> tuple[Batcher, Recording]:
    rec = Recording(tree.open_session())
    return Batcher(rec, **kw), rec  # type: ignore[arg-type]


def sets(n: int, version: int = 0) -> list[Op]:
    return [(SET_DATA, f"/n/{i}", b"y", version) for i in range(n)]


def test_one_check_per_multi_and_values(tree: InMemoryZooKeeper) -> None:
    b, rec = batcher(tree, max_batch_ops=20)
    result = b.run(sets(50), 1)
    assert result.codes == [OK] * 50
    assert result.values == [1] * 50  # new data versions
    assert [len(m) for m in rec.multis] == [20, 20, 13]  # 19 + check, 19 + check, 12 + check
    assert all(m[0] == (CHECK, "/controller_epoch", None, 1) for m in rec.multis)
    assert sum(1 for m in rec.multis for op in m if op[0] == CHECK) == 3


def test_by_default_one_epoch_check_fences_a_multi_of_up_to_1000_writes(tree: InMemoryZooKeeper) -> None:
    """A deviation from Kafka 2.8 (README, "Deviations"): Kafka sends one multi (check + write) per
    write; here one ``check(/controller_epoch)`` fences each multi of up to 1,000 ops."""
    s = tree.open_session()
    for i in range(50, 2500):
        s.create(f"/n/{i}", b"x")
    b, rec = batcher(tree)
    result = b.run(sets(2500), 1)
    assert result.codes == [OK] * 2500
    assert [len(m) for m in rec.multis] == [1000, 1000, 503]  # 999 + check, 999 + check, 502 + check
    assert all(m[0] == (CHECK, "/controller_epoch", None, 1) for m in rec.multis)
    assert sum(1 for m in rec.multis for op in m if op[0] == CHECK) == 3


def test_unfenced_has_no_check(tree: InMemoryZooKeeper) -> None:
    b, rec = batcher(tree)
    b.run(sets(3), -1)
    assert rec.multis == [sets(3)]
    with pytest.raises(InvalidArgumentError):
        b.run(sets(1), -2)


def test_stale_epoch_raises_and_writes_nothing(tree: InMemoryZooKeeper) -> None:
    b, _ = batcher(tree)
    with pytest.raises(ControllerMovedError):
        b.run(sets(10), 0)
    read = tree.get("/n/3")
    assert read is not None and read[0] == b"x" and read[1].version == 0


def test_missing_epoch_znode_raises_its_error() -> None:
    t = InMemoryZooKeeper()
    t.open_session().create("/n", None)
    b, _ = batcher(t)
    with pytest.raises(NoNodeError, match="/controller_epoch"):
        b.run([(CREATE, "/n/a", None, PERSISTENT)], 0)


def test_conflicts_inside_a_batch_are_split_out(tree: InMemoryZooKeeper) -> None:
    s = tree.open_session()
    for i in (3, 17, 18, 40):
        s.set_data(f"/n/{i}", b"other")  # now version 1: our version-0 writes conflict
    ops = [*sets(50), (SET_DATA, "/n/missing", b"y", 0)]
    b, rec = batcher(tree)
    result = b.run(ops, 1)
    bad = {i for i, c in enumerate(result.codes) if c != OK}
    assert bad == {3, 17, 18, 40, 50}
    assert all(result.codes[i] == BADVERSION for i in (3, 17, 18, 40))
    assert result.codes[50] == NONODE
    for i in range(50):
        read = tree.get(f"/n/{i}")
        assert read is not None
        assert read[0] == (b"other" if i in (3, 17, 18, 40) else b"y")
        if i not in bad:
            assert result.values[i] == 1
    assert len(rec.multis) < 20  # innocent ops were resubmitted in batches, not one by one


def test_dense_failures_terminate_with_every_op_resolved(tree: InMemoryZooKeeper) -> None:
    b, rec = batcher(tree)
    result = b.run(sets(50, version=7), 1)
    assert result.codes == [BADVERSION] * 50
    assert len(rec.multis) <= 2 * 50


def test_byte_cap_splits_and_oversize_op_goes_alone(tree: InMemoryZooKeeper) -> None:
    big = b"z" * 3000
    ops = [(SET_DATA, f"/n/{i}", big, -1) for i in range(10)]
    b, rec = batcher(tree, max_batch_bytes=7000)
    result = b.run(ops, 1)
    assert result.codes == [OK] * 10
    assert all(sum(op_size(op) for op in m) <= 7000 for m in rec.multis)
    assert len(rec.multis) == 5
    assert split_batches([50_000, 10, 10], [0, 1, 2], 1024, 100) == [[0], [1, 2]]


def test_create_and_delete_results(tree: InMemoryZooKeeper) -> None:
    b, _ = batcher(tree)
    result = b.run(
        [(CREATE, "/n/new", b"1", PERSISTENT), (DELETE, "/n/0", None, -1), (CREATE, "/n/1", None, 0)], 1
    )
    assert result.codes[:2] == [OK, OK] and result.values[0] == "/n/new"
    err = result.error(2, "/n/1")
    assert err is not None and err.code == "NODEEXISTS" and "/n/1" in str(err)
    assert tree.get("/n/0") is None and tree.get("/n/new") is not None


# -- streamed ops --------------------------------------------------------------------------------


class Pulls:
    """A stream of ops that counts how many were taken."""

    def __init__(self, ops: list[Op]) -> None:
        self.ops = ops
        self.taken = 0

    def __iter__(self) -> Iterator[Op]:
        for op in self.ops:
            self.taken += 1
            yield op


class TakenAtEachMulti(Recording):
    """Records, as each multi goes out, how many ops the stream had given by then."""

    def __init__(self, inner: InMemorySession, stream: Pulls) -> None:
        super().__init__(inner)
        self.stream = stream
        self.taken: list[int] = []

    def iter_multi(self, multis: Iterable[Sequence[Op]]) -> Iterator[MultiOutcome]:
        for m in multis:
            self.taken.append(self.stream.taken)
            self.multis.append(list(m))
            yield from self.inner.iter_multi([m])


def test_a_stream_is_taken_a_batch_at_a_time_and_answered_in_input_order(tree: InMemoryZooKeeper) -> None:
    stream = Pulls(sets(50))
    rec = TakenAtEachMulti(tree.open_session(), stream)
    result = Batcher(rec, max_batch_ops=11).run(stream, 1)  # type: ignore[arg-type]
    assert result.codes == [OK] * 50 and result.values == [1] * 50
    assert [m[1:] for m in rec.multis] == [sets(50)[i : i + 10] for i in range(0, 50, 10)]
    # Each multi went out once its batch was full (one op more taken to know it), not after all 50.
    assert rec.taken == [11, 21, 31, 41, 50]


def test_an_empty_stream_calls_no_backend() -> None:
    class NoBackend:
        def iter_multi(self, multis: Iterable[Sequence[Op]]) -> Iterator[MultiOutcome]:
            raise AssertionError("called")

    result = Batcher(NoBackend()).run(iter(()), 1)  # type: ignore[arg-type]
    assert result.codes == [] and result.multis == 0


def test_failures_mid_stream_are_resubmitted_before_fresh_batches(tree: InMemoryZooKeeper) -> None:
    s = tree.open_session()
    s.set_data("/n/13", b"other")  # version 1: our version-0 write of /n/13 conflicts
    stream = Pulls(sets(40))
    rec = TakenAtEachMulti(tree.open_session(), stream)
    result = Batcher(rec, max_batch_ops=11).run(stream, 1)  # type: ignore[arg-type]
    assert [i for i, c in enumerate(result.codes) if c != OK] == [13]
    assert result.codes[13] == BADVERSION
    assert all(result.values[i] == 1 for i in range(40) if i != 13)
    paths = [[op[1] for op in m[1:]] for m in rec.multis]
    # The second batch (/n/10../n/19) fails at /n/13: /n/10../n/12 go back as one batch and
    # /n/14../n/19 in two halves, all before the third fresh batch (/n/20...).
    assert paths[2:5] == [
        ["/n/10", "/n/11", "/n/12"],
        ["/n/14", "/n/15", "/n/16"],
        ["/n/17", "/n/18", "/n/19"],
    ]
    assert paths[5][0] == "/n/20" and len(rec.multis) == 7
    for i in range(40):
        read = tree.get(f"/n/{i}")
        assert read is not None and read[0] == (b"other" if i == 13 else b"y")


def test_controller_moved_mid_stream_stops_the_stream_and_keeps_earlier_writes(
    tree: InMemoryZooKeeper,
) -> None:
    admin = tree.open_session()
    stream = Pulls(sets(50))

    def moving() -> Iterator[Op]:
        for i, op in enumerate(stream):
            if i == 25:  # another controller bumps the epoch while the third batch is being built
                admin.set_data("/controller_epoch", b"3")
            yield op

    rec = Recording(tree.open_session())
    with pytest.raises(ControllerMovedError):
        Batcher(rec, max_batch_ops=11).run(moving(), 1)  # type: ignore[arg-type]
    assert len(rec.multis) == 3  # two written, the third fenced off: nothing after it is sent
    assert stream.taken == 31  # the third batch and the op that closed it, no further
    for i in range(50):
        read = tree.get(f"/n/{i}")
        assert read is not None and read[0] == (b"y" if i < 20 else b"x")


def _recording_store(
    monkeypatch: pytest.MonkeyPatch, partitions: int, max_batch_ops: int = DEFAULT_MAX_BATCH_OPS
) -> tuple[Any, list[Any], list[int], list[tuple[int, Sequence[Op]]]]:
    """An in-memory store holding ``partitions`` states of topic ``t``, whose state encodings are
    counted (``encoded``) and whose multis are recorded with the count when each was taken."""
    from kafka_controller.domain.values import LeaderAndIsr, LeaderIsrAndControllerEpoch, TopicPartition
    from kafka_controller.dryrun.memory_store import InMemoryMetadataStore
    from kafka_controller.zk import store_partitions as store_module
    from kafka_controller.zk.codecs import encode_leader_and_isr as encode

    store = InMemoryMetadataStore(max_batch_ops=max_batch_ops)
    store.session.create("/brokers/topics/t", b"{}")
    tps = [TopicPartition("t", p) for p in range(partitions)]
    states = {tp: LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 0, (1, 2), 0), 1) for tp in tps}
    assert set(store.create_partition_states(states, -1).values()) == {None}
    encoded: list[int] = []
    multis: list[tuple[int, Sequence[Op]]] = []

    def counting(lai: LeaderAndIsr, controller_epoch: int) -> bytes:
        encoded.append(1)
        return encode(lai, controller_epoch)

    inner = store.session.iter_multi

    def recording(batches: Iterable[Sequence[Op]]) -> Iterator[MultiOutcome]:
        for m in batches:
            multis.append((len(encoded), m))
            yield from inner([m])

    monkeypatch.setattr(store_module, "encode_leader_and_isr", counting)
    monkeypatch.setattr(store.session, "iter_multi", recording)
    return store, tps, encoded, multis


def test_update_leader_and_isr_encodes_each_write_as_its_batch_goes_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A failover's 60,000 ISR writes are never all encoded at once: the store streams them."""
    from kafka_controller.domain.values import LeaderAndIsr

    store, tps, _, multis = _recording_store(monkeypatch, 50, max_batch_ops=11)
    # Distinct states (equal ones share one encoding: the next test).
    lais = {tp: LeaderAndIsr(2, 1 + tp.partition, (2,), 0) for tp in tps}
    result = store.update_leader_and_isr(lais, 1, -1)
    assert [taken for taken, _ in multis] == [12, 23, 34, 45, 50]  # 11 a multi, one more to close it
    assert list(result.finished) == tps and result.to_retry == []
    assert all(lai == LeaderAndIsr(2, 1 + tp.partition, (2,), 1) for tp, lai in result.finished.items())


@pytest.mark.parametrize("distinct", [3, 5000])
def test_update_leader_and_isr_writes_each_states_own_bytes(
    monkeypatch: pytest.MonkeyPatch, distinct: int
) -> None:
    """Equal states share one encoding (a few dozen distinct in a failover); past the memo's bound
    of distinct states every write still carries exactly its own state's bytes and path."""
    from kafka_controller.domain.values import LeaderAndIsr
    from kafka_controller.zk.codecs import encode_leader_and_isr as encode
    from kafka_controller.zk.paths import topic_partition_state_path

    store, tps, encoded, multis = _recording_store(monkeypatch, 6000)
    lais = {tp: LeaderAndIsr(1 + tp.partition % 3, tp.partition % distinct, (1, 2, 3), 0) for tp in tps}
    result = store.update_leader_and_isr(lais, 7, -1)
    written = [op for _, m in multis for op in m]
    assert [(op[1], op[2], op[3]) for op in written] == [
        (topic_partition_state_path(tp), encode(lai, 7), 0) for tp, lai in lais.items()
    ]
    assert len(encoded) == (3 if distinct == 3 else len(tps))
    assert result.finished == {tp: lai.with_zk_version(1) for tp, lai in lais.items()}
