"""The process heap: the collector's permanent generation, and the C heap's free pages.

The cyclic garbage collector's permanent generation is shared by everything in one process.

``gc.freeze()`` moves every object the collector tracks out of its generations, so that later
collections no longer walk them; ``gc.unfreeze()`` moves them all back. There is one permanent
generation per process, and a broker process may hold a controller too: the controller freezes
its loaded context after a failover and unfreezes it when it resigns (``controller.failover``),
the broker freezes what a large request left behind (``end_bulk``). Both go through here, so that
neither undoes the other:

* the controller's unfreeze gives a broker's long-lived objects back to the collector too; the
  broker's next large request freezes them again;
* a broker does not freeze between the controller's unfreeze and the next full collection, which
  would hide the resigned context's garbage from the collector indefinitely.

Reference counting frees frozen objects as usual; only garbage *cycles* wait for an unfreeze. What
is frozen here (decoded requests, metadata, partitions, the context) holds none.

``release_free_heap``: a failover at 100,000 partitions frees tens of MB at its end (the request
queues, the audit columns once written); glibc keeps free chunks below its trim threshold, and free
pages in the middle of a thread's arena, resident, so the process's RSS would stay near its peak
for good. ``malloc_trim(0)`` gives the free pages back (~20 MB of an in-process RF 3 failover not
audited, ~45 MB audited, in 2-12 ms; ctypes drops the GIL for the call). A no-op where libc has no
``malloc_trim`` (musl, macOS). The peak (``VmHWM``) is unchanged: this lowers what stays.

``limit_malloc_arenas``: glibc gives each new thread that calls ``malloc`` an arena of its own, up
to 8 per core. A broker runs a dozen threads (the controller's event thread, a request channel
per broker, the audit writer, the network and ZooKeeper threads), and a chunk one thread frees
can only be reused by the threads of its arena: in a 100,000-partition RF 3 failover the
controller's broker peaked ~30-35 MB higher with an arena per thread than with two shared by all.
Python allocates small objects from its own pools, so the arena lock is taken only for the
larger blocks; the GIL already serialises most of those. Called by the broker command before it
starts a thread; ``MALLOC_ARENA_MAX`` in the environment, an operator's choice, wins.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import os
import sys
import threading
from collections.abc import Callable

__all__ = [
    "BROKER_MALLOC_ARENAS",
    "end_bulk",
    "freeze",
    "limit_malloc_arenas",
    "release_free_heap",
    "unfreeze",
]

#: glibc arenas a broker process shares among its threads (``limit_malloc_arenas``).
BROKER_MALLOC_ARENAS = 2
_M_ARENA_MAX = -8  # mallopt's parameter number, from glibc's malloc.h

_lock = threading.Lock()
#: The number of full collections when the controller last unfroze, until one more has run.
_full_collections_at_unfreeze: int | None = None


def _full_collections() -> int:
    return int(gc.get_stats()[2]["collections"])


def freeze() -> None:
    """Move everything tracked now out of the collector's generations (the controller, after the
    context is loaded)."""
    global _full_collections_at_unfreeze
    with _lock:
        gc.freeze()
        _full_collections_at_unfreeze = None


def unfreeze() -> None:
    """Give everything frozen back to the collector (the controller, at resignation)."""
    global _full_collections_at_unfreeze
    with _lock:
        gc.unfreeze()
        _full_collections_at_unfreeze = _full_collections()


def end_bulk() -> None:
    """End a section that paused the collector to build many long-lived, acyclic objects (a large
    request's decoding or handling) and re-enable it. Freezing first spares the collector what the
    pause would otherwise cost it after: a young collection over every object built, their
    promotion, and the full collections their number triggers (each a walk of the whole heap: up to
    0.3 s in a broker during a 100,000-partition failover). The caller disabled the collector."""
    global _full_collections_at_unfreeze
    with _lock:
        owed = _full_collections_at_unfreeze
        if owed is not None and _full_collections() <= owed:
            pass  # the controller's garbage is not collected yet: leave it visible
        else:
            _full_collections_at_unfreeze = None
            gc.freeze()
    gc.enable()


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None


def _malloc_trim() -> Callable[[int], int] | None:
    try:
        trim = _LIBC.malloc_trim  # type: ignore[union-attr]
    except AttributeError:
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


_LIBC = _libc()
_TRIM = _malloc_trim()


def limit_malloc_arenas(arenas: int = BROKER_MALLOC_ARENAS) -> bool:
    """Have glibc share at most ``arenas`` malloc arenas among all threads (``mallopt(M_ARENA_MAX)``).

    Only threads that have not allocated yet are bound by it: call it before starting any. False
    where it does not apply (not glibc) or ``MALLOC_ARENA_MAX`` is set (that setting stays)."""
    if arenas < 1 or "MALLOC_ARENA_MAX" in os.environ:
        return False
    try:
        mallopt = _LIBC.mallopt  # type: ignore[union-attr]
    except AttributeError:
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_ARENA_MAX, arenas))


def release_free_heap() -> bool:
    """Return the C heap's free pages to the OS; True if any were (False too where unsupported)."""
    return bool(_TRIM(0)) if _TRIM is not None else False
