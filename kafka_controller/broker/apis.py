"""The broker's own APIs on the wire: broker-to-controller, broker-to-broker and admin requests.

The control APIs (LeaderAndIsr, UpdateMetadata, StopReplica) are the transport's; this module adds,
with one registration each on ``DEFAULT_APIS``, the rest of what a 2.8 broker serves. Bodies are
JSON objects with Kafka's field names in Python spelling; partitions are ``[topic, partition]``.

=============================  ===========================================  =====================
API                            request body                                 served by
=============================  ===========================================  =====================
ControlledShutdown             broker_id, broker_epoch                      active controller
AlterIsr                       broker_id, broker_epoch, topics[partitions]  active controller
ElectLeaders                   election_type, partitions (null = all)       active controller
AlterPartitionReassignments    reassignments[{topic, partition, replicas}]  active controller
ListPartitionReassignments     partitions (null = all in progress)          active controller
DescribeControllerContext      timeout_ms (optional)                        active controller
Fetch                          replica_id, columns of partitions            partition leaders
DescribeReplicas               partitions (null = all local)                every broker
Metadata                       {}                                           every broker
ShutdownBroker                 operation_id (optional)                      the broker itself
=============================  ===========================================  =====================

DescribeControllerContext is this project's, not Kafka's: the controller's whole context (partition
and replica states, leadership cache, assignments, reassignments) as one columnar document built on
its event thread (``core.context_description``), for reconciliation snapshots.

Every response has a top-level ``error`` (a Kafka error name; ``NONE`` on success). A broker that is
not the active controller answers the controller APIs with ``NOT_CONTROLLER``: the client then
finds the controller in ``/controller`` and retries (``admin_client``).
"""

from __future__ import annotations

from kafka_controller.broker.controller_apis import (
    CONTROLLER_API_CODECS,
    AlterIsrRequest,
    AlterIsrResponse,
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    DescribeControllerContextRequest,
    DescribeControllerContextResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    PartitionElectionResult,
    ReassignmentResult,
)
from kafka_controller.broker.local_apis import (
    LOCAL_API_CODECS,
    DescribeReplicasResponse,
    FetchRequest,
    FetchResponse,
    MetadataCacheResponse,
    ReplicaInfo,
    ShutdownBrokerRequest,
    SimpleResponse,
)
from kafka_controller.broker.wire import (
    ALTER_ISR,
    ALTER_PARTITION_REASSIGNMENTS,
    CONTROLLED_SHUTDOWN,
    CONTROLLER_APIS,
    DESCRIBE_CONTROLLER_CONTEXT,
    DESCRIBE_REPLICAS,
    ELECT_LEADERS,
    FETCH,
    LIST_PARTITION_REASSIGNMENTS,
    METADATA,
    NOT_LEADER_OR_FOLLOWER,
    SHUTDOWN_BROKER,
    UNKNOWN_LEADER_EPOCH,
)
from kafka_controller.transport.codec import DEFAULT_APIS, ApiCodec, ApiRegistry

__all__ = [
    "ALTER_ISR",
    "ALTER_PARTITION_REASSIGNMENTS",
    "BROKER_API_CODECS",
    "CONTROLLED_SHUTDOWN",
    "CONTROLLER_APIS",
    "DESCRIBE_CONTROLLER_CONTEXT",
    "DESCRIBE_REPLICAS",
    "ELECT_LEADERS",
    "FETCH",
    "LIST_PARTITION_REASSIGNMENTS",
    "METADATA",
    "NOT_LEADER_OR_FOLLOWER",
    "SHUTDOWN_BROKER",
    "UNKNOWN_LEADER_EPOCH",
    "AlterIsrRequest",
    "AlterIsrResponse",
    "AlterPartitionReassignmentsRequest",
    "AlterPartitionReassignmentsResponse",
    "ControlledShutdownRequest",
    "ControlledShutdownResponse",
    "DescribeControllerContextRequest",
    "DescribeControllerContextResponse",
    "DescribeReplicasResponse",
    "ElectLeadersRequest",
    "ElectLeadersResponse",
    "FetchRequest",
    "FetchResponse",
    "ListPartitionReassignmentsRequest",
    "ListPartitionReassignmentsResponse",
    "MetadataCacheResponse",
    "PartitionElectionResult",
    "ReassignmentResult",
    "ReplicaInfo",
    "ShutdownBrokerRequest",
    "SimpleResponse",
    "register_broker_apis",
]

#: Every API this package adds to the transport's registry.
BROKER_API_CODECS: tuple[ApiCodec, ...] = CONTROLLER_API_CODECS + LOCAL_API_CODECS


def register_broker_apis(registry: ApiRegistry = DEFAULT_APIS) -> ApiRegistry:
    """Add the broker's APIs to ``registry`` (idempotent: names already there are left alone)."""
    known = set(registry.names())
    for codec in BROKER_API_CODECS:
        if codec.name not in known:
            registry.register(codec)
    return registry


register_broker_apis()
