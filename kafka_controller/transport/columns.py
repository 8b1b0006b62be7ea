"""Columnar bodies: dictionary encoding on the way out, validated columns on the way in.

A request with 100,000 partition states is sent as a dozen arrays of 100,000 values rather than
100,000 objects: orjson writes and reads flat integer arrays at memory speed, and the decoder
builds no dict per partition. Values that repeat (topic names, replica lists, error names) are
*dictionary-encoded*: each distinct value is sent once in a table and the column holds indexes,
so the decoder shares one ``str``/``tuple`` per distinct value instead of allocating one per
partition. The type checks are C-speed scans (``set(map(type, column))``), so a hostile frame
cannot build ill-typed domain values and the checks cost a few percent of decoding.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Hashable, Iterable, Iterator
from contextlib import contextmanager
from itertools import chain, groupby, repeat
from operator import countOf, itemgetter
from typing import Any, Generic, TypeVar

from kafka_controller.heap import end_bulk
from kafka_controller.transport.errors import ProtocolError

H = TypeVar("H", bound=Hashable)
T = TypeVar("T")
Json = Any
INT = frozenset({int})
BOOL = frozenset({bool})
STR = frozenset({str})
LIST = frozenset({list})


#: Below this many partitions a body is decoded with the garbage collector left alone.
GC_PAUSE_MIN_ROWS = 5_000


@contextmanager
def gc_paused(rows: int) -> Iterator[None]:
    """Pause the cyclic GC while building ``rows`` domain objects, if there are many.

    Building 100,000 frozen dataclasses triggers ~140 young and, in a process holding a large
    heap, full collections that traverse every object; measured here, that doubles decoding time.
    The objects built are acyclic: ``heap.end_bulk`` moves them out of the collector's generations
    instead of letting it walk them after. Re-enabled only by the caller that disabled it, so nested
    or concurrent uses end enabled.
    """
    if rows < GC_PAUSE_MIN_ROWS or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        end_bulk()


class Dictionary(Generic[H]):
    """Encoder side: ``encode`` turns values into indexes; ``values()`` is the table to send."""

    def __init__(self) -> None:
        self._index: dict[H, int] = {}

    def encode(self, values: Iterable[H]) -> list[int]:
        index = self._index
        return [index.setdefault(v, len(index)) for v in values]

    def encode_runs(self, values: Iterable[H]) -> list[int]:
        """``encode`` for columns that come in runs of one value (a request's topic names, a
        response's error names): one hash per run, not per row (an ``Errors`` member's hash is
        Python code), and no Python code per row. Same indexes as ``encode``."""
        index = self._index
        codes: list[int] = []
        for value, run in groupby(values):
            codes += repeat(index.setdefault(value, len(index)), len(list(run)))
        return codes

    def values(self) -> list[H]:
        return list(self._index)  # insertion order is index order


def read_table(
    body: dict[str, Json], key: str, convert: Callable[[Any], T], item_types: frozenset[type]
) -> list[T]:
    """A dictionary table from the body, each entry type-checked, then converted."""
    raw = body[key]
    if type(raw) is not list or (raw and not set(map(type, raw)) <= item_types):
        raise ProtocolError(f"{key!r} must be a list of {'/'.join(sorted(t.__name__ for t in item_types))}")
    return list(map(convert, raw))


def read_int_lists(body: dict[str, Json], key: str) -> list[tuple[int, ...]]:
    table = read_table(body, key, tuple, LIST)
    if not set(map(type, chain.from_iterable(table))) <= INT:
        raise ProtocolError(f"{key!r} must be a list of lists of integers")
    return table


class Columns:
    """The ``partitions`` object of a body: same-length columns, read with type checks."""

    def __init__(self, body: dict[str, Json], key: str = "partitions") -> None:
        cols = body[key]
        if type(cols) is not dict or type(cols.get("partition")) is not list:
            raise ProtocolError(f"{key!r} must be an object of columns with a 'partition' list")
        self._cols: dict[str, Json] = cols
        self._key = key
        self.n = len(cols["partition"])

    def _get(self, name: str, kind: type) -> list[Any]:
        col = self._cols[name]
        if type(col) is not list or len(col) != self.n:
            raise ProtocolError(f"column {self._key}.{name} must be a list of {self.n} values")
        # Every value exactly of ``kind`` (a bool is not an int here): counting by identity, in
        # C, is about a third cheaper than collecting the set of types.
        if countOf(map(type, col), kind) != self.n:
            raise ProtocolError(f"column {self._key}.{name} holds values of the wrong type")
        return col

    def ints(self, name: str) -> list[int]:
        return self._get(name, int)

    def bools(self, name: str, default: bool | None = None) -> Iterable[bool]:
        """A boolean column; absent means ``default`` everywhere when a default is given."""
        if default is not None and name not in self._cols:
            return repeat(default, self.n)
        return self._get(name, bool)

    def codes(self, name: str, table_size: int) -> list[int]:
        """A dictionary-encoded column left as its indexes, each checked to be an integer that
        picks an entry of a table of ``table_size`` (for a reader that looks entries up later)."""
        col = self.ints(name)
        if col and (min(col) < 0 or max(col) >= table_size):
            raise ProtocolError(f"column {self._key}.{name} has indexes outside its table of {table_size}")
        return col

    def lookup(self, name: str, table: list[T], default: T | None = None) -> Iterable[T]:
        """A dictionary-encoded column; absent means ``default`` when one is given.

        Checked by its use, not by a type scan first (a third of a lookup's time): ``min`` and
        indexing refuse anything but integers (a boolean is the integer it equals, so it picks a
        table entry like one), and every value built comes from the table, type-checked by
        ``read_table``."""
        if default is not None and name not in self._cols:
            return repeat(default, self.n)
        col = self._cols[name]
        if type(col) is not list or len(col) != self.n:
            raise ProtocolError(f"column {self._key}.{name} must be a list of {self.n} values")
        if not col:
            return ()
        try:
            if min(col) < 0:  # a negative index would pick from the end of the table
                raise IndexError
            picked = itemgetter(*col)(table)  # one C call for the column, not one per value
        except IndexError:
            raise ProtocolError(
                f"column {self._key}.{name} has indexes outside its table of {len(table)}"
            ) from None
        except TypeError:
            raise ProtocolError(f"column {self._key}.{name} holds values of the wrong type") from None
        return picked if len(col) > 1 else (picked,)
