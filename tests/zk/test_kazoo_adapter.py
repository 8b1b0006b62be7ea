"""The kazoo adapter against a real ZooKeeper: multi-read wire format and its fallback, chroot
creation, digest ACLs, connection failures, and error translation."""

from __future__ import annotations

import queue
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from kazoo.exceptions import ConnectionLoss, NoAuthError
from kazoo.exceptions import NoNodeError as KazooNoNode

from kafka_controller.domain.errors import (
    BadVersionError,
    MetadataStoreError,
    NodeExistsError,
    NoNodeError,
    StoreUnavailableError,
)
from kafka_controller.domain.values import (
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
    TopicPartition,
)
from kafka_controller.zk import kazoo_reads, multiread
from kafka_controller.zk.backend import (
    CREATE,
    NONODE,
    OK,
    PERSISTENT,
    UNIMPLEMENTED,
    data_version_columns,
    error_for_code,
)
from kafka_controller.zk.kazoo_backend import KazooMetadataStore
from kafka_controller.zk.kazoo_reads import translate
from kafka_controller.zk.multiread import MultiError, first_failure
from kafka_controller.zk.security import ZkClientConfig

TP = TopicPartition


def config(connect: str, **kwargs: Any) -> ZkClientConfig:
    return ZkClientConfig(connect, session_timeout_ms=6000, connection_timeout_ms=20000, **kwargs)


@pytest.fixture
def stores() -> Iterator[list[KazooMetadataStore]]:
    made: list[KazooMetadataStore] = []
    yield made
    for s in made:
        s.close()


def open_store(stores: list[KazooMetadataStore], cfg: ZkClientConfig) -> KazooMetadataStore:
    s = KazooMetadataStore(cfg)
    stores.append(s)
    return s


# -- pure helpers ------------------------------------------------------------------------------------


def test_first_failure_skips_rollbacks_like_the_java_client() -> None:
    assert first_failure([1, None, "/a"]) is None
    assert first_failure([MultiError(0), MultiError(-103), MultiError(-2)]) == (1, -103)
    assert first_failure([MultiError(-2), MultiError(-2)]) == (0, -2)


def test_translate_maps_kazoo_errors_to_ours() -> None:
    assert isinstance(translate(ConnectionLoss()), StoreUnavailableError)
    assert isinstance(translate(KazooNoNode(), "/x"), NoNodeError)
    assert translate(KazooNoNode(), "/x").path == "/x"
    assert translate(NoAuthError(), "/x").code == "NOAUTH"
    assert type(translate(ValueError("boom"))) is MetadataStoreError


def test_unreachable_server_is_one_clear_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens on it once closed
    with pytest.raises(StoreUnavailableError, match=f"127.0.0.1:{port}") as info:
        KazooMetadataStore(ZkClientConfig(f"127.0.0.1:{port}", connection_timeout_ms=500))
    assert "\n" not in str(info.value)


# -- real server -------------------------------------------------------------------------------------


def seed(store: KazooMetadataStore, n: int) -> list[TopicPartition]:
    epoch, zkv = store.register_controller_and_increment_controller_epoch(1)
    store.create_topic("t", {p: ReplicaAssignment.of([1, 2]) for p in range(n)})
    tps = [TP("t", p) for p in range(n)]
    states = {tp: LeaderIsrAndControllerEpoch(LeaderAndIsr(1, tp.partition, (1, 2), 0), epoch) for tp in tps}
    store.create_partition_states(states, zkv)
    return tps


