"""What the controller tells the audit sink: one record per attempted state transition.

Bulk, successful transitions of one state-machine call may come as one columnar record instead
(``ReplicaTransitionColumns``, ``PartitionTransitionColumns``): the same rows, a fraction of the objects.

The state machines fill what they know (partition, states, leader/ISR/epoch before and after,
strategy, outcome); the runtime stamps the rest (controller id and epoch, the event, the operation
id, a per-controller sequence number, the time) before the records reach the audit store.
Mutable and slotted because the runtime stamps them in place, in bulk.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, fields

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


@dataclass(slots=True)
class ReplicaTransitionColumns:
    """Successful replica transitions to one state, in order, as columns: a failover's ~300,000 in
    a few objects instead of one ``ReplicaTransition`` (~200 bytes) each.

    What all rows share is stored once (the target, the outcome, and the runtime's stamps, which
    are stamped once: ``sequence`` is the first row's, row ``i`` has ``sequence + i``); what
    varies is one list per field, all of one length. Expanded into rows only by the audit
    writer, in bounded chunks, or into ``ReplicaTransition``s by ``expand`` for sinks that want
    records. Built by the state machines only for sinks that take it (``ports.BulkAuditSink``).
    """

    to_state: str
    outcome: str = OUTCOME_OK
    topic: list[str] = field(default_factory=list)
    partition: list[int] = field(default_factory=list)
    replica: list[int] = field(default_factory=list)
    from_state: list[str] = field(default_factory=list)
    leader_before: list[int | None] = field(default_factory=list)
    leader_after: list[int | None] = field(default_factory=list)
    isr_before: list[tuple[int, ...] | None] = field(default_factory=list)
    isr_after: list[tuple[int, ...] | None] = field(default_factory=list)
    leader_epoch_before: list[int | None] = field(default_factory=list)
    leader_epoch_after: list[int | None] = field(default_factory=list)
    # stamped by the runtime, once for every row
    controller_id: int = -1
    controller_epoch: int = -1
    event: str | None = None
    operation_id: str | None = None
    sequence: int = -1  #: the first row's; -1 when unstamped (every row then has none)
    timestamp_ms: int = 0
    dry_run: bool = False

    def __len__(self) -> int:
        return len(self.topic)

    @classmethod
    def unchanged(cls, to_state: str) -> ReplicaTransitionColumns:
        """An empty record for rows whose leader, ISR and leader epoch are the same after as
        before (a failover's 240,000 OnlineReplica rows at RF 3): its after columns are its
        before columns, one list each (~6 MB less), filled by ``add_unchanged``. ``add`` still
        works: the first row that differs gives the after columns lists of their own."""
        r = cls(to_state)
        r.leader_after = r.leader_before
        r.isr_after = r.isr_before
        r.leader_epoch_after = r.leader_epoch_before
        return r

    @property
    def shares_after_columns(self) -> bool:
        """True while the after columns are the before columns (see ``unchanged``)."""
        return self.leader_after is self.leader_before

    def own_after_columns(self) -> None:
        """Give the after columns lists of their own if they are the before columns (``unchanged``):
        before rows whose after values differ are added."""
        if self.leader_after is self.leader_before:
            self.leader_after = list(self.leader_before)
            self.isr_after = list(self.isr_before)
            self.leader_epoch_after = list(self.leader_epoch_before)

    def add_unchanged(
        self,
        topic: str,
        partition: int,
        replica: int,
        from_state: str,
        leader: int | None,
        isr: tuple[int, ...] | None,
        leader_epoch: int | None,
    ) -> None:
        """``add`` of a row whose after values are its before values (just ``add`` if not shared)."""
        if self.leader_after is not self.leader_before:
            self.add(
                topic, partition, replica, from_state, leader, leader, isr, isr, leader_epoch, leader_epoch
            )
            return
        self.topic.append(topic)
        self.partition.append(partition)
        self.replica.append(replica)
        self.from_state.append(from_state)
        self.leader_before.append(leader)
        self.isr_before.append(isr)
        self.leader_epoch_before.append(leader_epoch)

    def extend_unchanged(
        self,
        topics: Sequence[str],
        partitions: Sequence[int],
        replicas: Sequence[int],
        from_states: Sequence[str],
        leaders: Sequence[int | None],
        isrs: Sequence[tuple[int, ...] | None],
        leader_epochs: Sequence[int | None],
    ) -> None:
        """``add_unchanged`` for each row of these columns (all of one length), in order."""
        self.topic.extend(topics)
        self.partition.extend(partitions)
        self.replica.extend(replicas)
        self.from_state.extend(from_states)
        if self.leader_after is not self.leader_before:
            self.leader_after.extend(leaders)
            self.isr_after.extend(isrs)
            self.leader_epoch_after.extend(leader_epochs)
        self.leader_before.extend(leaders)
        self.isr_before.extend(isrs)
        self.leader_epoch_before.extend(leader_epochs)

    def add(
        self,
        topic: str,
        partition: int,
        replica: int,
        from_state: str,
        leader_before: int | None,
        leader_after: int | None,
        isr_before: tuple[int, ...] | None,
        isr_after: tuple[int, ...] | None,
        leader_epoch_before: int | None,
        leader_epoch_after: int | None,
    ) -> None:
        if self.leader_after is self.leader_before:
            self.own_after_columns()
        self.topic.append(topic)
        self.partition.append(partition)
        self.replica.append(replica)
        self.from_state.append(from_state)
        self.leader_before.append(leader_before)
        self.leader_after.append(leader_after)
        self.isr_before.append(isr_before)
        self.isr_after.append(isr_after)
        self.leader_epoch_before.append(leader_epoch_before)
        self.leader_epoch_after.append(leader_epoch_after)

    def expand(self) -> list[ReplicaTransition]:
        """One ``ReplicaTransition`` per row, as the state machine would have built them."""
        first, to_state, outcome = self.sequence, self.to_state, self.outcome
        columns = zip(
            self.topic,
            self.partition,
            self.replica,
            self.from_state,
            self.leader_before,
            self.leader_after,
            self.isr_before,
            self.isr_after,
            self.leader_epoch_before,
            self.leader_epoch_after,
            strict=True,
        )
        return [
            ReplicaTransition(
                t,
                p,
                r,
                f,
                to_state,
                outcome,
                lb,
                la,
                ib,
                ia,
                eb,
                ea,
                controller_id=self.controller_id,
                controller_epoch=self.controller_epoch,
                event=self.event,
                operation_id=self.operation_id,
                sequence=first + i if first >= 0 else -1,
                timestamp_ms=self.timestamp_ms,
                dry_run=self.dry_run,
            )
            for i, (t, p, r, f, lb, la, ib, ia, eb, ea) in enumerate(columns)
        ]


@dataclass(slots=True)
class PartitionTransitionColumns:
    """Partition transitions to one state under one strategy with one outcome, as columns (see
    ``ReplicaTransitionColumns``); ``error``: each row's message (failed elections), or None for none."""

    to_state: str
    outcome: str = OUTCOME_OK
    election_strategy: str | None = None
    topic: list[str] = field(default_factory=list)
    partition: list[int] = field(default_factory=list)
    from_state: list[str] = field(default_factory=list)
    leader_before: list[int | None] = field(default_factory=list)
    leader_after: list[int | None] = field(default_factory=list)
    isr_before: list[tuple[int, ...] | None] = field(default_factory=list)
    isr_after: list[tuple[int, ...] | None] = field(default_factory=list)
    leader_epoch_before: list[int | None] = field(default_factory=list)
    leader_epoch_after: list[int | None] = field(default_factory=list)
    unclean: list[bool] = field(default_factory=list)
    error: list[str | None] | None = None
    # stamped by the runtime, once for every row
    controller_id: int = -1
    controller_epoch: int = -1
    event: str | None = None
    operation_id: str | None = None
    sequence: int = -1  #: the first row's; -1 when unstamped
    timestamp_ms: int = 0
    dry_run: bool = False

    def __len__(self) -> int:
        return len(self.topic)

    def add(
        self,
        topic: str,
        partition: int,
        from_state: str,
        leader_before: int | None,
        leader_after: int | None,
        isr_before: tuple[int, ...] | None,
        isr_after: tuple[int, ...] | None,
        leader_epoch_before: int | None,
        leader_epoch_after: int | None,
        unclean: bool,
    ) -> None:
        self.topic.append(topic)
        self.partition.append(partition)
        self.from_state.append(from_state)
        self.leader_before.append(leader_before)
        self.leader_after.append(leader_after)
        self.isr_before.append(isr_before)
        self.isr_after.append(isr_after)
        self.leader_epoch_before.append(leader_epoch_before)
        self.leader_epoch_after.append(leader_epoch_after)
        self.unclean.append(unclean)

    def expand(self) -> list[PartitionTransition]:
        """One ``PartitionTransition`` per row, as the state machine would have built them."""
        first, to_state, outcome = self.sequence, self.to_state, self.outcome
        strategy, errors = self.election_strategy, self.error or [None] * len(self.topic)
        columns = zip(
            self.topic,
            self.partition,
            self.from_state,
            self.leader_before,
            self.leader_after,
            self.isr_before,
            self.isr_after,
            self.leader_epoch_before,
            self.leader_epoch_after,
            self.unclean,
            errors,
            strict=True,
        )
        return [
            PartitionTransition(
                t,
                p,
                f,
                to_state,
                outcome,
                lb,
                la,
                ib,
                ia,
                eb,
                ea,
                strategy,
                u,
                err,
                controller_id=self.controller_id,
                controller_epoch=self.controller_epoch,
                event=self.event,
                operation_id=self.operation_id,
                sequence=first + i if first >= 0 else -1,
                timestamp_ms=self.timestamp_ms,
                dry_run=self.dry_run,
            )
            for i, (t, p, f, lb, la, ib, ia, eb, ea, u, err) in enumerate(columns)
        ]


BulkTransitions = ReplicaTransitionColumns | PartitionTransitionColumns
#: What an audit sink is handed: single records, and bulk ones where the sink accepts them.
AuditItem = AuditRecord | BulkTransitions


def record_rows(items: Iterable[AuditItem]) -> int:
    """How many rows (transitions and events) ``items`` hold: a bulk record counts each of its rows."""
    return sum(len(r) if isinstance(r, BulkTransitions) else 1 for r in items)


def expand_records(items: Iterable[AuditItem]) -> list[AuditRecord]:
    """``items`` with every bulk record replaced by its rows as single records, in order."""
    out: list[AuditRecord] = []
    for r in items:
        if isinstance(r, BulkTransitions):
            out.extend(r.expand())
        else:
            out.append(r)
    return out


def require_leading_fields(record_type: type, names: Sequence[str], builder: str) -> None:
    """Refuse to import a module whose ``builder`` fills ``record_type`` positionally (one record
    per partition in a failover, so keywords would cost) if the type's leading fields moved."""
    if [f.name for f in fields(record_type)][: len(names)] != list(names):
        raise ImportError(f"{record_type.__name__}'s fields changed order; update {builder}")
