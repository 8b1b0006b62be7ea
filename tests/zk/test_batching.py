"""Fenced batching over the in-memory tree: caps, result splitting, resubmission, fencing."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from kafka_controller.domain.errors import ControllerMovedError, InvalidArgumentError, NoNodeError
from kafka_controller.testing.memory_zk import InMemorySession, InMemoryZooKeeper
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
from kafka_controller.zk.batching import Batcher, op_size, split_batches


class Recording:
    """Wraps a backend and records every multi it is asked to run."""

    def __init__(self, inner: InMemorySession) -> None:
        self.inner = inner
        self.multis: list[list[Op]] = []

    def multi(self, multis: Sequence[Sequence[Op]]) -> list[MultiOutcome]:
        self.multis.extend(list(m) for m in multis)
        return self.inner.multi(multis)


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