@pytest.mark.zk
def test_multi_read_matches_pipelined_reads(zk_connect: str, stores: list[KazooMetadataStore]) -> None:
    fast = open_store(stores, config(zk_connect, read_chunk=7))
    slow = open_store(stores, config(zk_connect, multi_read=False))
    assert fast.backend.uses_multi_read and not slow.backend.uses_multi_read
    tps = seed(fast, 40)
    paths = [f"/brokers/topics/t/partitions/{p}/state" for p in range(42)]  # two missing
    a, b = fast.backend.get_data_many(paths), slow.backend.get_data_many(paths)
    assert a == b
    assert [code for code, _, _ in a] == [OK] * 40 + [NONODE] * 2
    assert a[5][2] is not None and a[5][2].version == 0 and b'"leader_epoch":5' in a[5][1]  # type: ignore[operator]
    kids = ["/brokers/topics/t/partitions", "/nope", "/brokers/topics"]
    assert fast.backend.get_children_many(kids) == slow.backend.get_children_many(kids)
    assert fast.backend.get_children_many(kids)[2] == (OK, ["t"])
    assert fast.get_partition_states(tps) == slow.get_partition_states(tps)


@pytest.mark.zk
def test_chunked_reads_come_in_multi_read_chunks_in_order(
    zk_connect: str, stores: list[KazooMetadataStore]
) -> None:
    store = open_store(stores, config(zk_connect, read_chunk=7, max_in_flight=2))
    tps = seed(store, 40)
    paths = [f"/brokers/topics/t/partitions/{p}/state" for p in range(42)]  # two missing
    chunks = store.backend.iter_data_many(paths)
    first = next(chunks)  # handed over while later chunks are still to come
    assert len(first) == 7 and first == store.backend.get_data_many(paths[:7])
    rest = list(chunks)
    assert [len(c) for c in rest] == [7, 7, 7, 7, 7]
    assert [r for c in [first, *rest] for r in c] == store.backend.get_data_many(paths)
    assert list(store.backend.iter_data_many([])) == []
    reads = store.get_partition_states([*tps, TP("t", 40)])
    assert list(reads) == [*tps, TP("t", 40)] and reads[TP("t", 40)] is None
    assert [r.leader_and_isr.leader_epoch for r in list(reads.values())[:40]] == list(range(40))  # type: ignore[union-attr]


@pytest.mark.zk
def test_data_version_columns_match_the_full_reads(zk_connect: str, stores: list[KazooMetadataStore]) -> None:
    fast = open_store(stores, config(zk_connect, read_chunk=7))
    slow = open_store(stores, config(zk_connect, multi_read=False))
    seed(fast, 12)
    paths = [f"/brokers/topics/t/partitions/{p}/state" for p in range(14)]  # two missing
    chunks = list(fast.backend.iter_data_versions_many(paths))
    assert [len(c[0]) for c in chunks] == [7, 7]
    codes, datas, versions = ([x for c in chunks for x in c[i]] for i in range(3))
    assert (codes, datas, versions) == data_version_columns(fast.backend.get_data_many(paths))
    assert codes == [OK] * 12 + [NONODE] * 2 and versions == [0] * 12 + [-1] * 2
    assert list(slow.backend.iter_data_versions_many(paths)) == [(codes, datas, versions)]
    assert list(fast.backend.iter_data_versions_many([])) == []


