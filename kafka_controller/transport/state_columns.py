"""UpdateMetadata and LeaderAndIsr partition states kept as the columns they were decoded from.

A failover's UpdateMetadata names every partition (100,000) and each broker gets three of them;
building a ``UpdateMetadataPartitionState`` per partition on decode, then storing each into the
metadata cache, was about half of what a broker spent on the failover's requests. ``StateColumns``
holds the decoded columns instead (each a list or a tuple of shared values, in the request's
order) and builds the states only when they are iterated: the metadata cache queues a request as
it is and merges it when read. It is a read-only sequence equal to the tuple of the states it
holds, so code that iterates the request's ``partition_states`` sees what it saw before. The
replica manager walks a LeaderAndIsr's columns row by row (``raw``) without a
``LeaderAndIsrPartitionState`` each.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from operator import itemgetter
from typing import Any, Generic, TypeVar, overload

from kafka_controller.domain.requests import UpdateMetadataPartitionState
from kafka_controller.hotpath import new_tuple, new_tuples

_State = TypeVar("_State", bound=tuple[Any, ...])


class StateColumns(Sequence[_State], Generic[_State]):
    """The states as columns in ``kind``'s field order (all of one length)."""

    __slots__ = ("_cols", "_kind", "_n")

    def __init__(
        self,
        cols: Sequence[Sequence[Any]],
        kind: type[_State] = UpdateMetadataPartitionState,  # type: ignore[assignment]
    ) -> None:
        fields = len(kind._fields)  # type: ignore[attr-defined]
        if len(cols) != fields or len(set(map(len, cols))) > 1:
            raise ValueError(f"need {fields} columns of one length")
        self._cols = tuple(cols)
        self._kind = kind
        self._n = len(cols[1])

    @property
    def topics(self) -> Sequence[str]:
        return self._cols[0]

    @property
    def partitions(self) -> Sequence[int]:
        return self._cols[1]

    @property
    def leaders(self) -> Sequence[int]:
        return self._cols[3]

    def rows(self, start: int = 0, stop: int | None = None) -> Iterator[_State]:
        """The states of ``[start, stop)``, built as they are iterated."""
        cols = self._cols if start == 0 and stop is None else [c[start:stop] for c in self._cols]
        return new_tuples(self._kind, zip(*cols, strict=True))

    def raw(self, fields: int | None = None) -> Iterator[tuple[Any, ...]]:
        """Each state's first ``fields`` fields (all by default) as a plain tuple, in field order
        (one reused tuple: unpack it)."""
        return zip(*self._cols[:fields], strict=True)

    def __len__(self) -> int:
        return self._n

    def __iter__(self) -> Iterator[_State]:
        return self.rows()

    @overload
    def __getitem__(self, i: int) -> _State: ...

    @overload
    def __getitem__(self, i: slice) -> tuple[_State, ...]: ...

    def __getitem__(self, i: int | slice) -> _State | tuple[_State, ...]:
        if isinstance(i, slice):
            return tuple(self)[i]
        return new_tuple(self._kind, tuple(map(itemgetter(i), self._cols)))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, StateColumns | tuple):
            return tuple(self) == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"StateColumns({self._n} states)"
