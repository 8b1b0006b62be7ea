"""pytest fixtures and fault helpers over one real ZooKeeper server per test session.

One JVM per session (per xdist worker) keeps the real-ZooKeeper suites fast; a fresh chroot per
test keeps them independent. Use it from a ``conftest.py``::

    pytest_plugins = ["kafka_controller.testing.zk_harness"]         # rootdir conftest only
    from kafka_controller.testing.zk_harness import *  # noqa: F403   # any other conftest

Faults are real, not simulated: ``restart_zk_server`` restarts the JVM on the same port and data
(sessions survive, as in ZooKeeper), ``zk_server.kill()`` is a crash, and ``expire_session`` makes
the server expire a client's session so that its ephemerals go and it sees ``KazooState.LOST``.

``zk_ensemble`` is a 3-server quorum (one per session, all members serving again at the start of
each test) for quorum faults: ``member(i).kill()``/``start()``, ``kill_leader()``,
``lose_quorum()`` then ``start_members(...)``; ``zk_ensemble_connect`` is its connect string,
every server listed, with a fresh chroot.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import re
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException, NodeExistsError, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError

from kafka_controller.domain.errors import InvalidArgumentError
from kafka_controller.zk.embedded import EmbeddedZooKeeper
from kafka_controller.zk.ensemble import ZooKeeperEnsemble
from kafka_controller.zk.java import EmbeddedZooKeeperError

__all__ = [
    "ZkClientFactory",
    "delete_tree",
    "expire_session",
    "restart_zk_server",
    "wait_for",
    "zk_admin_client",
    "zk_chroot",
    "zk_client_factory",
    "zk_connect",
    "zk_ensemble",
    "zk_ensemble_connect",
    "zk_ensemble_session",
    "zk_server",
]

log = logging.getLogger(__name__)

#: Session timeout (seconds) of the clients the factory builds: short, so that lapsing sessions
#: are quick to test, yet long enough for a reconnect: a restarted server gives restored sessions a
#: fresh timeout, so a restart is a disconnection and not an expiry.
DEFAULT_SESSION_TIMEOUT = 5.0
#: Reconnect quickly after a restart instead of kazoo's default back-off up to an hour.
FAST_RECONNECT: dict[str, Any] = {"max_tries": -1, "delay": 0.05, "backoff": 1.5, "max_delay": 0.5}
_CHROOT_ROOT = "/t"
_TX_BYTES = 256 * 1024
_counter = itertools.count(1)


class _Shared:
    server: EmbeddedZooKeeper | None = None
    users = 0


_shared = _Shared()


# -- fixtures -------------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def zk_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedZooKeeper]:
    """One real ZooKeeper server for the test session, started on first use, stopped at the end."""
    # Each conftest that star-imports this module registers its own copy of the fixture; they
    # share one server (reference-counted) so that a test run starts one JVM, not one per folder.
    server = _shared.server
    if server is None:
        server = EmbeddedZooKeeper(data_dir=tmp_path_factory.mktemp("zookeeper"))
        server.start(timeout=60.0)
        _shared.server = server
    _shared.users += 1
    try:
        yield server
    finally:
        _shared.users -= 1
        if _shared.users == 0:
            _shared.server = None
            server.close()


@pytest.fixture(scope="session")
def zk_admin_client(zk_server: EmbeddedZooKeeper) -> Iterator[KazooClient]:
    """A session-wide client on the server's root (no chroot), for set-up and inspection."""
    client = KazooClient(
        hosts=zk_server.connect_string,
        timeout=30.0,
        connection_retry=dict(FAST_RECONNECT),
        command_retry={"max_tries": -1, "delay": 0.05, "max_delay": 0.5, "deadline": 30.0},
    )
    client.start(timeout=30.0)
    yield client
    with contextlib.suppress(Exception):
        client.stop()
    client.close()


@pytest.fixture
def zk_chroot(
    request: pytest.FixtureRequest, zk_server: EmbeddedZooKeeper, zk_admin_client: KazooClient
) -> Iterator[str]:
    """A fresh, empty chroot path ``/t/<test>-<n>`` for this test, deleted afterwards."""
    if not zk_server.is_running():  # an earlier test crashed the shared server and left it down
        zk_server.start()
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)[:80]
    while True:
        path = f"{_CHROOT_ROOT}/{slug}-{next(_counter)}"
        try:
            zk_admin_client.retry(zk_admin_client.create, path, makepath=True)
            break
        except NodeExistsError:
            continue
    yield path
    delete_tree(zk_admin_client, path)