@pytest.mark.zk
def test_many_watched_reads_arm_their_watches_as_of_the_read(
    zk_connect: str, stores: list[KazooMetadataStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A watched read of many znodes is multi-reads + SetWatches: a change made after the read but
    before the watches are armed still fires (at once), a deletion fires DELETED, an unchanged
    znode stays silent until it changes, and a missing znode is not watched."""
    store = open_store(stores, config(zk_connect))
    admin = open_store(stores, config(zk_connect))
    store.backend.create("/w", b"")
    paths = [f"/w/n{i}" for i in range(20)]
    admin.batcher.run([(CREATE, p, b"0", PERSISTENT) for p in paths], -1)
    made = []

    def set_watches(*args: Any) -> multiread.SetWatches:
        admin.backend.set_data(paths[3], b"changed between the read and the arming")
        admin.backend.delete(paths[5])
        made.append(multiread.SetWatches(*args))
        return made[-1]

    monkeypatch.setattr(kazoo_reads, "SetWatches", set_watches)
    events: queue.Queue[tuple[str, str]] = queue.Queue()
    reads = store.backend.get_data_many([*paths, "/w/missing"], lambda kind, path: events.put((kind, path)))
    assert len(made) == 1 and made[0].paths == paths  # one SetWatches, on the znodes found
    assert [r[1] for r in reads] == [b"0"] * 20 + [None] and reads[20][0] == NONODE
    admin.backend.create("/w/missing", b"")  # unwatched: would fire before the change below
    admin.backend.set_data(paths[7], b"changed after the arming")
    fired = [events.get(timeout=10) for _ in range(3)]
    assert sorted(fired) == [("CHANGED", paths[3]), ("CHANGED", paths[7]), ("DELETED", paths[5])]
    assert fired[-1] == ("CHANGED", paths[7])  # the events the arming fired came first, and no others
    assert events.empty()


@pytest.mark.zk
def test_many_watched_children_reads_arm_their_watches_as_of_the_read(
    zk_connect: str, stores: list[KazooMetadataStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same for child watches (compared on ``pzxid``): a child added between the read and the
    arming fires CHILD at once, one added after fires when it comes, the others stay silent."""
    store = open_store(stores, config(zk_connect))
    admin = open_store(stores, config(zk_connect))
    store.backend.create("/c", b"")
    paths = [f"/c/p{i}" for i in range(20)]
    admin.batcher.run([(CREATE, p, b"", PERSISTENT) for p in paths], -1)
    made = []

    def set_watches(*args: Any) -> multiread.SetWatches:
        admin.backend.create(f"{paths[3]}/between", b"")
        made.append(multiread.SetWatches(*args))
        return made[-1]

    monkeypatch.setattr(kazoo_reads, "SetWatches", set_watches)
    events: queue.Queue[tuple[str, str]] = queue.Queue()
    reads = store.backend.get_children_many(paths, lambda kind, path: events.put((kind, path)))
    assert len(made) == 1 and reads == [(OK, [])] * 20
    admin.backend.create(f"{paths[7]}/after", b"")
    assert [events.get(timeout=10) for _ in range(2)] == [("CHILD", paths[3]), ("CHILD", paths[7])]
    assert events.empty()


@pytest.mark.zk
def test_server_without_multi_read_falls_back(
    zk_connect: str, stores: list[KazooMetadataStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(multiread.MultiRead, "type", 99)  # an opcode the server does not know
    store = open_store(stores, config(zk_connect))
    assert not store.backend.uses_multi_read
    tps = seed(store, 5)
    reads = store.get_partition_states(tps)
    assert [r.leader_and_isr.leader_epoch for r in reads.values()] == [0, 1, 2, 3, 4]  # type: ignore[union-attr]


@pytest.mark.zk
def test_streamed_reads_take_their_paths_as_the_window_frees_up(
    zk_connect: str, stores: list[KazooMetadataStore]
) -> None:
    store = open_store(stores, config(zk_connect, read_chunk=7, max_in_flight=2))
    seed(store, 40)
    paths = [f"/brokers/topics/t/partitions/{p}/state" for p in range(42)]  # two missing
    taken: list[str] = []

    def stream() -> Iterator[str]:
        for path in paths:
            taken.append(path)
            yield path

    replies = store.backend.iter_data_versions_streamed(stream())
    first = next(replies)
    assert len(first[0]) == 7
    assert len(taken) <= 3 * 7  # the window's 2 chunks and the one sent as the first came back
    assert [first, *replies] == list(store.backend.iter_data_versions_many(paths))
    assert taken == paths
    assert list(store.backend.iter_data_versions_streamed(iter([]))) == []


@pytest.mark.zk
def test_a_streamed_read_rejected_as_a_multi_read_reads_again_what_it_sent(
    zk_connect: str, stores: list[KazooMetadataStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server that rejects multi-read after the probe (an ensemble member of an older version)
    answers UNIMPLEMENTED to the first one; simulated here once two chunks went out, since a real
    one also drops the connection. The chunks already taken from the stream are read again."""
    store = open_store(stores, config(zk_connect, read_chunk=7, max_in_flight=2))
    seed(store, 40)
    paths = [f"/brokers/topics/t/partitions/{p}/state" for p in range(42)]
    expected = list(store.backend.iter_data_versions_many(paths))

    def rejecting(requests: Iterator[Any], *args: Any) -> Iterator[Any]:
        next(requests), next(requests)
        raise error_for_code(UNIMPLEMENTED, None)
        yield  # a generator, as the real one

    monkeypatch.setattr(kazoo_reads, "pipelined", rejecting)
    assert store.backend.uses_multi_read
    replies = list(store.backend.iter_data_versions_streamed(iter(paths)))
    assert not store.backend.uses_multi_read
    assert [len(codes) for codes, _, _ in replies] == [7] * 6
    assert replies == expected


@pytest.mark.zk
def test_chroot_and_top_level_paths_are_created(
    zk_connect: str, zk_admin_client: Any, zk_chroot: str, stores: list[KazooMetadataStore]
) -> None:
    store = open_store(stores, config(zk_connect + "/deep/er"))
    assert zk_admin_client.exists(zk_chroot + "/deep/er/brokers/ids") is not None
    assert zk_admin_client.exists(zk_chroot + "/deep/er/config/topics") is not None
    store.create_topic("x", {0: ReplicaAssignment.of([1])})
    assert zk_admin_client.exists(zk_chroot + "/deep/er/brokers/topics/x") is not None
    assert store.get_all_topics() == {"x"}


@pytest.mark.zk
def test_digest_acls_protect_what_we_create(
    zk_connect: str, zk_client_factory: Any, stores: list[KazooMetadataStore]
) -> None:
    secure = open_store(stores, config(zk_connect + "/secure", digest=("kafka", "s3cret")))
    epoch, zkv = secure.register_controller_and_increment_controller_epoch(1)
    secure.create_topic("t", {0: ReplicaAssignment.of([1])})
    secure.create_partition_states(
        {TP("t", 0): LeaderIsrAndControllerEpoch(LeaderAndIsr.initial(1, [1]), epoch)}, zkv
    )
    secure.set_or_create_entity_config("users", "alice", {"k": "v"})
    anonymous = zk_client_factory()
    state = "/secure/brokers/topics/t/partitions/0/state"
    data, _ = anonymous.get(state)  # world-readable, as Kafka's zookeeper.set.acl does
    assert b'"leader":1' in data
    for attempt in (
        lambda: anonymous.set(state, b"{}"),
        lambda: anonymous.delete("/secure/brokers/topics/t/partitions/0/state"),
        lambda: anonymous.create("/secure/brokers/topics/t/partitions/0/state/x"),
        lambda: anonymous.get("/secure/config/users/alice"),  # sensitive: no world read
    ):
        with pytest.raises(NoAuthError):
            attempt()
    acls, _ = anonymous.get_acls(state)
    assert {(a.id.scheme, a.perms) for a in acls} == {("digest", 31), ("world", 1)}
    other = zk_client_factory(auth_data=[("digest", "mallory:guess")])
    with pytest.raises(NoAuthError):
        other.set(state, b"{}")
    # the owner still writes, through the store
    result = secure.update_leader_and_isr({TP("t", 0): LeaderAndIsr(1, 1, (1,), 0)}, epoch, zkv)
    assert result.finished == {TP("t", 0): LeaderAndIsr(1, 1, (1,), 1)}


@pytest.mark.zk
def test_single_op_errors_are_translated(zk_connect: str, stores: list[KazooMetadataStore]) -> None:
    store = open_store(stores, config(zk_connect))
    backend = store.backend
    with pytest.raises(NoNodeError):
        backend.set_data("/missing", b"x")
    backend.create("/a", b"1")
    with pytest.raises(NodeExistsError):
        backend.create("/a", b"1")
    with pytest.raises(BadVersionError):
        backend.delete("/a", version=4)
