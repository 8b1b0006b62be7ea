"""kazoo's client with Ctrl-C left as Ctrl-C.

kazoo 2.11 queues each request, then wakes its connection thread by writing one byte to a socket
pair, inside a bare ``except`` meant for a socket pair that ``close()`` shut meanwhile. SIGINT's
``KeyboardInterrupt``, raised in the main thread at whatever point it runs, lands in that ``except``
when it runs there: the request fails with ``ConnectionClosedError`` on a healthy session and the
interrupt is lost. A command then says "ZooKeeper unavailable" and exits 1 instead of 130, or a wait
that counts store errors as "not yet" goes on as if Ctrl-C had never been pressed (both seen in
CI, about one Ctrl-C in thirty on a loaded machine). Here only a socket error means a closed
connection; anything else propagates to the caller, with the connection thread still woken.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from kazoo.client import KazooClient, KeeperState
from kazoo.exceptions import AuthFailedError, ConnectionClosedError, SessionExpiredError


def _closed() -> Exception:
    error: Exception = ConnectionClosedError("Connection has been closed")
    return error


#: Session states in which kazoo refuses a request at once, and the error it gives.
_REFUSED: dict[str, Callable[[], Exception]] = {
    KeeperState.AUTH_FAILED: AuthFailedError,
    KeeperState.CLOSED: _closed,
    KeeperState.EXPIRED_SESSION: SessionExpiredError,
}


class InterruptibleKazooClient(KazooClient):  # type: ignore[misc]  # kazoo has no type hints
    """``KazooClient`` whose request hand-over lets ``KeyboardInterrupt`` (and any other
    non-socket error) through instead of failing the request as a closed connection."""

    def _call(self, request: Any, async_object: Any) -> bool | None:
        refusal = _REFUSED.get(self._state)
        if refusal is not None:
            async_object.set_exception(refusal())
            return False
        wake = self._connection._write_sock
        if wake is None:  # close() shut the socket pair after the state check
            async_object.set_exception(_closed())
            return False
        try:
            self._queue.append((request, async_object))
            wake.send(b"\0")
        except OSError:  # shut by close() just now
            async_object.set_exception(_closed())
        except BaseException:
            # The connection thread sends one queued request per byte it reads, so a byte too few
            # would leave every later request one wake-up behind (the session's close never sent);
            # a byte too many is skipped. An interrupt can land before or after the byte went out.
            with contextlib.suppress(OSError):
                wake.send(b"\0")
            raise
        return None
