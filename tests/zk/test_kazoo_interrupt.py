"""Ctrl-C while a request is handed to kazoo's connection thread stays a ``KeyboardInterrupt``
(``zk/kazoo_client.py``): kazoo's own client turns it into a closed connection on a healthy
session, which made commands exit 1 ("ZooKeeper unavailable") or ignore Ctrl-C."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kafka_controller.zk.kazoo_backend import KazooMetadataStore
from kafka_controller.zk.kazoo_client import InterruptibleKazooClient

pytestmark = pytest.mark.zk


class _FailingWake:
    """Stands in for kazoo's wake-up socket: the first ``send`` raises ``error`` without sending,
    as SIGINT's handler does when it runs inside the call; later ones go to the real socket."""

    def __init__(self, sock: Any, error: BaseException) -> None:
        self.sock = sock
        self.error: BaseException | None = error

    def send(self, data: bytes) -> int:
        if self.error is not None:
            error, self.error = self.error, None
            raise error
        return int(self.sock.send(data))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.sock, name)


@pytest.fixture
def store(zk_connect: str) -> Iterator[KazooMetadataStore]:
    s = KazooMetadataStore(zk_connect)
    yield s
    s.close()


def _with_failing_wake(store: KazooMetadataStore, error: BaseException, call: Callable[[], Any]) -> Any:
    connection = store.backend.client._connection
    real = connection._write_sock
    connection._write_sock = _FailingWake(real, error)
    try:
        return call()
    finally:
        connection._write_sock = real


CALLS: dict[str, Callable[[KazooMetadataStore], Any]] = {
    "kazoo's exists": lambda s: s.path_exists("/brokers/ids"),
    "a pipelined multi-read": lambda s: s.get_sorted_broker_list(),
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_a_keyboard_interrupt_during_the_hand_over_reaches_the_caller(
    store: KazooMetadataStore, name: str
) -> None:
    assert isinstance(store.backend.client, InterruptibleKazooClient)
    call = CALLS[name]
    with pytest.raises(KeyboardInterrupt):
        _with_failing_wake(store, KeyboardInterrupt(), lambda: call(store))
    # the session is untouched: the same call works at once
    assert store.path_exists("/brokers/ids")
    call(store)
