"""Moving leadership off a broker with Kafka's public APIs only (Cruise Control's "demote").

This project's controlled shutdown is a broker-to-controller request (ControlledShutdown) that an
Apache Kafka controller answers only for the broker itself, with its broker epoch, over the
inter-broker listener: an operator cannot send it. The demote here works on any ZooKeeper-mode
Kafka 2.4+ (KIP-455 reassignments, KIP-460 elections):

1. reorder each replica list that holds the broker so that it comes last, with the in-sync
   replicas first (a reorder-only reassignment: no data moves, the controller completes it at
   once), so the broker is nobody's preferred leader;
2. wait until ZooKeeper holds the new orders;
3. a preferred election of every partition the broker still leads.

The original orders are returned, so that ``restore_order`` can put them back once the broker is
up again (a rolling restart does; else the broker would stay last everywhere, and preferred
elections would keep leadership off it).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Protocol, TypeVar

from kafka_controller.domain.errors import KafkaControllerError
from kafka_controller.domain.values import LeaderIsrAndControllerEpoch, ReplicaAssignment, TopicPartition
from kafka_controller.ports import Clock, MetadataStore

T = TypeVar("T")


class DemoteHook(Protocol):
    """What the demotion uses of ``hooks.cluster.KafkaClusterHook``: named here so that the hook
    imports this module and this module never imports the hook back."""

    clock: Clock

    def get_store(self) -> MetadataStore: ...

    def assignments(self, topics: Collection[str]) -> dict[TopicPartition, ReplicaAssignment]: ...

    def alter_reassignments(
        self, plan: Mapping[TopicPartition, Sequence[int] | None], operation_id: str | None = None
    ) -> dict[TopicPartition, tuple[str, str | None]]: ...

    def elect_leaders(
        self,
        election_type: str,
        partitions: Collection[TopicPartition] | None,
        operation_id: str | None = None,
    ) -> dict[TopicPartition, tuple[str, int, str | None]]: ...

    def wait_for(
        self, probe: Callable[[], T | None], timeout_s: float, what: str, interval_s: float = 0.25
    ) -> T: ...

    def wait_until(
        self, probe: Callable[[], object], timeout_s: float, what: str, interval_s: float = 0.25
    ) -> bool: ...


#: ``demote=`` values: this project's ControlledShutdown API, or the reorder + preferred election.
DEMOTE_MODES = ("controlled_shutdown", "reorder")


def plan_demotion(
    broker_id: int,
    assignments: Mapping[TopicPartition, ReplicaAssignment],
    isrs: Mapping[TopicPartition, tuple[int, ...]],
) -> dict[TopicPartition, tuple[int, ...]]:
    """The new replica order of each partition where ``broker_id`` is a replica but not last:
    in-sync replicas first (in their current order), then the others, then the broker. Partitions
    with one replica, or being reassigned, are left alone."""
    plan: dict[TopicPartition, tuple[int, ...]] = {}
    for tp, ra in sorted(assignments.items()):
        replicas = ra.replicas
        if broker_id not in replicas or len(replicas) < 2 or ra.is_being_reassigned:
            continue
        isr = set(isrs.get(tp, ()))
        others = [r for r in replicas if r != broker_id]
        order = (*[r for r in others if r in isr], *[r for r in others if r not in isr], broker_id)
        if order != replicas:
            plan[tp] = order
    return plan


def _states(hook: DemoteHook, tps: list[TopicPartition]) -> dict[TopicPartition, LeaderIsrAndControllerEpoch]:
    return {
        tp: s
        for tp, s in hook.get_store().get_partition_states(tps).items()
        if isinstance(s, LeaderIsrAndControllerEpoch)
    }


def _reorder(
    hook: DemoteHook,
    plan: Mapping[TopicPartition, tuple[int, ...]],
    timeout_s: float,
    operation_id: str | None,
) -> None:
    results = hook.alter_reassignments(dict(plan), operation_id)
    refused = {tp: r for tp, r in results.items() if r[0] != "NONE"}
    if refused:
        tp, (error, message) = sorted(refused.items())[0]
        raise KafkaControllerError(
            f"reordering replicas was refused for {len(refused)} partition(s), e.g. {tp}: {error}"
            + (f" ({message})" if message else "")
        )

    def applied() -> bool:
        current = hook.assignments({tp.topic for tp in plan})
        return all(
            current[tp].replicas == order and not current[tp].is_being_reassigned
            for tp, order in plan.items()
        )

    hook.wait_for(applied, timeout_s, f"{len(plan)} reordered replica list(s) in ZooKeeper")


def demote_by_reorder(
    hook: DemoteHook, broker_id: int, timeout_s: float, operation_id: str | None
) -> tuple[list[str], dict[TopicPartition, tuple[int, ...]]]:
    """Move leadership off ``broker_id`` through Kafka's protocol; ``(partitions it still leads,
    original orders of the reordered partitions)``. Partitions still led at the deadline are the
    caller's to judge, as with a controlled shutdown."""
    store = hook.get_store()
    assignments = hook.assignments(store.get_all_topics())
    states = _states(hook, sorted(assignments))
    plan = plan_demotion(broker_id, assignments, {tp: s.leader_and_isr.isr for tp, s in states.items()})
    originals = {tp: assignments[tp].replicas for tp in plan}
    deadline = hook.clock.monotonic() + timeout_s
    if plan:
        _reorder(hook, plan, timeout_s, operation_id)
    led = sorted(
        tp for tp, s in _states(hook, sorted(assignments)).items() if s.leader_and_isr.leader == broker_id
    )
    if led:
        hook.elect_leaders("preferred", led, operation_id)

    def still_led() -> list[TopicPartition]:
        return sorted(tp for tp, s in _states(hook, led).items() if s.leader_and_isr.leader == broker_id)

    remaining = still_led()
    if remaining:
        hook.wait_until(lambda: not still_led(), max(0.0, deadline - hook.clock.monotonic()), "the demotion")
        remaining = still_led()
    return [str(tp) for tp in remaining], originals


def restore_order(
    hook: DemoteHook,
    originals: Mapping[TopicPartition, tuple[int, ...]],
    timeout_s: float,
    operation_id: str | None,
) -> None:
    """Put back the replica orders a demotion changed (where the replica set is still the same),
    then elect the preferred leaders again."""
    if not originals:
        return
    current = hook.assignments({tp.topic for tp in originals})
    plan = {
        tp: order
        for tp, order in originals.items()
        if tp in current and set(current[tp].replicas) == set(order) and current[tp].replicas != order
    }
    if plan:
        _reorder(hook, plan, timeout_s, operation_id)
        hook.elect_leaders("preferred", sorted(plan), operation_id)
