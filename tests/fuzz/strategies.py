"""Hypothesis strategies for what others may leave in ZooKeeper or send on the wire.

Random bytes find little in a JSON reader; what breaks decoders is *almost* right input. So every
payload strategy starts from a valid document of its kind and mutates it: a key dropped, a value
swapped for another JSON type, an unknown key added, a list grown huge, a number made negative or
absurdly long, the bytes truncated. Plain garbage and non-UTF-8 bytes are in the mix too.

Documents are serialised with the standard library, not orjson, so that integers beyond 64 bits
and ``NaN`` (which orjson refuses to write) still reach the decoders under test.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

#: Integers Kafka's readers see in practice, plus the edges: negatives, 32/64-bit bounds, beyond.
EDGE_INTS = st.one_of(
    st.integers(-3, 10),
    st.sampled_from([-(2**31), 2**31 - 1, 2**31, -(2**63), 2**63 - 1, 2**64, 10**30]),
)
#: Strings that parse as integers only for some readers: huge digit runs, signs, spaces, unicode.
TRICKY_STRINGS = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["", "0", "-1", "1e3", " 7", "007", "٣", "NaN", "null", "PLAINTEXT://h:x"]),
    st.integers(4301, 4400).map(lambda n: "9" * n),  # beyond Python's int-string digit limit
)

#: Any JSON value, nested a little.
JSON_VALUES: st.SearchStrategy[Any] = st.recursive(
    st.one_of(st.none(), st.booleans(), EDGE_INTS, st.floats(allow_nan=False), TRICKY_STRINGS),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(TRICKY_STRINGS, inner, max_size=4)),
    max_leaves=12,
)

#: A replica or partition list far beyond any real cluster. The controller's work per partition is
#: quadratic in the replica count (each offline replica sends LeaderAndIsr to all the others, as in
#: Kafka), so the in-process controller tests pass a shorter one (``huge=``).
HUGE_INT_LIST = list(range(5_000))


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every location inside ``doc`` (dict keys and list indexes), the root included."""
    out = [prefix]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _paths(v, (*prefix, i))
    return out


def _replace(doc: Any, where: tuple[Any, ...], value: Any) -> Any:
    if not where:
        return value
    head, rest = where[0], where[1:]
    if isinstance(doc, dict):
        return {**doc, head: _replace(doc[head], rest, value)}
    out = list(doc)
    out[head] = _replace(doc[head], rest, value)
    return out


def _delete(doc: Any, where: tuple[Any, ...]) -> Any:
    if not where:
        return None
    parent_path, last = where[:-1], where[-1]
    parent: Any = doc
    for step in parent_path:
        parent = parent[step]
    if isinstance(parent, dict):
        smaller: Any = {k: v for k, v in parent.items() if k != last}
    else:
        smaller = [v for i, v in enumerate(parent) if i != last]
    return _replace(doc, parent_path, smaller)


@st.composite
def mutated(draw: st.DrawFn, valid: dict[str, Any], huge: list[int] = HUGE_INT_LIST) -> Any:
    """``valid`` with one to three structural mutations."""
    doc: Any = valid
    for _ in range(draw(st.integers(1, 3))):
        where = draw(st.sampled_from(_paths(doc)))
        kind = draw(st.sampled_from(["replace", "delete", "add_key", "huge", "negate", "wrap"]))
        if kind == "replace":
            doc = _replace(doc, where, draw(JSON_VALUES))
        elif kind == "delete" and where:
            doc = _delete(doc, where)
        elif kind == "add_key":
            doc = {**doc, draw(TRICKY_STRINGS): draw(JSON_VALUES)} if isinstance(doc, dict) else [doc]
        elif kind == "huge":
            doc = _replace(doc, where, huge)
        elif kind == "negate":
            doc = _replace(doc, where, draw(st.sampled_from([-1, -2, -(2**31), 10**30, 2**64])))
        else:
            doc = [doc]
    return doc


def serialize(doc: Any) -> bytes:
    return json.dumps(doc, allow_nan=True).encode()


@st.composite
def corrupt_payloads(draw: st.DrawFn, valid: dict[str, Any], huge: list[int] = HUGE_INT_LIST) -> bytes | None:
    """Bytes a careless or hostile writer might leave where ``valid`` belongs."""
    good = serialize(valid)
    choice = draw(st.integers(0, 9))
    if choice <= 5:
        return serialize(draw(mutated(valid, huge)))
    if choice == 6:
        return serialize(draw(JSON_VALUES))
    if choice == 7:
        return good[: draw(st.integers(0, max(0, len(good) - 1)))]  # truncated write
    if choice == 8:
        return draw(st.binary(max_size=64))  # garbage, usually not UTF-8
    return draw(st.sampled_from([None, b"", b"null", b"{}", b"[]", b"\xff\xfe{}", b"{" * 2000]))


# -- valid documents of each kind (docs/controller-behaviour.md §7.1) ------------------------------
VALID_CONTROLLER = {"version": 1, "brokerid": 1, "timestamp": "1700000000000"}
VALID_PARTITION_STATE = {"controller_epoch": 1, "leader": 1, "version": 1, "leader_epoch": 0, "isr": [1, 2]}
VALID_TOPIC = {
    "version": 3,
    "partitions": {"0": [1, 2], "1": [2, 3]},
    "topic_id": "AAAAAAAAAAAAAAAAAAAAAg",
    "adding_replicas": {},
    "removing_replicas": {},
}
VALID_BROKER = {
    "features": {},
    "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"},
    "endpoints": ["PLAINTEXT://127.0.0.1:9092"],
    "jmx_port": -1,
    "port": 9092,
    "host": "127.0.0.1",
    "version": 5,
    "timestamp": "1700000000000",
}
VALID_REASSIGNMENT = {"version": 1, "partitions": [{"topic": "good", "partition": 0, "replicas": [2, 3]}]}
VALID_PREFERRED = {"version": 1, "partitions": [{"topic": "good", "partition": 0}]}
VALID_ISR_CHANGE = {"version": 1, "partitions": [{"topic": "good", "partition": 0}]}
VALID_LOG_DIR_EVENT = {"version": 1, "broker": 1, "event": 1}
VALID_CONFIG = {"version": 1, "config": {"unclean.leader.election.enable": "true"}}
VALID_CONFIG_CHANGE = {"version": 2, "entity_path": "topics/good"}
VALID_CLUSTER_ID = {"version": "1", "id": "AAAAAAAAAAAAAAAAAAAAAw"}
VALID_FEATURE = {
    "features": {"f": {"min_version_level": 1, "max_version_level": 2}},
    "version": 1,
    "status": 1,
}
