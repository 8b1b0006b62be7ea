"""Pure encoders/decoders for the controller's znodes (docs/controller-behaviour.md §7.1): controller,
epoch, brokers, topics,
partition states.

Writers emit Kafka 2.8's compact JSON (key order as Kafka's 2.13 build emits it, though no reader
may depend on it). Readers parse by key and are exactly as strict as Kafka: a key Kafka requires,
a wrong type, or malformed JSON raises ``ZNodeDecodeError`` naming the path, and callers report it
for that znode only. Missing optional keys (older versions) decode to Kafka's defaults.
"""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Collection, Iterable, Mapping
from itertools import chain, repeat
from typing import Any

import orjson

from kafka_controller.domain.errors import InvalidArgumentError, ZNodeDecodeError, brief
from kafka_controller.domain.values import (
    Broker,
    EndPoint,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
    TopicPartition,
    build_leader_and_isr,
    build_leader_isr_and_controller_epoch,
    topic_partitions,
)
from kafka_controller.hotpath import values_at

_loads = orjson.loads
_dumps = orjson.dumps
_JSONDecodeError = orjson.JSONDecodeError


# -- helpers ---------------------------------------------------------------------------------------


def parse_json(path: str, data: bytes | None) -> Any:
    """Kafka's ``Json.parseBytes``: ``None`` for null/empty data, the value otherwise."""
    if not data:
        return None
    try:
        return _loads(data)
    except _JSONDecodeError as e:
        raise ZNodeDecodeError(path, f"invalid JSON ({e})") from None


def json_object(path: str, value: Any, what: str = "znode") -> dict[str, Any]:
    if type(value) is not dict:
        raise ZNodeDecodeError(path, f"{what} is not a JSON object")
    return value


def req(path: str, obj: Mapping[str, Any], key: str) -> Any:
    try:
        return obj[key]
    except KeyError:
        raise ZNodeDecodeError(path, f"missing key {key!r}") from None


def as_int(path: str, value: Any, what: str) -> int:
    if type(value) is not int:
        raise ZNodeDecodeError(path, f"{what} must be an integer, got {brief(value)}")
    return value


def as_str(path: str, value: Any, what: str) -> str:
    if type(value) is not str:
        raise ZNodeDecodeError(path, f"{what} must be a string, got {brief(value)}")
    return value


def as_int_list(path: str, value: Any, what: str) -> tuple[int, ...]:
    if type(value) is not list or not all(type(x) is int for x in value):
        raise ZNodeDecodeError(path, f"{what} must be a list of integers, got {brief(value)}")
    return tuple(value)


def validate_replicas(replicas: Iterable[int], what: str) -> tuple[int, ...]:
    """Reject what Kafka's admin validation rejects: non-integers, negatives and duplicates."""
    out = tuple(replicas)
    for r in out:
        if type(r) is not int or r < 0:
            raise InvalidArgumentError(f"{what}: replica {brief(r)} is not a non-negative broker id")
    if len(set(out)) != len(out):
        raise InvalidArgumentError(f"{what}: duplicate replicas in {brief(list(out))}")
    return out


# -- topic ids (Kafka's Uuid) ----------------------------------------------------------------------


def new_topic_id() -> str:
    """A random topic id, rendered as Kafka's ``Uuid.toString`` (22 chars of URL-safe base64)."""
    while True:
        raw = os.urandom(16)
        text = base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")
        if any(raw) and not text.startswith("-"):
            return text


def is_topic_id(text: object) -> bool:
    """Kafka's ``Uuid.fromString`` acceptance: URL-safe base64 of exactly 16 bytes."""
    if type(text) is not str or not 22 <= len(text) <= 24:
        return False
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (ValueError, TypeError):
        return False
    return len(raw) == 16


# -- /controller and /controller_epoch -------------------------------------------------------------


def encode_controller(broker_id: int, timestamp_ms: int) -> bytes:
    return _dumps({"version": 1, "brokerid": broker_id, "timestamp": str(timestamp_ms)})


def decode_controller(data: bytes | None, path: str = "/controller") -> int | None:
    """The controller's broker id (versions 1 and 2 both carry ``brokerid``); None if empty."""
    js = parse_json(path, data)
    if js is None:
        return None
    return as_int(path, req(path, json_object(path, js), "brokerid"), "brokerid")


def encode_controller_epoch(epoch: int) -> bytes:
    return str(epoch).encode("ascii")


