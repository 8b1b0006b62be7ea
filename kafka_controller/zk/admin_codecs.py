"""Pure encoders/decoders for admin, notification, config, cluster-id and feature znodes
(docs/controller-behaviour.md §7.1).

The reassignment znode is decoded strictly (Kafka binds it with Jackson, failing on unknown or
missing fields); the others are as tolerant as Kafka's readers. Errors are ``ZNodeDecodeError``
naming the path; bad *input* to an encoder is ``InvalidArgumentError`` and nothing is written.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import orjson

from kafka_controller.domain.errors import InvalidArgumentError, ZNodeDecodeError
from kafka_controller.domain.values import TopicPartition
from kafka_controller.ports import FeatureZNode
from kafka_controller.zk.codecs import (
    as_int,
    as_int_list,
    as_str,
    json_object,
    parse_json,
    req,
    validate_replicas,
)
from kafka_controller.zk.paths import (
    CLUSTER_ID_PATH,
    FEATURE_PATH,
    PREFERRED_REPLICA_ELECTION_PATH,
    REASSIGN_PARTITIONS_PATH,
)

_dumps = orjson.dumps


def _partition_list(path: str, value: Any, what: str = "partitions") -> list[TopicPartition]:
    if type(value) is not list:
        raise ZNodeDecodeError(path, f"{what} must be a JSON array")
    out = []
    for entry in value:
        obj = json_object(path, entry, f"{what} entry")
        topic = as_str(path, req(path, obj, "topic"), "topic")
        out.append(TopicPartition(topic, as_int(path, req(path, obj, "partition"), "partition")))
    return out


def _encode_partitions(partitions: Iterable[TopicPartition]) -> list[dict[str, Any]]:
    out = []
    for tp in partitions:
        if not isinstance(tp, tuple) or len(tp) != 2 or type(tp[0]) is not str or type(tp[1]) is not int:
            raise InvalidArgumentError(f"{tp!r} is not a TopicPartition")
        out.append({"topic": tp[0], "partition": tp[1]})
    return out


# -- /admin/reassign_partitions (strict) -----------------------------------------------------------


def encode_reassignment(reassignment: Mapping[TopicPartition, Iterable[int]]) -> bytes:
    """The legacy reassignment znode, literal Kafka layout."""
    parts = []
    for tp, replicas in reassignment.items():
        entry = _encode_partitions([tp])[0]
        entry["replicas"] = list(validate_replicas(replicas, f"reassignment of {tp[0]}-{tp[1]}"))
        parts.append(entry)
    return _dumps({"version": 1, "partitions": parts})


_REASSIGN_TOP_KEYS = frozenset({"version", "partitions"})
_REASSIGN_ENTRY_KEYS = frozenset({"topic", "partition", "replicas"})


def decode_reassignment(
    data: bytes | None, path: str = REASSIGN_PARTITIONS_PATH
) -> dict[TopicPartition, tuple[int, ...]]:
    """Strict, like Kafka's Jackson binding: unknown or missing fields and wrong types fail."""
    js = parse_json(path, data)
    if js is None:
        raise ZNodeDecodeError(path, "reassignment znode is empty")
    obj = json_object(path, js)
    unknown = set(obj) - _REASSIGN_TOP_KEYS
    if unknown:
        raise ZNodeDecodeError(path, f"unknown field(s) {sorted(unknown)}")
    as_int(path, req(path, obj, "version"), "version")
    parts = req(path, obj, "partitions")
    if type(parts) is not list:
        raise ZNodeDecodeError(path, "partitions must be a JSON array")
    out: dict[TopicPartition, tuple[int, ...]] = {}
    for entry in parts:
        e = json_object(path, entry, "partitions entry")
        unknown = set(e) - _REASSIGN_ENTRY_KEYS
        if unknown:
            raise ZNodeDecodeError(path, f"unknown field(s) {sorted(unknown)} in a partitions entry")
        tp = TopicPartition(
            as_str(path, req(path, e, "topic"), "topic"), as_int(path, req(path, e, "partition"), "partition")
        )
        out[tp] = as_int_list(path, req(path, e, "replicas"), "replicas")
    return out


# -- /admin/preferred_replica_election ---------------------------------------------------------------


def encode_preferred_replica_election(partitions: Iterable[TopicPartition]) -> bytes:
    return _dumps({"version": 1, "partitions": _encode_partitions(partitions)})


def decode_preferred_replica_election(
    data: bytes | None, path: str = PREFERRED_REPLICA_ELECTION_PATH
) -> set[TopicPartition]:
    """Missing ``partitions`` means none (Kafka's reader); duplicates collapse into the set."""
    js = parse_json(path, data)
    if js is None:
        return set()
    obj = json_object(path, js)
    if "partitions" not in obj:
        return set()
    return set(_partition_list(path, obj["partitions"]))


# -- notifications -----------------------------------------------------------------------------------


