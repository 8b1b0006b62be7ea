"""The in-memory ZooKeeper keeps the ZooKeeper semantics the store relies on."""

from __future__ import annotations

import pytest

from kafka_controller.domain.errors import (
    MetadataStoreError,
    NodeExistsError,
    NoNodeError,
    StoreUnavailableError,
)
from kafka_controller.dryrun.memory_zk import InMemoryZooKeeper
from kafka_controller.zk.backend import (
    CREATE,
    EPHEMERAL,
    NODEEXISTS,
    PERSISTENT,
    PERSISTENT_SEQUENTIAL,
    SET_DATA,
)


def test_sequential_names_use_ten_digits_from_the_parent_cversion() -> None:
    s = InMemoryZooKeeper().open_session()
    s.create("/q", None)
    first, _ = s.create("/q/item_", b"a", PERSISTENT_SEQUENTIAL)
    s.create("/q/other", None)
    third, _ = s.create("/q/item_", b"c", PERSISTENT_SEQUENTIAL)
    assert (first, third) == ("/q/item_0000000000", "/q/item_0000000002")


def test_zxids_are_global_and_versions_per_znode() -> None:
    s = InMemoryZooKeeper().open_session()
    _, a = s.create("/a", b"1")
    _, b = s.create("/b", b"1")
    assert b.czxid > a.czxid
    stat = s.set_data("/a", b"2")
    assert stat.version == 1 and stat.mzxid > b.czxid and stat.czxid == a.czxid
    with pytest.raises(MetadataStoreError) as info:
        s.set_data("/a", b"3", version=0)
    assert info.value.code == "BADVERSION"


def test_multi_is_atomic_and_reports_the_failing_op() -> None:
    s = InMemoryZooKeeper().open_session()
    s.create("/a", b"1")
    outcome = s.multi(
        [[(SET_DATA, "/a", b"2", -1), (CREATE, "/a", None, PERSISTENT), (CREATE, "/c", None, 0)]]
    )[0]
    assert not outcome.ok and (outcome.failed_index, outcome.error_code) == (1, NODEEXISTS)
    data, stat = s.get_data_many(["/a"])[0][1:]
    assert data == b"1" and stat is not None and stat.version == 0
    assert s.exists("/c") is None


def test_rolled_back_multi_keeps_watches_armed() -> None:
    tree = InMemoryZooKeeper()
    s = tree.open_session()
    s.create("/a", b"1")
    fired: list[tuple[str, str]] = []
    s.exists("/a", lambda t, p: fired.append((t, p)))
    s.multi([[(SET_DATA, "/a", b"2", -1), (CREATE, "/a", None, 0)]])
    assert fired == []
    s.set_data("/a", b"3")
    assert fired == [("CHANGED", "/a")]
    s.set_data("/a", b"4")
    assert fired == [("CHANGED", "/a")]  # one-shot


def test_ephemerals_go_with_their_session_and_fire_watches() -> None:
    tree = InMemoryZooKeeper()
    owner, watcher = tree.open_session(), tree.open_session()
    owner.create("/e", b"x", EPHEMERAL)
    with pytest.raises(MetadataStoreError) as info:
        owner.create("/e/child", None)
    assert info.value.code == "NOCHILDRENFOREPHEMERALS"
    events: list[str] = []
    watcher.exists("/e", lambda t, p: events.append(t))
    states: list[str] = []
    owner.add_session_listener(states.append)
    old = owner.session_id
    tree.expire_session(owner)
    assert watcher.exists("/e") is None
    assert events == ["DELETED"]
    assert states == ["EXPIRED", "CONNECTED"] and owner.session_id != old


def test_disconnected_session_fails_fast_and_drops_watches() -> None:
    tree = InMemoryZooKeeper()
    s = tree.open_session()
    s.create("/a", b"1")
    seen: list[str] = []
    s.exists("/a", lambda t, p: seen.append(t))
    s.disconnect()
    assert seen == ["NONE"]
    with pytest.raises(StoreUnavailableError):
        s.set_data("/a", b"2")
    with pytest.raises(StoreUnavailableError):
        s.get_data_many(["/a"])
    s.reconnect()
    s.set_data("/a", b"2")
    assert seen == ["NONE"]  # the dropped watch did not fire


def test_errors_name_the_path() -> None:
    s = InMemoryZooKeeper().open_session()
    with pytest.raises(NoNodeError, match="/x/y"):
        s.create("/x/y", None)
    s.create("/x", None)
    with pytest.raises(NodeExistsError, match="/x"):
        s.create("/x", None)
    s.create("/x/y", None)
    with pytest.raises(MetadataStoreError) as info:
        s.delete("/x")
    assert info.value.code == "NOTEMPTY"
