"""``poll_select`` keeps ``select.select``'s contract, which kazoo's connection loop relies on."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest

from kafka_controller.zk.poll_handler import PollingHandler, poll_select


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    a, b = socket.socketpair()
    yield a, b
    a.close()
    b.close()


def test_idle_socket_is_writable_not_readable(pair: tuple[socket.socket, socket.socket]) -> None:
    a, _ = pair
    assert poll_select([a], [a], [], 0) == ([], [a], [])


def test_data_makes_the_peer_readable_and_fds_work_as_well_as_objects(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    a, b = pair
    b.sendall(b"x")
    assert poll_select([a, b.fileno()], [], [], 1.0) == ([a], [], [])


def test_timeout_returns_nothing_after_waiting(pair: tuple[socket.socket, socket.socket]) -> None:
    a, _ = pair
    start = time.monotonic()
    assert poll_select([a], [], [], 0.05) == ([], [], [])
    assert time.monotonic() - start >= 0.04


def test_a_closed_peer_counts_as_readable_so_the_reader_sees_eof(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    a, b = pair
    b.close()
    readable, _, _ = poll_select([a], [], [], 1.0)
    assert readable == [a] and a.recv(1) == b""


def test_bad_arguments_are_refused_like_select(pair: tuple[socket.socket, socket.socket]) -> None:
    a, _ = pair
    with pytest.raises(ValueError, match="non-negative"):
        poll_select([a], [], [], -1)
    with pytest.raises(TypeError, match="number"):
        poll_select([a], [], [], "1")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Invalid file"):
        poll_select([object()], [], [], 0)


def test_the_handler_selects_with_poll(pair: tuple[socket.socket, socket.socket]) -> None:
    a, b = pair
    b.sendall(b"y")
    assert PollingHandler().select([a], [], [], 1.0) == ([a], [], [])