def encode_isr_change_notification(partitions: Iterable[TopicPartition]) -> bytes:
    return _dumps({"version": 1, "partitions": _encode_partitions(partitions)})


def decode_isr_change_notification(data: bytes | None, path: str) -> list[TopicPartition]:
    js = parse_json(path, data)
    if js is None:
        return []
    return _partition_list(path, req(path, json_object(path, js), "partitions"))


LOG_DIR_FAILURE_EVENT = 1


def encode_log_dir_event(broker_id: int, event: int = LOG_DIR_FAILURE_EVENT) -> bytes:
    return _dumps({"version": 1, "broker": broker_id, "event": event})


def decode_log_dir_event(data: bytes | None, path: str) -> int:
    """The broker id of a log-dir event notification."""
    obj = json_object(path, parse_json(path, data))
    return as_int(path, req(path, obj, "broker"), "broker")


# -- configs -----------------------------------------------------------------------------------------


def encode_entity_config(config: Mapping[str, str]) -> bytes:
    for k, v in config.items():
        if type(k) is not str or not k or type(v) is not str:
            raise InvalidArgumentError(f"config entry {k!r}={v!r}: keys and values must be strings")
    return _dumps({"version": 1, "config": dict(config)})


def decode_entity_config(data: bytes | None, path: str) -> dict[str, str]:
    """Kafka's ``ConfigEntityZNode.decode``: no data or no ``config`` means no overrides."""
    js = parse_json(path, data)
    if js is None:
        return {}
    cfg = json_object(path, js).get("config")
    if cfg is None:
        return {}
    out = {}
    for k, v in json_object(path, cfg, "config").items():
        out[k] = as_str(path, v, f"config value of {k!r}")
    return out


def encode_config_change_notification(entity_path: str) -> bytes:
    if not entity_path:
        raise InvalidArgumentError("config change entity path is empty")
    return _dumps({"version": 2, "entity_path": entity_path})


def decode_config_change_notification(data: bytes | None, path: str) -> str:
    obj = json_object(path, parse_json(path, data))
    return as_str(path, req(path, obj, "entity_path"), "entity_path")


# -- /cluster/id --------------------------------------------------------------------------------------


def encode_cluster_id(cluster_id: str) -> bytes:
    """``version`` is a *string* in this znode (docs/controller-behaviour.md §7.1)."""
    if not cluster_id:
        raise InvalidArgumentError("cluster id is empty")
    return _dumps({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes | None, path: str = CLUSTER_ID_PATH) -> str:
    obj = json_object(path, parse_json(path, data))
    return as_str(path, req(path, obj, "id"), "id")


# -- /feature -----------------------------------------------------------------------------------------

FEATURE_STATUS_DISABLED = 0
FEATURE_STATUS_ENABLED = 1


def encode_feature(feature: FeatureZNode) -> bytes:
    if feature.status not in (FEATURE_STATUS_DISABLED, FEATURE_STATUS_ENABLED):
        raise InvalidArgumentError(f"feature status {feature.status!r} is not 0 or 1")
    features = {
        name: {"min_version_level": lo, "max_version_level": hi}
        for name, (lo, hi) in feature.features.items()
    }
    return _dumps({"features": features, "version": feature.version, "status": feature.status})


def decode_feature(data: bytes | None, path: str = FEATURE_PATH) -> FeatureZNode:
    obj = json_object(path, parse_json(path, data))
    version = as_int(path, req(path, obj, "version"), "version")
    if version < 1:
        raise ZNodeDecodeError(path, f"unsupported feature znode version {version}")
    status = as_int(path, req(path, obj, "status"), "status")
    if status not in (FEATURE_STATUS_DISABLED, FEATURE_STATUS_ENABLED):
        raise ZNodeDecodeError(path, f"unknown feature status {status}")
    features: dict[str, tuple[int, int]] = {}
    for name, rng in json_object(path, req(path, obj, "features"), "features").items():
        r = json_object(path, rng, f"features[{name}]")
        hi = as_int(path, req(path, r, "max_version_level"), "max_version_level")
        lo = as_int(path, r.get("min_version_level", 1), "min_version_level")
        features[name] = (lo, hi)
    return FeatureZNode(status, features, version)


__all__ = [
    "FEATURE_STATUS_DISABLED",
    "FEATURE_STATUS_ENABLED",
    "LOG_DIR_FAILURE_EVENT",
    "decode_cluster_id",
    "decode_config_change_notification",
    "decode_entity_config",
    "decode_feature",
    "decode_isr_change_notification",
    "decode_log_dir_event",
    "decode_preferred_replica_election",
    "decode_reassignment",
    "encode_cluster_id",
    "encode_config_change_notification",
    "encode_entity_config",
    "encode_feature",
    "encode_isr_change_notification",
    "encode_log_dir_event",
    "encode_preferred_replica_election",
    "encode_reassignment",
]
