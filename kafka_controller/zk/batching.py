"""Fenced, batched writes (docs/controller-behaviour.md §7.3, docs/performance.md).

Kafka fences each write as its own ``[check(/controller_epoch), op]`` multi. One check per *batch*
fences just as well — a multi is atomic, so a stale epoch fails the whole batch — and it is what
makes writes 7-10x faster from Python. The price is atomicity: one failing op rolls back the rest
of its multi. So each op ends in one of three ways: written, failed with its own error code (the
caller decides whether a BADVERSION means "retry after re-read"), or rolled back and resubmitted
in a new multi without the failing op, until every op has a final result.

Resubmission: the ops *before* the failing one were valid and go back as one batch; the ops
*after* it were never evaluated and go back split in halves, so k failures in a batch of n cost
O(log n) rounds instead of k (dense failures degrade gracefully toward Kafka's one-op multis).

Batch size is capped by estimated encoded bytes (default 512 KiB: half of ZooKeeper's default
``jute.maxbuffer`` of 1 MiB, leaving room for the reply and for servers configured lower; kazoo
has been seen failing with ConnectionLoss near 930 KB) and by op count (default 1,000, so that a
20,000-op call is ~20 multis kept several in flight by the backend, and one failure rolls back at
most 1,000 ops).

Streaming: the ops may be an iterator, taken a batch at a time as the backend's window of multis in
flight frees up (``ZkBackend.iter_multi``), resubmissions first; a batch is let go once its multi
settles. A failover's 60,000 ISR writes then exist as encoded ops a window at a time, not all at
once, and they are encoded while earlier multis are in flight.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from kafka_controller.domain.errors import ControllerMovedError, InvalidArgumentError, MetadataStoreError
from kafka_controller.domain.values import MATCH_ANY_VERSION
from kafka_controller.zk.backend import BADVERSION, CHECK, CREATE, OK, Op, ZkBackend, error_for_code
from kafka_controller.zk.paths import CONTROLLER_EPOCH_PATH

DEFAULT_MAX_BATCH_BYTES = 512 * 1024
DEFAULT_MAX_BATCH_OPS = 1000

# Wire overhead per op: multi header (9) + path length (4) + data length (4) + version/flags (4),
# rounded up; a create also carries its ACL list (a few dozen bytes each).
_OP_OVERHEAD = 32
_CREATE_ACL_OVERHEAD = 96


def op_size(op: Op) -> int:
    data = op[2]
    size = _OP_OVERHEAD + len(op[1]) + (len(data) if data else 0)
    return size + _CREATE_ACL_OVERHEAD if op[0] == CREATE else size


def split_batches(
    sizes: Sequence[int], indices: Sequence[int], max_bytes: int, max_ops: int
) -> list[list[int]]:
    """Group ``indices`` (in order) into batches under both caps; an oversize op goes alone."""
    out: list[list[int]] = []
    cur: list[int] = []
    cur_bytes = 0
    for i in indices:
        s = sizes[i]
        if cur and (cur_bytes + s > max_bytes or len(cur) >= max_ops):
            out.append(cur)
            cur, cur_bytes = [], 0
        cur.append(i)
        cur_bytes += s
    if cur:
        out.append(cur)
    return out


class BatchResult:
    """Per-op outcome, aligned with the input ops: ``codes[i]`` is OK or the op's own error code;
    ``values[i]`` is the backend's value for a written op (new data version for a set, created
    path for a create)."""

    __slots__ = ("codes", "multis", "values")

    def __init__(self, n: int) -> None:
        self.codes: list[int] = [OK] * n
        self.values: list[Any] = [None] * n
        self.multis = 0

    def error(self, i: int, path: str) -> MetadataStoreError | None:
        code = self.codes[i]
        return None if code == OK else error_for_code(code, path)


class Batcher:
    """Runs many ops as few fenced multis as the caps allow."""

    def __init__(
        self,
        backend: ZkBackend,
        *,
        max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
        max_batch_ops: int = DEFAULT_MAX_BATCH_OPS,
    ) -> None:
        if max_batch_bytes < 1024 or max_batch_ops < 1:
            raise InvalidArgumentError("max_batch_bytes must be >= 1024 and max_batch_ops >= 1")
        self._backend = backend
        self.max_batch_bytes = max_batch_bytes
        self.max_batch_ops = max_batch_ops
        self.multis_sent = 0  # cumulative, for tests and metrics

    def run(self, ops: Iterable[Op], expected_controller_epoch_zk_version: int) -> BatchResult:
        """Apply ``ops``; fenced unless the expected version is ``MATCH_ANY_VERSION`` (-1).

        ``ops`` may be a stream: it is taken a batch at a time as the backend's window frees up, and
        an op is let go once its multi settles, so a 60,000-write call never holds its encoded ops
        all at once. Resubmitted batches go out before fresh ones; the result is in input order.

        Raises ``ControllerMovedError`` when the epoch check fails with BADVERSION (the failing
        multi wrote nothing; multis that completed earlier in the call stay written, exactly as
        Kafka's pipelined per-op multis), the check's own error for any other check failure, and
        ``StoreUnavailableError`` if the session is lost mid-call. Either way no further multi is sent.
        """
        zkv = expected_controller_epoch_zk_version
        if zkv < MATCH_ANY_VERSION:
            raise InvalidArgumentError(f"expected controller epoch zk version {zkv} is invalid")
        result = BatchResult(0)
        fenced = zkv >= 0
        head: list[Op] = [(CHECK, CONTROLLER_EPOCH_PATH, None, zkv)] if fenced else []
        off = len(head)
        budget = self.max_batch_bytes - (64 if fenced else 0)
        fresh = _stream_batches(ops, result, budget, self.max_batch_ops - off)
        first = next(fresh, None)
        if first is None:
            return result  # no ops: no call to the backend at all
        retry: deque[_Batch] = deque([first])
        sent: deque[_Batch] = deque()

        def multis() -> Iterator[list[Op]]:
            """Resubmissions first, then the next fresh batch; ends when both run dry (for now)."""
            while True:
                batch = retry.popleft() if retry else next(fresh, None)
                if batch is None:
                    return
                sent.append(batch)
                yield head + batch[1]

        codes, values = result.codes, result.values
        while True:
            for outcome in self._backend.iter_multi(multis()):
                start, batch_ops = sent.popleft()
                result.multis += 1
                self.multis_sent += 1
                if outcome.failed_index < 0:
                    vals = outcome.values or ()
                    if len(vals) != off + len(batch_ops):
                        raise MetadataStoreError(
                            f"a multi of {off + len(batch_ops)} ops had {len(vals)} results"
                        )
                    values[start : start + len(batch_ops)] = vals[off:]
                    continue
                k = outcome.failed_index - off
                if k < 0:
                    if outcome.error_code == BADVERSION:
                        raise ControllerMovedError("Controller epoch zkVersion check fails")
                    raise error_for_code(outcome.error_code, CONTROLLER_EPOCH_PATH)
                codes[start + k] = outcome.error_code
                _resubmit(start, batch_ops, k, retry)
            if not retry:  # the fresh batches ran out with nothing left to resubmit
                return result


#: A batch: the index of its first op in the call's input, and its ops (always a contiguous run).
_Batch = tuple[int, list[Op]]


def _stream_batches(ops: Iterable[Op], result: BatchResult, max_bytes: int, max_ops: int) -> Iterator[_Batch]:
    """``split_batches`` over a stream, growing ``result`` by a slot per op as each batch is let go."""
    codes, values = result.codes, result.values
    start = 0
    cur: list[Op] = []
    cur_bytes = 0
    for op in ops:
        s = op_size(op)
        if cur and (cur_bytes + s > max_bytes or len(cur) >= max_ops):
            codes += [OK] * len(cur)
            values += [None] * len(cur)
            yield start, cur
            start += len(cur)
            cur, cur_bytes = [], 0
        cur.append(op)
        cur_bytes += s
    if cur:
        codes += [OK] * len(cur)
        values += [None] * len(cur)
        yield start, cur


def _resubmit(start: int, ops: list[Op], k: int, retry: deque[_Batch]) -> None:
    """The ops before the failed one ``k`` were valid: one batch; those after it were never
    evaluated: two halves (module docs)."""
    if k > 0:
        retry.append((start, ops[:k]))
    after = start + k + 1
    rest = ops[k + 1 :]
    if len(rest) > 1:
        half = (len(rest) + 1) // 2
        retry.extend(((after, rest[:half]), (after + half, rest[half:])))
    elif rest:
        retry.append((after, rest))