def decode_controller_epoch(data: bytes | None, path: str = "/controller_epoch") -> int:
    text = (data or b"").decode("utf-8", "replace").strip()
    if not re.fullmatch(r"-?[0-9]+", text):
        raise ZNodeDecodeError(path, f"controller epoch {brief(text)} is not a decimal integer")
    return _int_text(path, text, "controller epoch")


def _int_text(path: str, text: str, what: str) -> int:
    """``int(text)`` for digits already matched, refusing what Python's 4,300-digit limit refuses."""
    try:
        return int(text)
    except ValueError:
        raise ZNodeDecodeError(path, f"{what} {brief(text)} is too large") from None


# -- partition state ---------------------------------------------------------------------------------


_PARTITION_STATE = b'{"controller_epoch":%d,"leader":%d,"version":1,"leader_epoch":%d,"isr":[%b]}'
#: ISR -> its JSON list body. A cluster has few distinct ISRs; bounded all the same.
_ISR_TEXT: dict[tuple[int, ...], bytes] = {}
_ISR_TEXT_MAX = 4096


def encode_partition_state(state: LeaderIsrAndControllerEpoch) -> bytes:
    """Kafka's exact bytes (key order included), by formatting rather than ``orjson.dumps``.

    A failover writes tens of thousands of these in one go. orjson starts every output in a
    1 KiB buffer it then shrinks, so 60,000 calls walk ~60 MB of fresh heap: 2.4 us a call in a
    fresh process against 0.3 us for this (``tests/zk/test_codecs.py`` pins the bytes)."""
    return encode_leader_and_isr(state.leader_and_isr, state.controller_epoch)


def encode_leader_and_isr(lai: LeaderAndIsr, controller_epoch: int) -> bytes:
    """``encode_partition_state`` without building the ``LeaderIsrAndControllerEpoch`` first."""
    isr = lai.isr
    text = _ISR_TEXT.get(isr)
    if text is None:
        if len(_ISR_TEXT) >= _ISR_TEXT_MAX:
            _ISR_TEXT.clear()
        text = _ISR_TEXT[isr] = b",".join([b"%d" % r for r in isr])
    return _PARTITION_STATE % (controller_epoch, lai.leader, lai.leader_epoch, text)


def decode_partition_state(
    data: bytes | None, zk_version: int, path: str
) -> LeaderIsrAndControllerEpoch | None:
    """Kafka's ``TopicPartitionStateZNode.decode``; None for empty data. ``zk_version`` = stat version."""
    if not data:
        return None
    try:
        js = _loads(data)
        leader = js["leader"]
        leader_epoch = js["leader_epoch"]
        isr = js["isr"]
        controller_epoch = js["controller_epoch"]
    except _JSONDecodeError as e:
        raise ZNodeDecodeError(path, f"invalid JSON ({e})") from None
    except KeyError as e:
        raise ZNodeDecodeError(path, f"missing key {e.args[0]!r}") from None
    except TypeError:
        raise ZNodeDecodeError(path, "znode is not a JSON object") from None
    if type(leader) is not int or type(leader_epoch) is not int or type(controller_epoch) is not int:
        raise ZNodeDecodeError(path, "leader, leader_epoch and controller_epoch must be integers")
    if type(isr) is not list:
        raise ZNodeDecodeError(path, f"isr must be a list of integers, got {brief(isr)}")
    for r in isr:
        if type(r) is not int:
            raise ZNodeDecodeError(path, f"isr must be a list of integers, got {brief(isr)}")
    return build_leader_isr_and_controller_epoch(
        build_leader_and_isr(leader, leader_epoch, tuple(isr), zk_version), controller_epoch
    )


# -- /brokers/topics/<t> ----------------------------------------------------------------------------


def encode_topic(
    assignment: Mapping[int, ReplicaAssignment] | Mapping[TopicPartition, ReplicaAssignment],
    topic_id: str | None = None,
) -> bytes:
    """Version 3 (Kafka 2.8): ``topic_id`` only when known; adding/removing only when non-empty."""
    partitions: dict[str, list[int]] = {}
    adding: dict[str, list[int]] = {}
    removing: dict[str, list[int]] = {}
    for key, ra in sorted(assignment.items(), key=lambda kv: _partition_of(kv[0])):
        p = str(_partition_of(key))
        partitions[p] = list(ra.replicas)
        if ra.adding_replicas:
            adding[p] = list(ra.adding_replicas)
        if ra.removing_replicas:
            removing[p] = list(ra.removing_replicas)
    doc: dict[str, Any] = {"version": 3, "partitions": partitions}
    if topic_id is not None:
        doc["topic_id"] = topic_id
    doc["adding_replicas"] = adding
    doc["removing_replicas"] = removing
    return _dumps(doc)


