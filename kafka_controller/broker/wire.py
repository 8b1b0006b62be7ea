"""Names and JSON helpers shared by the broker's API codecs (``controller_apis``, ``local_apis``).

Decoders here raise ``TypeError``/``KeyError``/``ValueError`` on a malformed body; the transport's
registry turns those into one INVALID_REQUEST line naming the API.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kafka_controller.domain.errors import brief
from kafka_controller.domain.values import TopicPartition

CONTROLLED_SHUTDOWN = "ControlledShutdown"
ALTER_ISR = "AlterIsr"
ELECT_LEADERS = "ElectLeaders"
ALTER_PARTITION_REASSIGNMENTS = "AlterPartitionReassignments"
LIST_PARTITION_REASSIGNMENTS = "ListPartitionReassignments"
DESCRIBE_CONTROLLER_CONTEXT = "DescribeControllerContext"
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
        DESCRIBE_CONTROLLER_CONTEXT,
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
        raise TypeError(f"expected an integer, got {brief(v)}")
    return v


def str_(v: Any) -> str:
    if type(v) is not str:
        raise TypeError(f"expected a string, got {brief(v)}")
    return v


def ints(v: Any) -> tuple[int, ...]:
    return tuple(map(int_, v))


#: Longest operation id on the wire: the audit store's ``operations.operation_id`` (a UUID string).
OPERATION_ID_MAX = 36


def operation_id_(body: Json) -> str | None:
    """The optional ``operation_id`` of an admin request body (absent for older clients)."""
    v = body.get("operation_id")
    if v is None:
        return None
    if type(v) is not str or not 0 < len(v) <= OPERATION_ID_MAX or not v.isprintable():
        raise ValueError(
            f"operation_id must be a printable string of 1-{OPERATION_ID_MAX} characters, got {brief(v)}"
        )
    return v


def with_operation_id(body: dict[str, Any], operation_id: str | None) -> dict[str, Any]:
    """``body`` with ``operation_id`` added only when there is one (older servers ignore it)."""
    if operation_id is not None:
        body["operation_id"] = operation_id
    return body


def enc_tps(tps: Iterable[TopicPartition] | None) -> Json:
    return None if tps is None else [[tp.topic, tp.partition] for tp in tps]
