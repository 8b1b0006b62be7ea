"""Pipelined requests: many in flight on one session, replies handed over in order as they settle."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any


def pipelined(
    requests: Iterable[Any],
    submit: Callable[[Any], Any],
    wait: Callable[[Any], Any],
    window: int,
    observe: Callable[[float], None] | None = None,
) -> Iterator[Any]:
    """Keep at most ``window`` of ``requests`` outstanding (``submit`` returns a result handle,
    ``wait`` its reply) and yield the replies in order. The next request goes out before a reply
    is yielded, so the window stays full while the caller works on it; ``requests`` may be a stream,
    taken one request at a time as the window frees up. ``observe`` gets each round trip (submit to
    reply) in milliseconds."""
    queued = iter(requests)
    pending: deque[tuple[Any, float]] = deque()
    for request in queued:
        pending.append((submit(request), time.monotonic()))
        if len(pending) >= window:
            break
    while pending:
        result, sent = pending.popleft()
        reply = wait(result)
        if observe is not None:
            observe((time.monotonic() - sent) * 1000.0)
        request = next(queued, None)
        if request is not None:
            pending.append((submit(request), time.monotonic()))
        yield reply
