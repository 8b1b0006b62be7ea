"""The pytest harness: chroot isolation, client factory, session expiry, tree deletion, wait_for."""

from __future__ import annotations

import re
import threading
import time

import pytest
from kazoo.client import KazooClient, KazooState

from kafka_controller.domain.errors import InvalidArgumentError
from kafka_controller.testing.zk_harness import (
    ZkClientFactory,
    delete_tree,
    expire_session,
    wait_for,
)
from kafka_controller.zk.embedded import EmbeddedZooKeeper


@pytest.mark.zk
@pytest.mark.parametrize("run", [1, 2])
def test_chroot_gives_each_test_an_empty_tree(
    run: int,
    zk_chroot: str,
    zk_connect: str,
    zk_client_factory: ZkClientFactory,
    zk_admin_client: KazooClient,
) -> None:
    # Both runs create the same path: the second would fail with NodeExists without isolation.
    assert re.fullmatch(r"/t/test_chroot_gives_each_test_an_empty_tree_\d_-\d+", zk_chroot)
    assert zk_connect.endswith(zk_chroot)
    client = zk_client_factory()
    assert client.get_children("/") == []
    client.create("/brokers/ids/1", f"run {run}".encode(), makepath=True)
    assert zk_admin_client.get(f"{zk_chroot}/brokers/ids/1")[0] == f"run {run}".encode()
    assert zk_admin_client.exists("/brokers/ids/1") is None


@pytest.mark.zk
def test_factory_builds_started_clients_and_closes_them(
    zk_connect: str, zk_chroot: str, zk_admin_client: KazooClient
) -> None:
    factory = ZkClientFactory(zk_connect)
    first, second = factory(), factory(timeout=2.0)
    assert first.connected and second.connected
    assert first.client_id[0] != second.client_id[0]
    first.create("/eph1", ephemeral=True)
    second.create("/eph2", ephemeral=True)
    factory.close_all()
    assert not first.connected and not second.connected
    assert factory.clients == []
    # Closing ends the sessions on the server, so their ephemerals are gone at once.
    assert zk_admin_client.get_children(zk_chroot) == []


@pytest.mark.zk
def test_expire_session_really_expires(
    zk_server: EmbeddedZooKeeper, zk_client_factory: ZkClientFactory
) -> None:
    client = zk_client_factory()
    observer = zk_client_factory()
    client.create("/owned", b"", ephemeral=True)
    old_session = client.client_id[0]
    states: list[KazooState] = []
    client.add_listener(states.append)

    expire_session(client, zk_server, wait_reconnected=True)

    assert KazooState.LOST in states
    observer.sync("/")
    assert observer.exists("/owned") is None
    assert client.connected and client.client_id[0] != old_session
    client.create("/owned", b"", ephemeral=True)  # usable again, on its new session
    stat = observer.exists("/owned")
    assert stat is not None and stat.ephemeralOwner == client.client_id[0]


@pytest.mark.zk
def test_expire_session_returns_on_lost_without_waiting_for_reconnect(
    zk_server: EmbeddedZooKeeper, zk_client_factory: ZkClientFactory
) -> None:
    client = zk_client_factory()
    lost = threading.Event()
    client.add_listener(lambda state: lost.set() if state == KazooState.LOST else None)
    expire_session(client, zk_server)
    assert lost.is_set()


@pytest.mark.zk
def test_expire_session_refuses_a_disconnected_client(
    zk_server: EmbeddedZooKeeper, zk_client_factory: ZkClientFactory
) -> None:
    client = zk_client_factory()
    client.stop()
    with pytest.raises(InvalidArgumentError, match="not connected"):
        expire_session(client, zk_server)


@pytest.mark.zk
def test_delete_tree_removes_a_deep_and_wide_tree(zk_chroot: str, zk_admin_client: KazooClient) -> None:
    root = f"{zk_chroot}/tree"
    tx = zk_admin_client.transaction()
    tx.create(root)
    for i in range(20):
        tx.create(f"{root}/t{i}")
        for p in range(15):
            tx.create(f"{root}/t{i}/p{p}", b"x" * 50)
    assert all(isinstance(r, str) for r in tx.commit())
    delete_tree(zk_admin_client, root)
    assert zk_admin_client.exists(root) is None
    assert zk_admin_client.exists(zk_chroot) is not None
    delete_tree(zk_admin_client, root)  # a missing tree is not an error


@pytest.mark.zk
def test_delete_tree_also_removes_live_ephemerals(
    zk_chroot: str, zk_client_factory: ZkClientFactory, zk_admin_client: KazooClient
) -> None:
    holder = zk_client_factory()
    holder.create("/a/b/held", ephemeral=True, makepath=True)
    holder.create("/a/c/d", makepath=True)
    delete_tree(zk_admin_client, zk_chroot + "/a")
    # ZooKeeper lets any session delete another's ephemeral: a test's leftovers never block cleanup.
    assert zk_admin_client.exists(zk_chroot + "/a") is None
    assert holder.connected and holder.get_children("/") == []


def test_wait_for_polls_until_true() -> None:
    start = time.monotonic()
    assert wait_for(lambda: time.monotonic() - start > 0.05, timeout=5.0)


def test_wait_for_raises_after_its_deadline() -> None:
    calls = []
    with pytest.raises(TimeoutError, match=r"never within 0\.1s"):
        wait_for(lambda: calls.append(1), timeout=0.1, message="never")
    assert len(calls) >= 2
    assert wait_for(lambda: False, timeout=0.05, raise_on_timeout=False) is False
