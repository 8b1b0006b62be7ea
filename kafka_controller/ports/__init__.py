"""Ports: one ``typing.Protocol`` per outside system, each method's guarantee on its docstring.

The core reaches ZooKeeper only through ``PartitionStateStore`` (the part of the metadata store the
state machines need), brokers only through ``BrokerChannel``, the audit store only through
``AuditSink`` (or ``BulkAuditSink``), and time only through ``Clock``. Errors crossing a port are
the project's own (``kafka_controller.domain.errors``): ``ControllerMovedError`` means fenced (resign),
``StoreUnavailableError`` means try again later, any other ``MetadataStoreError`` is per znode.

One module per protocol group: ``partition_state`` (what the state machines use), ``metadata_store``
(the full ``KafkaZkClient`` and its event types), ``broker_channel``, ``audit``, ``clock`` and
``deletion``. Every name is re-exported here: import from ``kafka_controller.ports``.
"""

from kafka_controller.ports.audit import AuditSink, BulkAuditSink, NullAuditSink, record_items
from kafka_controller.ports.broker_channel import BrokerChannel, ResponseCallback
from kafka_controller.ports.clock import Clock, SystemClock
from kafka_controller.ports.deletion import DeletionClient
from kafka_controller.ports.metadata_store import (
    FeatureZNode,
    MetadataStore,
    SessionEvent,
    SessionListener,
    TopicIdReplicaAssignment,
    WatchHandler,
    ZNodeEvent,
    ZNodeEventType,
)
from kafka_controller.ports.partition_state import (
    PartitionStateRead,
    PartitionStateStore,
    UpdateLeaderAndIsrResult,
)

__all__ = [
    "AuditSink",
    "BrokerChannel",
    "BulkAuditSink",
    "Clock",
    "DeletionClient",
    "FeatureZNode",
    "MetadataStore",
    "NullAuditSink",
    "PartitionStateRead",
    "PartitionStateStore",
    "ResponseCallback",
    "SessionEvent",
    "SessionListener",
    "SystemClock",
    "TopicIdReplicaAssignment",
    "UpdateLeaderAndIsrResult",
    "WatchHandler",
    "ZNodeEvent",
    "ZNodeEventType",
    "record_items",
]