@pytest.fixture
def zk_connect(zk_server: EmbeddedZooKeeper, zk_chroot: str) -> str:
    """Connect string with this test's chroot: clients on it see an empty tree."""
    return zk_server.connect_string + zk_chroot


@pytest.fixture
def zk_client_factory(zk_connect: str) -> Iterator[ZkClientFactory]:
    """Call it to get started KazooClients on ``zk_connect``; all are closed at teardown."""
    factory = ZkClientFactory(zk_connect)
    yield factory
    factory.close_all()


@pytest.fixture(scope="session")
def zk_ensemble_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperEnsemble]:
    """A 3-server ensemble for the session (per xdist worker); use ``zk_ensemble`` in tests."""
    ensemble = ZooKeeperEnsemble(3, data_dir=tmp_path_factory.mktemp("zk-ensemble"))
    try:
        ensemble.start(timeout=90.0)
        yield ensemble
    finally:
        ensemble.close()


@pytest.fixture
def zk_ensemble(zk_ensemble_session: ZooKeeperEnsemble) -> ZooKeeperEnsemble:
    """The session's ensemble with every member up and serving (an earlier test's faults healed)."""
    zk_ensemble_session.start(timeout=90.0)
    zk_ensemble_session.wait_quorum(timeout=60.0)
    return zk_ensemble_session


@pytest.fixture
def zk_ensemble_connect(request: pytest.FixtureRequest, zk_ensemble: ZooKeeperEnsemble) -> Iterator[str]:
    """The ensemble's connect string (all servers) with a fresh chroot for this test."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)[:80]
    path = f"{_CHROOT_ROOT}/{slug}-{next(_counter)}"
    client = KazooClient(
        hosts=zk_ensemble.connect_string, timeout=30.0, connection_retry=dict(FAST_RECONNECT)
    )
    client.start(timeout=30.0)
    try:
        client.retry(client.ensure_path, path)
        yield zk_ensemble.connect_string + path
        zk_ensemble.start(timeout=90.0)  # a test that left the quorum down: bring it back to clean up
        delete_tree(client, path)
    finally:
        with contextlib.suppress(Exception):
            client.stop()
        client.close()


class ZkClientFactory:
    """Builds started ``KazooClient``s on one connect string and remembers them for ``close_all``."""

    def __init__(self, hosts: str) -> None:
        self.hosts = hosts
        self.clients: list[KazooClient] = []

    def __call__(
        self, *, timeout: float = DEFAULT_SESSION_TIMEOUT, start_timeout: float = 15.0, **kwargs: Any
    ) -> KazooClient:
        """A started client; ``timeout`` is the session timeout, ``kwargs`` go to KazooClient."""
        kwargs.setdefault("connection_retry", dict(FAST_RECONNECT))
        client = KazooClient(hosts=self.hosts, timeout=timeout, **kwargs)
        self.clients.append(client)
        client.start(timeout=start_timeout)
        return client

    def close_all(self) -> None:
        for client in reversed(self.clients):
            with contextlib.suppress(Exception):
                client.stop()
            with contextlib.suppress(Exception):
                client.close()
        self.clients.clear()


# -- fault helpers --------------------------------------------------------------------------------
def restart_zk_server(zk_server: EmbeddedZooKeeper, timeout: float = 30.0) -> None:
    """Restart the server on the same port and data; returns once it serves again."""
    zk_server.restart(timeout=timeout)


def expire_session(
    client: KazooClient,
    zk_server: EmbeddedZooKeeper,
    timeout: float = 30.0,
    *,
    wait_reconnected: bool = False,
) -> None:
    """Make the server expire ``client``'s session; return once the client has seen LOST.

    The standard trick: a second connection attaches to the same session (id and password) and
    closes it, so the server ends the session, deletes its ephemerals, and the client learns of the
    expiry when it reconnects. If the client re-attaches before the close goes through, the close
    misses; so the trick is repeated until the client reports LOST or has a new session. With
    ``wait_reconnected`` it also waits until the client is connected again (on a new session).
    """
    client_id = client.client_id
    if client_id is None:
        raise InvalidArgumentError("expire_session: the client is not connected")
    old_session = client_id[0]
    lost = threading.Event()

    def listener(state: KazooState) -> None:
        if state == KazooState.LOST:
            lost.set()

    client.add_listener(listener)
    deadline = time.monotonic() + timeout
    try:
        while not (lost.is_set() or _on_new_session(client, old_session)):
            _close_session(zk_server.connect_string, client_id, deadline)
            wait_for(
                lambda: lost.is_set() or _on_new_session(client, old_session),
                timeout=min(3.0, max(0.0, deadline - time.monotonic())),
                raise_on_timeout=False,
            )
            if time.monotonic() >= deadline and not lost.is_set():
                raise EmbeddedZooKeeperError(f"session 0x{old_session:x} was not expired within {timeout:g}s")
        if wait_reconnected:
            wait_for(
                lambda: _on_new_session(client, old_session),
                timeout=max(0.0, deadline - time.monotonic()),
                message=f"client did not reconnect after expiry of session 0x{old_session:x}",
            )
    finally:
        client.remove_listener(listener)


def wait_for(
    predicate: Callable[[], object],
    timeout: float = 10.0,
    interval: float = 0.02,
    *,
    message: str = "condition not met",
    raise_on_timeout: bool = True,
) -> bool:
    """Poll ``predicate`` until it is truthy or ``timeout`` passes (then raise ``TimeoutError``)."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            if raise_on_timeout:
                raise TimeoutError(f"{message} within {timeout:g}s")
            return False
        time.sleep(interval)