def _partition_of(key: object) -> int:
    return key if isinstance(key, int) else int(key[1])  # type: ignore[index]


def decode_topic(
    topic: str, data: bytes | None, path: str | None = None
) -> tuple[str | None, dict[TopicPartition, ReplicaAssignment]]:
    """Kafka's ``TopicZNode.decode`` for versions 1-3: ``(topic_id or None, {tp: assignment})``.

    A failover decodes every topic znode, so this is a hot path: partitions that are not being
    reassigned share one ``ReplicaAssignment`` per distinct replica list (values are immutable).
    """
    path = path or f"/brokers/topics/{topic}"
    js = parse_json(path, data)
    if js is None:
        return None, {}
    obj = json_object(path, js)
    topic_id = obj.get("topic_id")
    if topic_id is not None and not is_topic_id(topic_id):
        raise ZNodeDecodeError(path, f"topic_id {brief(topic_id)} is not a valid Kafka Uuid")
    adding = _replica_map(path, obj.get("adding_replicas"), "adding_replicas")
    removing = _replica_map(path, obj.get("removing_replicas"), "removing_replicas")
    partitions = _replica_map(path, obj.get("partitions"), "partitions")
    assignments: list[ReplicaAssignment]
    if not adding and not removing:  # no reassignment: one shared value per distinct replica list
        assignments = _shared_assignments(partitions.values())
    else:
        assignments = []
        shared: dict[tuple[int, ...], ReplicaAssignment] = {}
        for key, replicas in partitions.items():
            if key in adding or key in removing:
                assignment = ReplicaAssignment(replicas, adding.get(key, ()), removing.get(key, ()))
            else:
                assignment = shared.get(replicas)  # type: ignore[assignment]
                if assignment is None:
                    assignment = shared[replicas] = ReplicaAssignment(replicas)
            assignments.append(assignment)
    keys = topic_partitions(repeat(topic, len(partitions)), partitions)
    return topic_id, dict(zip(keys, assignments, strict=True))


#: Replica list -> its ``ReplicaAssignment`` without a reassignment, shared by every topic decoded
#: since (values are immutable). A cluster has few distinct replica lists (Kafka's layout on 5
#: brokers: 5 per replication factor), so a failover's 2,000 topics build 5 values instead of
#: 10,000, and look each partition's up once. Cleared when full.
_SHARED_ASSIGNMENTS: dict[tuple[int, ...], ReplicaAssignment] = {}
_SHARED_ASSIGNMENTS_MAX = 4096


def _shared_assignments(replica_lists: Collection[tuple[int, ...]]) -> list[ReplicaAssignment]:
    """The shared ``ReplicaAssignment`` of each replica list, in order."""
    memo = _SHARED_ASSIGNMENTS
    try:
        return list(values_at(memo, replica_lists))  # the usual case: every list seen before
    except KeyError:
        pass
    if len(memo) >= _SHARED_ASSIGNMENTS_MAX:
        memo.clear()
    shared: dict[tuple[int, ...], ReplicaAssignment] = dict.fromkeys(replica_lists)  # type: ignore[assignment]
    for replicas in shared:
        assignment = memo.get(replicas)
        if assignment is None:
            assignment = memo[replicas] = ReplicaAssignment(replicas)
        shared[replicas] = assignment
    return list(values_at(shared, replica_lists))


_PARTITION_KEY = re.compile(r"-?[0-9]+")
#: The element types a replica list may have: ``int`` exactly (not ``bool``), checked for all at once.
_INT_ONLY = frozenset((int,))
_LIST_ONLY = frozenset((list,))


