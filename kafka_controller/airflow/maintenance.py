"""Pure decisions for broker maintenance, over the ``ClusterView`` that ``admin.describe`` reads.

Every rule here is a function of plain values, so the operators' guard rails are tested without a
cluster: which broker goes last, what a stop would take offline, when a broker counts as back,
and when a controller failover counts as recovered.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from kafka_controller.admin.describe import ClusterView, PartitionView
from kafka_controller.domain.errors import InvalidArgumentError
from kafka_controller.domain.values import NO_LEADER, TopicPartition


def restart_order(
    brokers: Iterable[int], controller_id: int | None, requested: Sequence[int] | None = None
) -> list[int]:
    """Brokers in restart order, the active controller last (kafka-utils ``--active-controller-for-last``):
    every other restart would otherwise move the controller once more. ``requested`` (a subset, in
    the operator's order) is checked against the registered brokers."""
    live = sorted(set(brokers))
    if requested:
        seen: set[int] = set()
        for b in requested:
            if b not in live:
                raise InvalidArgumentError(f"broker {b} is not registered (registered: {live})")
            if b in seen:
                raise InvalidArgumentError(f"broker {b} is listed twice")
            seen.add(b)
        order = list(requested)
    else:
        order = live
    return [b for b in order if b != controller_id] + [b for b in order if b == controller_id]


def live_brokers(view: ClusterView) -> set[int]:
    return {b.id for b in view.brokers}


def offline_if_stopped(view: ClusterView, broker_id: int) -> list[PartitionView]:
    """Partitions that have a live leader now and would have none if ``broker_id`` stopped: no
    other live replica in the ISR (RF=1 partitions on it, or ones whose ISR shrank to it). A
    controlled shutdown cannot move their leadership anywhere (Kafka keeps them on the broker), and
    an unclean election would be the only way back."""
    live = live_brokers(view) - {broker_id}
    return [
        p
        for p in view.partitions
        if broker_id in p.replicas and not p.offline and not any(r in live for r in p.isr)
    ]


def already_offline(view: ClusterView) -> list[PartitionView]:
    return [p for p in view.partitions if p.offline]


@dataclass(frozen=True, slots=True)
class StopCheck:
    """Whether stopping one broker is safe; ``reason`` is one line when it is not."""

    broker_id: int
    at_risk: tuple[TopicPartition, ...]
    under_replicated: tuple[TopicPartition, ...]

    @property
    def safe(self) -> bool:
        return not self.at_risk

    @property
    def reason(self) -> str:
        if self.safe:
            return ""
        shown = ", ".join(map(str, self.at_risk[:5]))
        more = f" and {len(self.at_risk) - 5} more" if len(self.at_risk) > 5 else ""
        return (
            f"stopping broker {self.broker_id} would take {len(self.at_risk)} partition(s) offline "
            f"(no other in-sync replica is live): {shown}{more}"
        )


def check_stop(view: ClusterView, broker_id: int) -> StopCheck:
    """The guard before each broker of a rolling restart (koperator #767, cruise-control #403)."""
    at_risk = tuple(p.topic_partition for p in offline_if_stopped(view, broker_id))
    urp = tuple(p.topic_partition for p in view.partitions if p.under_replicated and broker_id in p.replicas)
    return StopCheck(broker_id, at_risk, urp)


def broker_caught_up(view: ClusterView, broker_id: int) -> bool:
    """The broker is registered and back in the ISR of every partition it hosts, and nothing in the
    cluster is under-replicated or offline (mesos/kafka #253: wait before the next broker)."""
    if broker_id not in live_brokers(view):
        return False
    for p in view.partitions:
        if p.offline or p.under_replicated:
            return False
        if broker_id in p.replicas and broker_id not in p.isr:
            return False
    return True


def preferred_partitions_of(view: ClusterView, broker_id: int) -> list[TopicPartition]:
    """Partitions whose preferred (first) replica is ``broker_id`` but that another broker leads."""
    return [
        p.topic_partition
        for p in view.partitions
        if p.replicas and p.replicas[0] == broker_id and p.leader != broker_id
    ]


def leaderless_with_live_isr(view: ClusterView) -> list[TopicPartition]:
    """Partitions that should have a leader (a live replica is in the ISR) but have none, or whose
    leader is not live. Empty = a failover has recovered every partition it can."""
    live = live_brokers(view)
    return [
        p.topic_partition
        for p in view.partitions
        if (p.leader == NO_LEADER or p.leader not in live) and any(r in live for r in p.isr)
    ]


def recoverable_offline(
    view: ClusterView, partitions: Iterable[TopicPartition] | None = None
) -> dict[TopicPartition, list[int]]:
    """Offline partitions and the live replicas an unclean election could choose from (out of the
    ISR, so committed data may be lost); restricted to ``partitions`` when given."""
    wanted = None if partitions is None else set(partitions)
    live = live_brokers(view)
    out: dict[TopicPartition, list[int]] = {}
    for p in view.partitions:
        if not p.offline or (wanted is not None and p.topic_partition not in wanted):
            continue
        out[p.topic_partition] = [r for r in p.replicas if r in live]
    return out