def delete_tree(client: KazooClient, root: str) -> None:
    """Delete ``root`` and everything under it, batched: pipelined listing, multi deletes.

    Live ephemerals go too (ZooKeeper lets any session delete them). Best effort: a node created
    under the tree while it is being deleted is left behind, with a warning.
    """
    levels: list[list[str]] = []
    frontier = [root]
    try:
        while frontier:
            levels.append(frontier)
            pending = [(p, client.get_children_async(p)) for p in frontier]
            frontier = []
            for parent, result in pending:
                with contextlib.suppress(NoNodeError):
                    frontier += [f"{parent}/{child}" for child in result.get(timeout=30.0)]
        for level in reversed(levels):
            for chunk in _chunks(level):
                _delete_chunk(client, chunk)
    except (KazooException, KazooTimeoutError) as e:
        log.warning("could not delete %s: %r", root, e)


# -- internals ------------------------------------------------------------------------------------
def _on_new_session(client: KazooClient, old_session: int) -> bool:
    client_id = client.client_id
    return client_id is not None and client_id[0] != old_session


def _close_session(hosts: str, client_id: tuple[int, bytes], deadline: float) -> None:
    """Attach to the session from a second connection and close it there."""
    intruder = KazooClient(hosts=hosts, client_id=client_id, connection_retry=dict(FAST_RECONNECT))
    try:
        intruder.start(timeout=max(1.0, min(10.0, deadline - time.monotonic())))
        intruder.stop()
    except (KazooException, KazooTimeoutError) as e:  # the client re-attached first: try again
        log.debug("closing session 0x%x missed: %r", client_id[0], e)
    finally:
        with contextlib.suppress(Exception):
            intruder.stop()
        intruder.close()


def _chunks(paths: list[str]) -> Iterator[list[str]]:
    chunk: list[str] = []
    size = 0
    for p in paths:
        if chunk and size + len(p) + 16 > _TX_BYTES:
            yield chunk
            chunk, size = [], 0
        chunk.append(p)
        size += len(p) + 16
    if chunk:
        yield chunk


def _delete_chunk(client: KazooClient, paths: list[str]) -> None:
    tx = client.transaction()
    for p in paths:
        tx.delete(p)
    results = tx.commit()
    if any(isinstance(r, Exception) for r in results):
        # One failure rolls the whole multi back: delete the rest one by one, pipelined.
        failed: list[tuple[str, Exception]] = []
        for path, future in [(p, client.delete_async(p)) for p in paths]:
            try:
                future.get(timeout=30.0)
            except NoNodeError:
                pass
            except (KazooException, KazooTimeoutError) as e:
                failed.append((path, e))
        if failed:
            log.warning("could not delete %d znode(s), e.g. %s: %r", len(failed), *failed[0])
