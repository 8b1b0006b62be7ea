"""What the bodies of the control requests share: the request header, broker objects, and partition
states as dictionary-encoded columns (see ``transport.codec`` for the layout)."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterable, Sequence
from itertools import chain
from operator import attrgetter
from typing import Any

from kafka_controller.domain.requests import (
    ControlRequest,
    Errors,
    LeaderAndIsrPartitionState,
    UpdateMetadataPartitionState,
)
from kafka_controller.domain.values import Broker, EndPoint
from kafka_controller.transport.columns import (
    INT,
    STR,
    Columns,
    Dictionary,
    Json,
    read_int_lists,
    read_table,
)
from kafka_controller.transport.errors import ProtocolError
from kafka_controller.transport.framing import EncodedObject

__all__ = ["decode_broker", "encode_broker"]

_HEADER_FIELDS = ("version", "controller_id", "controller_epoch", "broker_epoch")
_STATE_INTS = ("partition", "controller_epoch", "leader", "leader_epoch", "zk_version")
_ERRORS: dict[str, Errors] = {e.value: e for e in Errors}
#: States transposed at a time: below the collector's young-generation threshold (700).
_TRANSPOSE_ROWS = 512


def _header(r: ControlRequest) -> dict[str, Json]:
    return {f: getattr(r, f) for f in _HEADER_FIELDS}


def _read_header(body: dict[str, Json]) -> list[int]:
    values = [body[f] for f in _HEADER_FIELDS]
    if not set(map(type, values)) <= INT:
        raise ProtocolError(f"request header fields {', '.join(_HEADER_FIELDS)} must be integers")
    return values


def _read_topic_ids(body: dict[str, Json]) -> dict[str, str]:
    ids = body.get("topic_ids", {})
    if type(ids) is not dict or not set(map(type, chain(ids, ids.values()))) <= STR:
        raise ProtocolError("'topic_ids' must map topic names to id strings")
    return ids


def _error(code: Json) -> Errors:
    if type(code) is not str or code not in _ERRORS:
        raise ProtocolError(f"{code!r} is not a known error name")
    return _ERRORS[code]


# -- brokers -------------------------------------------------------------------------------------


def encode_broker(b: Broker) -> Json:
    return {
        "id": b.id,
        "endpoints": [[e.host, e.port, e.listener_name, e.security_protocol] for e in b.endpoints],
        "rack": b.rack,
        "features": [list(f) for f in b.features],
    }


def decode_broker(d: Json) -> Broker:
    if type(d.get("id")) is not int or (d.get("rack") is not None and type(d["rack"]) is not str):
        raise ProtocolError("a broker needs an integer 'id' and a string or null 'rack'")
    endpoints = tuple(EndPoint(str(h), int(p), str(ln), str(sp)) for h, p, ln, sp in d["endpoints"])
    features = tuple((str(n), int(lo), int(hi)) for n, lo, hi in d.get("features", ()))
    return Broker(d["id"], endpoints, d["rack"], features)


def _read_brokers(body: dict[str, Json], key: str) -> tuple[Broker, ...]:
    brokers = body[key]
    if type(brokers) is not list or not all(type(b) is dict for b in brokers):
        raise ProtocolError(f"{key!r} must be a list of broker objects")
    return tuple(map(decode_broker, brokers))


# -- partition states (shared by LeaderAndIsr and UpdateMetadata) ---------------------------------


def _encode_states(
    states: Iterable[LeaderAndIsrPartitionState | UpdateMetadataPartitionState],
    list_fields: tuple[str, ...],
    optional_lists: tuple[str, ...] = (),
    optional_bools: tuple[str, ...] = (),
) -> dict[str, Json]:
    states = tuple(states)
    fields: tuple[str, ...] = getattr(type(states[0]), "_fields", ()) if states else ()
    if fields:
        # NamedTuples: every field of 512 states at a time, in C (``zip``), while they are in the
        # CPU's cache, instead of a pass over all states per field (a dozen over 100,000 scattered
        # tuples): encoding ~35% less CPU. Not all at once: ``zip`` holds an iterator per state,
        # and 100,000 of them alive set off the collector (measured slower than the passes).
        transposed: list[list[Any]] = [[] for _ in fields]
        for start in range(0, len(states), _TRANSPOSE_ROWS):
            rows = states[start : start + _TRANSPOSE_ROWS]
            for col, part in zip(transposed, zip(*rows, strict=True), strict=True):
                col += part
        column: Callable[[str], Sequence[Any]] = dict(zip(fields, transposed, strict=True)).__getitem__
    else:
        column = lambda name: list(map(attrgetter(name), states))  # noqa: E731
    topics: Dictionary[str] = Dictionary()
    replica_sets: Dictionary[tuple[int, ...]] = Dictionary()
    cols: dict[str, Json] = {"topic": topics.encode_runs(column("topic"))}
    for name in _STATE_INTS:
        cols[name] = column(name)  # a fresh list of its own
    previous: tuple[Sequence[tuple[int, ...]], list[int]] | None = None
    for name in list_fields:
        values = column(name)
        if previous is not None and values == previous[0]:
            # Equal to the column before (a full ISR is the replicas): the same indexes, without
            # hashing every tuple again. One C-level comparison, stopping at the first difference.
            cols[name] = previous[1].copy()
        else:
            cols[name] = replica_sets.encode(values)
            previous = values, cols[name]
    for name in optional_lists:
        if any(column(name)):
            cols[name] = replica_sets.encode(column(name))
    for name in optional_bools:
        if any(column(name)):
            cols[name] = list(column(name))
    return {"topics": topics.values(), "replica_sets": replica_sets.values(), "partitions": cols}


#: The last few state tuples encoded, with their columns (see ``_encode_shared_states``).
_SHARED_STATES: list[tuple[tuple[UpdateMetadataPartitionState, ...], dict[str, Json]]] = []
#: The event each encoding in progress sets when done, by the id of its states (unique meanwhile:
#: its encoder holds them).
_ENCODING: dict[int, threading.Event] = {}
_SHARED_STATES_LOCK = threading.Lock()


def _cached_states(states: tuple[UpdateMetadataPartitionState, ...]) -> dict[str, Json] | None:
    for cached, columns in _SHARED_STATES:  # under the lock
        if cached is states:
            return columns
    return None


def _encode_shared_states(states: tuple[UpdateMetadataPartitionState, ...]) -> dict[str, Json]:
    """UpdateMetadata partition states, encoded once however many brokers they go to.

    The request batch gives every broker's UpdateMetadata the *same* tuple of states (100,000 of
    them after a failover, to each of the live brokers), and each broker's send thread encodes its
    own request: without this, the same columns are built once per broker. Their JSON is written
    once too (``framing.EncodedObject``) and framed as is for each broker. The entries hold their
    tuple, so an identity match cannot be a recycled id; the columns are never mutated.

    The send threads get their requests at the same moment, so the first one encodes and the
    others wait for its columns (without that wait, each found nothing cached and encoded the
    same states again: five times the work for five brokers). A thread encoding other states does
    not wait. If the encoder fails, each waiting thread encodes for itself.
    """
    with _SHARED_STATES_LOCK:
        columns = _cached_states(states)
        if columns is not None:
            return columns
        flight = _ENCODING.get(id(states))
        if flight is None:
            done = _ENCODING[id(states)] = threading.Event()
    if flight is not None:
        flight.wait()
        with _SHARED_STATES_LOCK:
            columns = _cached_states(states)
        if columns is not None:
            return columns
        return _encode_states_once(states)
    try:
        columns = _encode_states_once(states)
        with _SHARED_STATES_LOCK:
            _SHARED_STATES.insert(0, (states, columns))
            del _SHARED_STATES[2:]
        return columns
    finally:
        with _SHARED_STATES_LOCK:
            _ENCODING.pop(id(states), None)
        done.set()


def _encode_states_once(states: tuple[UpdateMetadataPartitionState, ...]) -> dict[str, Json]:
    columns = _encode_states(states, ("isr", "replicas", "offline_replicas"))
    columns["partitions"] = EncodedObject(columns["partitions"])  # and their JSON, written once
    return columns


def _read_state_columns(body: dict[str, Json]) -> tuple[Columns, list[str], list[tuple[int, ...]]]:
    return Columns(body), read_topics(body), read_int_lists(body, "replica_sets")


def read_topics(body: dict[str, Json]) -> list[str]:
    """The topic table, names interned: a broker keys its partitions and metadata by the names of
    the request that first sent them and looks them up by the names of each later one; with one
    object per name those compare by identity, and what it keeps holds one copy of each name."""
    return read_table(body, "topics", sys.intern, STR)
