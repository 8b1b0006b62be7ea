"""Names and JSON helpers shared by the broker's API codecs (``controller_apis``, ``local_apis``).

Decoders here raise ``TypeError``/``KeyError``/``ValueError`` on a malformed body; the transport's
registry turns those into one INVALID_REQUEST line naming the API.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kafka_controller.domain.values import TopicPartition

CONTROLLED_SHUTDOWN = "ControlledShutdown"
ALTER_ISR = "AlterIsr"
ELECT_LEADERS = "ElectLeaders"
ALTER_PARTITION_REASSIGNMENTS = "AlterPartitionReassignments"
LIST_PARTITION_REASSIGNMENTS = "ListPartitionReassignments"
FETCH = "Fetch"
DESCRIBE_REPLICAS = "DescribeReplicas"
METADATA = "Metadata"
SHUTDOWN_BROKER = "ShutdownBroker"

#: APIs only the active controller answers (others say NOT_CONTROLLER).
CONTROLLER_APIS = frozenset(
    {
        CONTROLLED_SHUTDOWN,
        ALTER_ISR,
        ELECT_LEADERS,
        ALTER_PARTITION_REASSIGNMENTS,
        LIST_PARTITION_REASSIGNMENTS,
    }
)
#: Kafka errors the domain enum does not carry (fetch only).
NOT_LEADER_OR_FOLLOWER = "NOT_LEADER_OR_FOLLOWER"
UNKNOWN_LEADER_EPOCH = "UNKNOWN_LEADER_EPOCH"

Json = Any


def tps(raw: Json) -> tuple[TopicPartition, ...]:
    return tuple(TopicPartition(str_(t), int_(p)) for t, p in raw)


def tps_or_none(raw: Json) -> tuple[TopicPartition, ...] | None:
    return None if raw is None else tps(raw)


def int_(v: Any) -> int:
    if type(v) is not int:
        raise TypeError(f"expected an integer, got {v!r}")
    return v


def str_(v: Any) -> str:
    if type(v) is not str:
        raise TypeError(f"expected a string, got {v!r}")
    return v


def ints(v: Any) -> tuple[int, ...]:
    return tuple(map(int_, v))


def enc_tps(tps: Iterable[TopicPartition] | None) -> Json:
    return None if tps is None else [[tp.topic, tp.partition] for tp in tps]
