"""Broker-to-controller and admin APIs answered by the active controller: bodies and codecs.

ControlledShutdown, AlterIsr (KIP-497, Kafka's nested topics/partitions layout), ElectLeaders
(KIP-460), AlterPartitionReassignments and ListPartitionReassignments (KIP-455), and this project's
DescribeControllerContext (the controller's whole context, for reconciliation snapshots). Any other
broker answers them with a top-level NOT_CONTROLLER.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kafka_controller.broker.wire import (
    ALTER_ISR,
    ALTER_PARTITION_REASSIGNMENTS,
    CONTROLLED_SHUTDOWN,
    DESCRIBE_CONTROLLER_CONTEXT,
    ELECT_LEADERS,
    LIST_PARTITION_REASSIGNMENTS,
    Json,
    enc_tps,
    int_,
    ints,
    operation_id_,
    str_,
    tps,
    tps_or_none,
    with_operation_id,
)
from kafka_controller.core.context_description import check_description
from kafka_controller.domain.errors import brief
from kafka_controller.domain.requests import Errors
from kafka_controller.domain.values import LeaderAndIsr, ReplicaAssignment, TopicPartition
from kafka_controller.transport.codec import ApiCodec


# -- ControlledShutdown ----------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ControlledShutdownRequest:
    broker_id: int
    broker_epoch: int
    operation_id: str | None = None  # audit operation the request belongs to (not Kafka's)


@dataclass(frozen=True, slots=True)
class ControlledShutdownResponse:
    error: str
    partitions_remaining: tuple[TopicPartition, ...] = ()
    message: str | None = None


# -- AlterIsr (KIP-497) ----------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class AlterIsrRequest:
    """``isrs[tp]``: the leader's proposal (its leader epoch, the new ISR, the zk version it holds)."""

    broker_id: int
    broker_epoch: int
    isrs: Mapping[TopicPartition, LeaderAndIsr]


@dataclass(frozen=True, slots=True)
class AlterIsrResponse:
    """``partitions[tp]``: the state now in ZooKeeper, or the per-partition error name."""

    error: str
    partitions: Mapping[TopicPartition, LeaderAndIsr | str] = field(default_factory=dict)


def _encode_alter_isr_request(r: AlterIsrRequest) -> Json:
    topics: dict[str, list[Json]] = {}
    for tp, lai in r.isrs.items():
        topics.setdefault(tp.topic, []).append(
            {
                "partition": tp.partition,
                "leader_epoch": lai.leader_epoch,
                "new_isr": list(lai.isr),
                "current_isr_version": lai.zk_version,
            }
        )
    return {
        "broker_id": r.broker_id,
        "broker_epoch": r.broker_epoch,
        "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
    }


def _decode_alter_isr_request(b: Json) -> AlterIsrRequest:
    broker_id = int_(b["broker_id"])
    isrs = {
        TopicPartition(str_(t["name"]), int_(p["partition"])): LeaderAndIsr(
            broker_id, int_(p["leader_epoch"]), ints(p["new_isr"]), int_(p["current_isr_version"])
        )
        for t in b["topics"]
        for p in t["partitions"]
    }
    return AlterIsrRequest(broker_id, int_(b["broker_epoch"]), isrs)


