"""The few bulk forms the controller's hot paths are written in, under names that say what they do.

A failover touches every partition in one event: at 100,000 partitions and replication factor 3
that is 300,000 replicas whose states are set, 100,000 partition states built for LeaderAndIsr and
again for UpdateMetadata, and as many audit rows. Written the straightforward way — a comprehension
calling ``in`` or ``[]`` per item, a ``NamedTuple`` built by ``cls(...)`` — each of those is a
Python-level call per item, and the calls were most of a failover's CPU. The forms here do the
same work in one C loop (``map`` over a bound ``__contains__`` or ``__getitem__``, ``filter``,
``tuple.__new__``) and give exactly the straightforward form's result; each function's docstring
gives that form, and ``tests/unit/test_hotpath.py`` holds each to it.

Each function is lazy, as ``map`` is, and as its straightforward form is written here (a
generator expression): a pipeline of them builds no list in between (a list of 300,000 items
built only to be zipped costs ~10 ms); a caller that needs a list says ``list(...)``. So the Kafka
logic reads as Kafka (``is_online = list(members(live, replica_ids))``), and this module is the
one place that knows how those are made fast. It imports nothing of the project, so every layer
may use it.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Iterator
from itertools import filterfalse, repeat
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

__all__ = [
    "Lookup",
    "dropped_members",
    "identity_hash",
    "kept_members",
    "members",
    "new_tuple",
    "new_tuples",
    "values_at",
]

_T = TypeVar("_T")
_K = TypeVar("_K")
_V = TypeVar("_V")
_Tuple = TypeVar("_Tuple", bound=tuple[Any, ...])
_Key = TypeVar("_Key", contravariant=True)
_Value = TypeVar("_Value", covariant=True)


class Lookup(Protocol[_Key, _Value]):
    """What ``values_at`` reads from: a mapping, or a sequence indexed by position."""

    def __getitem__(self, key: _Key, /) -> _Value: ...


def members(container: Container[Any], items: Iterable[Any]) -> Iterator[bool]:
    """Whether each of ``items`` is in ``container``, in order: ``(x in container for x in items)``."""
    return map(container.__contains__, items)


def kept_members(container: Container[Any], items: Iterable[_T]) -> Iterator[_T]:
    """The ``items`` that are in ``container``, in order: ``(x for x in items if x in container)``."""
    return filter(container.__contains__, items)


def dropped_members(container: Container[Any], items: Iterable[_T]) -> Iterator[_T]:
    """The ``items`` that are not in ``container``, in order:
    ``(x for x in items if x not in container)``."""
    return filterfalse(container.__contains__, items)


def values_at(mapping: Lookup[_K, _V], keys: Iterable[_K]) -> Iterator[_V]:
    """The value of each of ``keys`` in ``mapping`` (a mapping, or a sequence and positions), in
    order, raising as ``mapping[k]`` does for a missing one: ``(mapping[k] for k in keys)``."""
    return map(mapping.__getitem__, keys)


def new_tuples(cls: type[_Tuple], rows: Iterable[Iterable[Any]]) -> Iterator[_Tuple]:
    """``cls(*row)`` for each of ``rows``, in order: ``(cls(*row) for row in rows)``, each row
    holding every field of ``cls`` in declaration order (see ``new_tuple``)."""
    return map(tuple.__new__, repeat(cls), rows)


# ``new_tuple(cls, fields)`` is ``cls(*fields)`` for a ``typing.NamedTuple`` ``cls`` given every
# field in declaration order: the same object, built without the Python-level ``__new__`` that
# checks the arguments and fills defaults (2-5x the cost of the tuple itself). The caller gives
# exactly the fields, in order: a missing one is not filled in, an extra one is not refused.
#
# ``__hash__ = identity_hash`` in an ``Enum`` hashes its members by identity (they are singletons,
# so equal means identical): ``object.__hash__``, ~3x cheaper than ``Enum``'s hash of the member's
# name, where state sets are probed once per partition or replica.
#
# Both are the builtins themselves, not functions calling them: they are called once per item.
if TYPE_CHECKING:

    def new_tuple(cls: type[_Tuple], fields: Iterable[Any], /) -> _Tuple: ...

    def identity_hash(self: object, /) -> int: ...

else:
    new_tuple = tuple.__new__
    identity_hash = object.__hash__
