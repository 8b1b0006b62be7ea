"""The cyclic garbage collector's permanent generation, shared by everything in one process.

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
"""

from __future__ import annotations

import gc
import threading

__all__ = ["end_bulk", "freeze", "unfreeze"]

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