def _encode_alter_isr_response(r: AlterIsrResponse) -> Json:
    topics: dict[str, list[Json]] = {}
    for tp, outcome in r.partitions.items():
        entry: dict[str, Json] = {"partition": tp.partition}
        if isinstance(outcome, LeaderAndIsr):
            entry.update(
                error="NONE",
                leader=outcome.leader,
                leader_epoch=outcome.leader_epoch,
                isr=list(outcome.isr),
                current_isr_version=outcome.zk_version,
            )
        else:
            entry["error"] = str(outcome)
        topics.setdefault(tp.topic, []).append(entry)
    return {"error": str(r.error), "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}


def _decode_alter_isr_response(b: Json) -> AlterIsrResponse:
    out: dict[TopicPartition, LeaderAndIsr | str] = {}
    for t in b.get("topics", ()):
        for p in t["partitions"]:
            tp = TopicPartition(str_(t["name"]), int_(p["partition"]))
            error = str_(p["error"])
            out[tp] = (
                LeaderAndIsr(
                    int_(p["leader"]),
                    int_(p["leader_epoch"]),
                    ints(p["isr"]),
                    int_(p["current_isr_version"]),
                )
                if error == Errors.NONE
                else error
            )
    return AlterIsrResponse(str_(b["error"]), out)


# -- ElectLeaders (KIP-460) ------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ElectLeadersRequest:
    election_type: str  # "preferred" | "unclean"
    partitions: tuple[TopicPartition, ...] | None  # None: every partition
    operation_id: str | None = None


@dataclass(frozen=True, slots=True)
class PartitionElectionResult:
    error: str
    leader: int = -1
    message: str | None = None


@dataclass(frozen=True, slots=True)
class ElectLeadersResponse:
    error: str
    results: Mapping[TopicPartition, PartitionElectionResult] = field(default_factory=dict)
    message: str | None = None


def _encode_elect_response(r: ElectLeadersResponse) -> Json:
    results = [
        {
            "topic": tp.topic,
            "partition": tp.partition,
            "error": str(x.error),
            "leader": x.leader,
            "message": x.message,
        }
        for tp, x in r.results.items()
    ]
    return {"error": str(r.error), "message": r.message, "results": results}


def _decode_elect_response(b: Json) -> ElectLeadersResponse:
    results = {
        TopicPartition(str_(x["topic"]), int_(x["partition"])): PartitionElectionResult(
            str_(x["error"]), int_(x.get("leader", -1)), x.get("message")
        )
        for x in b.get("results", ())
    }
    return ElectLeadersResponse(str_(b["error"]), results, b.get("message"))


# -- partition reassignments (KIP-455) -------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class AlterPartitionReassignmentsRequest:
    """``reassignments[tp]``: the target replicas, or None to cancel."""

    reassignments: Mapping[TopicPartition, tuple[int, ...] | None]
    operation_id: str | None = None


@dataclass(frozen=True, slots=True)
class ReassignmentResult:
    error: str
    message: str | None = None


@dataclass(frozen=True, slots=True)
class AlterPartitionReassignmentsResponse:
    error: str
    results: Mapping[TopicPartition, ReassignmentResult] = field(default_factory=dict)
    message: str | None = None


@dataclass(frozen=True, slots=True)
class ListPartitionReassignmentsRequest:
    partitions: tuple[TopicPartition, ...] | None


@dataclass(frozen=True, slots=True)
class ListPartitionReassignmentsResponse:
    error: str
    reassignments: Mapping[TopicPartition, ReplicaAssignment] = field(default_factory=dict)
    message: str | None = None


def _decode_alter_reassignments(b: Json) -> AlterPartitionReassignmentsRequest:
    return AlterPartitionReassignmentsRequest(
        {
            TopicPartition(str_(x["topic"]), int_(x["partition"])): (
                None if x["replicas"] is None else ints(x["replicas"])
            )
            for x in b["reassignments"]
        },
        operation_id_(b),
    )


def _encode_alter_reassignments(r: AlterPartitionReassignmentsRequest) -> Json:
    return with_operation_id(
        {
            "reassignments": [
                {"topic": tp.topic, "partition": tp.partition, "replicas": None if rs is None else list(rs)}
                for tp, rs in r.reassignments.items()
            ]
        },
        r.operation_id,
    )


def _encode_alter_reassignments_response(r: AlterPartitionReassignmentsResponse) -> Json:
    results = [
        {"topic": tp.topic, "partition": tp.partition, "error": str(x.error), "message": x.message}
        for tp, x in r.results.items()
    ]
    return {"error": str(r.error), "message": r.message, "results": results}


def _decode_alter_reassignments_response(b: Json) -> AlterPartitionReassignmentsResponse:
    results = {
        TopicPartition(str_(x["topic"]), int_(x["partition"])): ReassignmentResult(
            str_(x["error"]), x.get("message")
        )
        for x in b.get("results", ())
    }
    return AlterPartitionReassignmentsResponse(str_(b["error"]), results, b.get("message"))


def _encode_list_response(r: ListPartitionReassignmentsResponse) -> Json:
    items = [
        {
            "topic": tp.topic,
            "partition": tp.partition,
            "replicas": list(a.replicas),
            "adding_replicas": list(a.adding_replicas),
            "removing_replicas": list(a.removing_replicas),
        }
        for tp, a in r.reassignments.items()
    ]
    return {"error": str(r.error), "message": r.message, "reassignments": items}


def _decode_list_response(b: Json) -> ListPartitionReassignmentsResponse:
    items = {
        TopicPartition(str_(x["topic"]), int_(x["partition"])): ReplicaAssignment(
            ints(x["replicas"]), ints(x["adding_replicas"]), ints(x["removing_replicas"])
        )
        for x in b.get("reassignments", ())
    }
    return ListPartitionReassignmentsResponse(str_(b["error"]), items, b.get("message"))


# -- DescribeControllerContext (this project's; not in Kafka) ---------------------------------------
@dataclass(frozen=True, slots=True)
class DescribeControllerContextRequest:
    """``timeout_ms``: how long the broker waits for the controller's answer (None: its own limit,
    ``controller_timeout_s``); Kafka's admin requests carry the same field."""

    timeout_ms: int | None = None


@dataclass(frozen=True, slots=True)
class DescribeControllerContextResponse:
    """``context``: the columnar document of ``core.context_description`` (checked on decode)."""

    error: str
    context: dict[str, Any] | None = None
    message: str | None = None


#: Kafka's ``timeout_ms`` fields are int32.
TIMEOUT_MS_MAX = 2**31 - 1


def _decode_describe_context_request(b: Json) -> DescribeControllerContextRequest:
    timeout_ms = b.get("timeout_ms")
    if timeout_ms is not None and not 1 <= int_(timeout_ms) <= TIMEOUT_MS_MAX:
        raise ValueError(f"timeout_ms must be between 1 and {TIMEOUT_MS_MAX}, got {brief(timeout_ms)}")
    return DescribeControllerContextRequest(timeout_ms)


def _decode_describe_context_response(b: Json) -> DescribeControllerContextResponse:
    error = str_(b["error"])
    context = b.get("context")
    if error == Errors.NONE:
        context = check_description(context)
    elif context is not None:
        raise ValueError(f"a {error} answer carries no context")
    message = b.get("message")
    return DescribeControllerContextResponse(error, context, None if message is None else str_(message))


CONTROLLER_API_CODECS: tuple[ApiCodec, ...] = (
    ApiCodec(
        CONTROLLED_SHUTDOWN,
        lambda r: with_operation_id(
            {"broker_id": r.broker_id, "broker_epoch": r.broker_epoch}, r.operation_id
        ),
        lambda b: ControlledShutdownRequest(int_(b["broker_id"]), int_(b["broker_epoch"]), operation_id_(b)),
        lambda r: {
            "error": str(r.error),
            "message": r.message,
            "partitions_remaining": enc_tps(r.partitions_remaining),
        },
        lambda b: ControlledShutdownResponse(
            str_(b["error"]), tps(b["partitions_remaining"]), b.get("message")
        ),
    ),
    ApiCodec(
        ALTER_ISR,
        _encode_alter_isr_request,
        _decode_alter_isr_request,
        _encode_alter_isr_response,
        _decode_alter_isr_response,
    ),
    ApiCodec(
        ELECT_LEADERS,
        lambda r: with_operation_id(
            {"election_type": r.election_type, "partitions": enc_tps(r.partitions)}, r.operation_id
        ),
        lambda b: ElectLeadersRequest(
            str_(b["election_type"]), tps_or_none(b["partitions"]), operation_id_(b)
        ),
        _encode_elect_response,
        _decode_elect_response,
    ),
    ApiCodec(
        ALTER_PARTITION_REASSIGNMENTS,
        _encode_alter_reassignments,
        _decode_alter_reassignments,
        _encode_alter_reassignments_response,
        _decode_alter_reassignments_response,
    ),
    ApiCodec(
        LIST_PARTITION_REASSIGNMENTS,
        lambda r: {"partitions": enc_tps(r.partitions)},
        lambda b: ListPartitionReassignmentsRequest(tps_or_none(b["partitions"])),
        _encode_list_response,
        _decode_list_response,
    ),
    ApiCodec(
        DESCRIBE_CONTROLLER_CONTEXT,
        lambda r: {} if r.timeout_ms is None else {"timeout_ms": r.timeout_ms},
        _decode_describe_context_request,
        lambda r: {"error": str(r.error), "message": r.message, "context": r.context},
        _decode_describe_context_response,
    ),
)
