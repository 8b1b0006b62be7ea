"""Sockets and process plumbing for the embedded ZooKeeper: the four-letter-word exchange, free
ports, argument checks, and making the JVM die with its parent (``PR_SET_PDEATHSIG`` on Linux)."""

from __future__ import annotations

import ctypes
import signal
import socket
import sys
import threading

from kafka_controller.domain.errors import InvalidArgumentError
from kafka_controller.zk.server_files import HOST

__all__ = ["four_letter_word"]


# -- helpers --------------------------------------------------------------------------------------
def four_letter_word(host: str, port: int, word: str, timeout: float = 2.0) -> str:
    """One ZooKeeper four-letter-word exchange; raises ``OSError`` when nothing answers."""
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(word.encode("ascii"))
        chunks = []
        while chunk := s.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", "replace")


def _check_int(name: str, value: object, low: int, high: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise InvalidArgumentError(f"{name} must be an integer in [{low}, {high}], got {value!r}")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        port: int = s.getsockname()[1]
        return port


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as ZooKeeper binds it
        try:
            s.bind((HOST, port))
        except OSError:
            return False
        return True


# -- the child dies with its parent ---------------------------------------------------------------
_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None


def _can_die_with_parent() -> bool:
    # PDEATHSIG fires when the *thread* that forked exits, so only the main thread may use it.
    return _libc is not None and threading.current_thread() is threading.main_thread()


def _die_with_parent() -> None:
    assert _libc is not None
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