def _replica_map(path: str, value: Any, what: str) -> dict[int, tuple[int, ...]]:
    if value is None:
        return {}
    obj = json_object(path, value, what)
    if not obj:  # a version 3 topic's ``adding_replicas`` and ``removing_replicas``, mostly
        return {}
    # The common case checked and converted for all entries at once (a failover decodes 100,000
    # entries): every key plain ASCII digits, every value a list of exactly-``int``s. Anything
    # else takes the per-entry path below, which raises the precise error.
    keys = "".join(obj)
    lists = list(obj.values())
    if (
        keys.isascii()
        and keys.isdigit()
        and "" not in obj
        and _LIST_ONLY.issuperset(map(type, lists))
        and _INT_ONLY.issuperset(map(type, chain.from_iterable(lists)))
    ):
        try:
            return dict(zip(map(int, obj), map(tuple, lists), strict=True))
        except ValueError:  # more digits than int() takes from a string: the path below says so
            pass
    out: dict[int, tuple[int, ...]] = {}
    key_match = _PARTITION_KEY.fullmatch
    for key, replicas in obj.items():
        if not (key.isascii() and key.isdigit()) and key_match(key) is None:
            raise ZNodeDecodeError(path, f"{what} key {brief(key)} is not a partition number")
        try:
            partition = int(key)
        except ValueError:  # more digits than int() takes from a string
            raise ZNodeDecodeError(path, f"{what} key {key[:20]!r}... is not a partition number") from None
        if type(replicas) is list and _INT_ONLY.issuperset(map(type, replicas)):  # all exactly int
            out[partition] = tuple(replicas)
        else:  # ``as_int_list`` raises, with its message (built only here: the key is formatted lazily)
            out[partition] = as_int_list(path, replicas, f"{what}[{key}]")
    return out


# -- /brokers/ids/<id> -------------------------------------------------------------------------------

_ENDPOINT_RE = re.compile(r"^(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)$")


def encode_broker(broker: Broker, timestamp_ms: int, jmx_port: int = -1) -> bytes:
    """Broker registration version 5 (Kafka 2.8, IBP >= 2.7)."""
    plaintext = next((ep for ep in broker.endpoints if ep.security_protocol == "PLAINTEXT"), None)
    doc: dict[str, Any] = {
        "features": {name: {"min_version": lo, "max_version": hi} for name, lo, hi in broker.features},
        "listener_security_protocol_map": {ep.listener_name: ep.security_protocol for ep in broker.endpoints},
        "endpoints": [ep.connection_string() for ep in broker.endpoints],
        "jmx_port": jmx_port,
        "port": plaintext.port if plaintext else -1,
        "host": plaintext.host if plaintext else None,
        "version": 5,
        "timestamp": str(timestamp_ms),
    }
    if broker.rack is not None:
        doc["rack"] = broker.rack
    return _dumps(doc)


def decode_broker(broker_id: int, data: bytes | None, path: str | None = None) -> Broker:
    """Kafka's ``BrokerIdZNode.decode`` for registration versions 1-5."""
    path = path or f"/brokers/ids/{broker_id}"
    obj = json_object(path, parse_json(path, data))
    version = as_int(path, req(path, obj, "version"), "version")
    if version < 1:
        raise ZNodeDecodeError(path, f"unsupported broker registration version {version}")
    if version == 1:
        host = as_str(path, req(path, obj, "host"), "host")
        port = as_int(path, req(path, obj, "port"), "port")
        endpoints: tuple[EndPoint, ...] = (EndPoint(host, port),)
    else:
        raw = req(path, obj, "endpoints")
        if type(raw) is not list:
            raise ZNodeDecodeError(path, "endpoints must be a list of strings")
        protocols = obj.get("listener_security_protocol_map")
        protocol_map = json_object(path, protocols, "listener_security_protocol_map") if protocols else {}
        endpoints = tuple(_endpoint(path, as_str(path, e, "endpoint"), protocol_map) for e in raw)
    rack = obj.get("rack")
    if rack is not None:
        rack = as_str(path, rack, "rack")
    features: list[tuple[str, int, int]] = []
    for name, rng in json_object(path, obj.get("features") or {}, "features").items():
        r = json_object(path, rng, f"features[{name}]")
        lo = as_int(path, req(path, r, "min_version"), "min_version")
        hi = as_int(path, req(path, r, "max_version"), "max_version")
        features.append((name, lo, hi))
    return Broker(broker_id, endpoints, rack, tuple(sorted(features)))


def _endpoint(path: str, text: str, protocol_map: Mapping[str, Any]) -> EndPoint:
    m = _ENDPOINT_RE.match(text)
    if not m:
        raise ZNodeDecodeError(path, f"endpoint {brief(text)} is not LISTENER://host:port")
    listener, host, port = m.group(1), m.group(2), _int_text(path, m.group(3), "endpoint port")
    protocol = protocol_map.get(listener, listener)
    return EndPoint(host, port, listener, as_str(path, protocol, "security protocol"))
