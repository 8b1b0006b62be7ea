"""Test doubles and harnesses shipped as product code (house rule 9).

Import the submodules directly (``kafka_controller.testing.recording``, ``.memory_store``,
``.zk_harness``); this package imports nothing heavy.
"""

from kafka_controller.testing.recording import (
    RecordingAuditSink,
    RecordingRequestBatch,
    ScriptedPartitionStateStore,
)

__all__ = ["RecordingAuditSink", "RecordingRequestBatch", "ScriptedPartitionStateStore"]
