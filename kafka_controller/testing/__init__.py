"""Test doubles and harnesses shipped as product code
(docs/rules.md, fakes are part of the product).

The names below are light to import. The in-memory metadata store
(``kafka_controller.testing.memory_store``), the ZooKeeper pytest harness (``.zk_harness``) and the
private PostgreSQL helper (``.postgres``) are imported from their submodules.
"""

from kafka_controller.testing.mock_state_machines import (
    MockPartitionStateMachine,
    MockReplicaStateMachine,
    RecordingDeletionClient,
)
from kafka_controller.testing.recording import (
    HoldingAuditSink,
    RecordingAuditSink,
    RecordingRequestBatch,
    ScriptedPartitionStateStore,
)
from kafka_controller.testing.recording_channel import (
    RecordingBrokerChannel,
    SentRequest,
    default_response,
)

__all__ = [
    "HoldingAuditSink",
    "MockPartitionStateMachine",
    "MockReplicaStateMachine",
    "RecordingAuditSink",
    "RecordingBrokerChannel",
    "RecordingDeletionClient",
    "RecordingRequestBatch",
    "ScriptedPartitionStateStore",
    "SentRequest",
    "default_response",
]
