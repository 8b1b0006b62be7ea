"""What the controller tells the audit sink: one record per attempted state transition.

The state machines fill what they know (partition, states, leader/ISR/epoch before and after,
strategy, outcome); the runtime stamps the rest (controller id and epoch, the event, the operation
id, a per-controller sequence number, the time) before the records reach the audit store.
Mutable and slotted because the runtime stamps them in place, in bulk.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields

OUTCOME_OK = "ok"
OUTCOME_INVALID = "invalid"
OUTCOME_FAILED = "failed"


@dataclass(slots=True)
class PartitionTransition:
    topic: str
    partition: int
    from_state: str
    to_state: str
    outcome: str = OUTCOME_OK
    leader_before: int | None = None
    leader_after: int | None = None
    isr_before: tuple[int, ...] | None = None
    isr_after: tuple[int, ...] | None = None
    leader_epoch_before: int | None = None
    leader_epoch_after: int | None = None
    election_strategy: str | None = None
    unclean: bool = False
    error: str | None = None
    # stamped by the runtime
    controller_id: int = -1
    controller_epoch: int = -1
    event: str | None = None
    operation_id: str | None = None
    sequence: int = -1
    timestamp_ms: int = 0
    dry_run: bool = False  # planned by a dry run's in-memory controller, not done


@dataclass(slots=True)
class ReplicaTransition:
    topic: str
    partition: int
    replica: int
    from_state: str
    to_state: str
    outcome: str = OUTCOME_OK
    leader_before: int | None = None
    leader_after: int | None = None
    isr_before: tuple[int, ...] | None = None
    isr_after: tuple[int, ...] | None = None
    leader_epoch_before: int | None = None
    leader_epoch_after: int | None = None
    error: str | None = None
    # stamped by the runtime
    controller_id: int = -1
    controller_epoch: int = -1
    event: str | None = None
    operation_id: str | None = None
    sequence: int = -1
    timestamp_ms: int = 0
    dry_run: bool = False  # planned by a dry run's in-memory controller, not done


@dataclass(slots=True)
class ControllerEventRecord:
    """Elections, resignations and failovers, with how long they took."""

    kind: str  # "elected" | "resigned" | "failover" | "moved" | ...
    broker_id: int
    controller_epoch: int
    started_ms: int
    duration_ms: float
    detail: str | None = None
    sequence: int = -1
    dry_run: bool = False
    # a failover's view of the outage it ends (see ``controller.failover``): the controller it
    # replaced, when that one's /controller went away, when offline partitions were first seen and
    # how many, and when every partition that could be led was led again
    previous_broker_id: int | None = None
    lost_ms: int | None = None
    first_offline_ms: int | None = None
    offline_partitions: int | None = None
    recovered_ms: int | None = None


AuditRecord = PartitionTransition | ReplicaTransition | ControllerEventRecord


def require_leading_fields(record_type: type, names: Sequence[str], builder: str) -> None:
    """Refuse to import a module whose ``builder`` fills ``record_type`` positionally (one record
    per partition in a failover, so keywords would cost) if the type's leading fields moved."""
    if [f.name for f in fields(record_type)][: len(names)] != list(names):
        raise ImportError(f"{record_type.__name__}'s fields changed order; update {builder}")
