"""The live procedures behind the mutating operators, as plain functions over a ``KafkaClusterHook``.

Each one polls ZooKeeper (batched reads) against deadlines, refuses before acting when a guard
fails, and returns a JSON-ready account of what happened. Waiting goes through ``hook.wait_for``,
whose clock is injected, so the procedures hold no timing of their own.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kafka_controller.admin.describe import ClusterView
from kafka_controller.admin.election import group_election_results
from kafka_controller.admin.reassignment import COMPLETE, IN_PROGRESS, verify_reassignment
from kafka_controller.airflow.hooks.cluster import BrokerLostError, KafkaClusterHook, OperationTimeoutError
from kafka_controller.airflow.maintenance import (
    check_stop,
    leaderless_with_live_isr,
    preferred_partitions_of,
)
from kafka_controller.airflow.runbook_support import (
    OperationFailedError,
    RefusedError,
    Say,
    Timeouts,
    Watch,
    _caught_up,
    _quiet,
)
from kafka_controller.domain.errors import MetadataStoreError
from kafka_controller.domain.values import ReplicaAssignment, TopicPartition
from kafka_controller.ports import MetadataStore

if TYPE_CHECKING:
    from kafka_controller.airflow.lifecycle import BrokerLifecycle

__all__ = [
    "DRILL_METHODS",
    "cancel_reassignment",
    "drill_refusal",
    "execute_reassignment",
    "failover_drill",
    "preferred_election",
    "reassignment_progress",
    "rolling_restart",
    "rolling_restart_refusal",
    "start_broker",
    "stop_broker",
    "unhealthy_before",
    "wait_registered",
]

# -- guards, shared by the live runs and their dry runs ------------------------------------------------


def drill_refusal(view: ClusterView) -> str | None:
    """Why a failover drill must not start now, or None."""
    if view.controller_id is None or view.controller_epoch is None:
        return "there is no active controller to resign"
    stuck = leaderless_with_live_isr(view)
    if stuck:
        return f"{len(stuck)} partition(s) already lack a live leader, e.g. {stuck[0]}; not drilling now"
    return None


def unhealthy_before(view: ClusterView, broker_id: int) -> str | None:
    if any(p.offline or p.under_replicated for p in view.partitions):
        return (
            f"the cluster is not healthy before broker {broker_id}: "
            f"{view.summary['offline']} offline, {view.summary['under_replicated']} under-replicated"
        )
    return None


def rolling_restart_refusal(
    view: ClusterView, order: Sequence[int], planned: Sequence[Mapping[str, Any]]
) -> str | None:
    """The first refusal the live rolling restart would meet: a sick cluster, or a broker whose stop
    takes partitions offline (each planned step's ``offline_after``, in ``order``)."""
    for broker_id, step in zip(order, planned, strict=True):
        sick = unhealthy_before(view, broker_id)
        if sick:
            return sick
        if step["offline_after"]:
            off = step["offline_after"]
            return f"{step['action']} would take {len(off)} partition(s) offline, e.g. {off[0]}"
    return None


# -- controller failover drill -----------------------------------------------------------------------


DRILL_METHODS = ("resign", "kill")


def failover_drill(
    hook: KafkaClusterHook,
    *,
    timeout_s: float = 120.0,
    say: Say = _quiet,
    method: str = "resign",
    lifecycle: BrokerLifecycle | None = None,
    on_lost: Callable[[int, int, int, str], None] = lambda _b, _e, _t, _d: None,
    recovery_of: Callable[[int, int], Mapping[str, Any] | None] | None = None,
) -> dict[str, Any]:
    """Lose the controller, wait for a new epoch, and for every partition with a live ISR replica to
    have a live leader; every time is measured from the loss.

    ``resign``: a fenced delete of ``/controller`` (the controller steps down, its broker stays).
    ``kill``: SIGKILL of the controller's broker through ``lifecycle`` (what a crash looks like: the
    cluster notices only when its ZooKeeper session expires), then the broker is started again and
    the drill waits until it is back in every ISR. ``on_lost(broker, epoch, wall ms, detail)`` is
    told when the controller was lost, so that the audit can measure the outage from then.

    The times and the offline count come from one source, so that the task log and the audit report
    agree: the new controller's own failover record (``recovery_of(epoch, since wall ms)``, the
    audit's failover row), which it writes once every partition it can lead is led. Without one
    (a controller that is not this project's, no audit) they are this drill's own polling of
    ZooKeeper, said as such: a poll sees less (``at most N seen offline``) and later.
    """
    if method not in DRILL_METHODS:
        raise RefusedError(f"unknown drill method {method!r} (expected one of {', '.join(DRILL_METHODS)})")
    if method == "kill" and lifecycle is None:
        raise RefusedError("a kill drill needs the cluster's broker lifecycle backend")
    watch = Watch(hook)
    before = watch.view()
    refusal = drill_refusal(before)
    if refusal:
        raise RefusedError(refusal)
    old_id, old_epoch = int(before.controller_id or 0), int(before.controller_epoch or 0)
    say(
        f"controller {old_id} (epoch {old_epoch}) leads a cluster of {len(before.brokers)} brokers and "
        f"{len(before.partitions)} partitions; "
        + ("making it resign" if method == "resign" else f"killing broker {old_id} (SIGKILL)")
    )
    lost_at_ms = hook.clock.time_ms()
    t0 = hook.clock.monotonic()
    if method == "resign":
        old_id, old_epoch = hook.resign_controller()
    elif lifecycle is not None:  # a kill drill (refused above without a backend)
        lifecycle.kill(old_id, timeout_s)
    on_lost(old_id, old_epoch, lost_at_ms, f"{method} by a failover drill")

    def elected() -> tuple[int, int] | None:
        cid, epoch, _ = hook.controller()
        return (cid, epoch) if cid is not None and epoch is not None and epoch > old_epoch else None

    new_id, new_epoch = hook.wait_for(
        elected, timeout_s, f"a controller epoch above {old_epoch}", interval_s=0.02
    )
    t_elected = hook.clock.monotonic()
    say(f"controller {new_id} elected (epoch {new_epoch}); waiting for every partition to be led")
    after = watch.until(
        lambda v: not leaderless_with_live_isr(v), timeout_s, "every partition to have a live leader"
    )
    t_recovered = hook.clock.monotonic()
    polled = {
        "election_ms": round((t_elected - t0) * 1000, 1),
        "recovery_ms": round((t_recovered - t0) * 1000, 1),
        "max_offline_seen": watch.max_offline,
    }
    measured = _measured_failover(hook, recovery_of, new_epoch, lost_at_ms, polled)
    say(
        f"every partition with a live in-sync replica is led again {measured['recovery_ms']:.0f} ms after "
        f"the controller was lost; {measured['offline_at_failover']} partition(s) were offline at the "
        f"failover ({_SOURCES[measured['measured_by']]})"
    )
    result: dict[str, Any] = {
        "method": method,
        "resigned": {"broker_id": old_id, "epoch": old_epoch},
        "elected": {"broker_id": new_id, "epoch": new_epoch},
        "lost_at_ms": lost_at_ms,
        **measured,
        "polled": polled,
        "partitions": len(after.partitions),
        "offline_after": sum(p.offline for p in after.partitions),
    }
    if method == "kill" and lifecycle is not None:
        timeouts = Timeouts(start_s=timeout_s, catch_up_s=timeout_s)
        result["restart"] = start_broker(hook, lifecycle, old_id, timeouts, say)
        watch.until(
            functools.partial(_caught_up, old_id), timeouts.catch_up_s, f"broker {old_id} to rejoin every ISR"
        )
        say(f"broker {old_id}: back in every ISR; the cluster is whole again")
    return result


# -- brokers --------------------------------------------------------------------------------------------


#: Where a drill's numbers came from, as the task log says it.
_SOURCES = {
    "failover_record": "the new controller's failover record in the audit",
    "polling": "this drill's polling of ZooKeeper: the controller recorded no failover",
}
#: How long the drill waits for the new controller's failover record once it sees every partition led
#: (the audit writer is asynchronous).
FAILOVER_RECORD_WAIT_S = 15.0


def _measured_failover(
    hook: KafkaClusterHook,
    recovery_of: Callable[[int, int], Mapping[str, Any] | None] | None,
    epoch: int,
    lost_at_ms: int,
    polled: Mapping[str, Any],
) -> dict[str, Any]:
    """The failover's election and recovery times and offline count, from its audit row if one
    comes, else from the drill's polling (see ``failover_drill``)."""

    def probe() -> Mapping[str, Any] | None:
        assert recovery_of is not None
        try:
            return recovery_of(epoch, lost_at_ms - 1000)
        except Exception:  # an unreachable audit store: the drill's own numbers will do
            return None

    row: Mapping[str, Any] | None = None
    if recovery_of is not None:
        with contextlib.suppress(OperationTimeoutError):
            row = hook.wait_for(
                probe,
                FAILOVER_RECORD_WAIT_S,
                f"the failover record of epoch {epoch}",
            )
    if row is None:
        return {
            "election_ms": polled["election_ms"],
            "recovery_ms": polled["recovery_ms"],
            "offline_at_failover": polled["max_offline_seen"],
            "measured_by": "polling",
        }
    lost = row.get("lost_ms") or lost_at_ms
    return {
        "election_ms": round(float(row["started_ms"]) - float(lost), 1),
        "recovery_ms": round(float(row["time_to_recover_ms"]), 1),
        "offline_at_failover": int(row.get("offline_partitions") or 0),
        "measured_by": "failover_record",
    }


def wait_registered(hook: KafkaClusterHook, broker_id: int, registered: bool, timeout_s: float) -> None:
    what = f"broker {broker_id} to {'register' if registered else 'deregister'}"
    hook.wait_for(
        lambda: (broker_id in hook.get_store().get_sorted_broker_list()) == registered, timeout_s, what
    )


def stop_broker(
    hook: KafkaClusterHook,
    lifecycle: BrokerLifecycle,
    broker_id: int,
    timeouts: Timeouts,
    operation_id: str | None,
    say: Say = _quiet,
) -> dict[str, Any]:
    """Move leadership away (the controller's controlled shutdown), then stop the process."""
    t0 = hook.clock.monotonic()
    remaining = hook.controlled_shutdown(broker_id, timeouts.shutdown_s, operation_id)
    t_demoted = hook.clock.monotonic()
    say(
        f"broker {broker_id}: controlled shutdown done in {(t_demoted - t0) * 1000:.0f} ms"
        + (f", still leading {len(remaining)} partition(s)" if remaining else ", it leads nothing")
    )
    lifecycle.stop(broker_id, timeouts.shutdown_s)
    wait_registered(hook, broker_id, False, timeouts.shutdown_s)
    say(f"broker {broker_id}: stopped ({lifecycle.name}) and deregistered")
    return {
        "still_led_at_stop": remaining,
        "demote_ms": round((t_demoted - t0) * 1000, 1),
        "stop_ms": round((hook.clock.monotonic() - t0) * 1000, 1),
    }


def start_broker(
    hook: KafkaClusterHook, lifecycle: BrokerLifecycle, broker_id: int, timeouts: Timeouts, say: Say = _quiet
) -> dict[str, Any]:
    t0 = hook.clock.monotonic()
    lifecycle.start(broker_id, timeouts.start_s)
    wait_registered(hook, broker_id, True, timeouts.start_s)
    start_ms = round((hook.clock.monotonic() - t0) * 1000, 1)
    say(f"broker {broker_id}: started and registered in {start_ms:.0f} ms")
    return {"start_ms": start_ms}


def rolling_restart(
    hook: KafkaClusterHook,
    lifecycle: BrokerLifecycle,
    order: Sequence[int],
    *,
    timeouts: Timeouts,
    operation_id: str | None,
    done: Collection[int] = (),
    on_broker_done: Callable[[int], None] = lambda _b: None,
    say: Say = _quiet,
) -> dict[str, Any]:
    """One broker at a time, in ``order`` (the active controller last): guard, controlled shutdown,
    stop, start, wait until back in every ISR with nothing under-replicated, preferred election for
    its partitions. Brokers in ``done`` (a retried task) are skipped.

    Every broker registered at the start is guarded (``hook.guard_brokers``), the one being
    restarted excepted while it is down: one that goes stops the run at once with
    ``BrokerLostError`` naming it and where the restart stopped, instead of a catch-up timeout
    that would blame the broker being waited for."""
    watch = Watch(hook)
    steps: list[dict[str, Any]] = []
    say(
        f"rolling restart of {len(order)} broker(s) in this order: {list(order)} (the active controller last)"
    )
    members = {b.id for b in watch.view().brokers}
    at = "the start"
    try:
        for n, broker_id in enumerate(order, 1):
            at = f"broker {broker_id} ({n}/{len(order)})"
            if broker_id in done:
                steps.append({"broker_id": broker_id, "skipped": "restarted by an earlier attempt"})
                say(f"broker {broker_id} ({n}/{len(order)}): skipped, restarted by an earlier attempt")
                continue
            hook.guard_brokers(members - {broker_id}, f"the rolling restart of broker {broker_id}")
            hook.check_brokers()
            steps.append(
                _restart_one(hook, lifecycle, (broker_id, n, len(order)), watch, timeouts, operation_id, say)
            )
            hook.guard_brokers(members, f"the rolling restart, after broker {broker_id}")
            on_broker_done(broker_id)
    except BrokerLostError as e:
        left = [b for b in order if b not in done and b not in {s["broker_id"] for s in steps}]
        raise BrokerLostError(
            e.broker_ids,
            f"the rolling restart, at {at}; stopped there (left to restart: {left or 'none'})",
        ) from None
    finally:
        hook.guard_brokers((), "")
    final = watch.view()
    say(
        f"rolling restart done: {sum('skipped' not in s for s in steps)} broker(s) restarted, at most "
        f"{watch.max_offline} partition(s) seen offline, {final.summary['not_preferred_leader']} not on "
        "their preferred leader"
    )
    return {
        "order": list(order),
        "steps": steps,
        "max_offline_seen": watch.max_offline,
        "offline_seen": sorted(watch.offline_seen),
        "not_preferred_leader_after": final.summary["not_preferred_leader"],
    }


def _restart_one(
    hook: KafkaClusterHook,
    lifecycle: BrokerLifecycle,
    position: tuple[int, int, int],
    watch: Watch,
    timeouts: Timeouts,
    operation_id: str | None,
    say: Say,
) -> dict[str, Any]:
    """One step of ``rolling_restart`` (``position``: broker id, its rank, how many): guard,
    controlled shutdown, stop, start, catch up, elect."""
    broker_id, n, total = position
    view = watch.view()
    check = check_stop(view, broker_id)
    if not check.safe:
        raise RefusedError(check.reason)
    sick = unhealthy_before(view, broker_id)
    if sick:
        raise RefusedError(sick)
    step: dict[str, Any] = {"broker_id": broker_id, "was_controller": view.controller_id == broker_id}
    led = sum(p.leader == broker_id for p in view.partitions)
    say(
        f"broker {broker_id} ({n}/{total}): leads {led} partition(s)"
        + (", the active controller" if step["was_controller"] else "")
        + "; restarting"
    )
    step.update(stop_broker(hook, lifecycle, broker_id, timeouts, operation_id, say))
    step.update(start_broker(hook, lifecycle, broker_id, timeouts, say))
    t0 = hook.clock.monotonic()
    view = watch.until(
        functools.partial(_caught_up, broker_id),
        timeouts.catch_up_s,
        f"broker {broker_id} to rejoin every ISR with nothing under-replicated",
    )
    step["catch_up_ms"] = round((hook.clock.monotonic() - t0) * 1000, 1)
    say(f"broker {broker_id}: back in every ISR after {step['catch_up_ms']:.0f} ms")
    step["preferred_election"] = preferred_election(
        hook, preferred_partitions_of(view, broker_id), operation_id, say
    )
    return step


def preferred_election(
    hook: KafkaClusterHook,
    partitions: Collection[TopicPartition] | None,
    operation_id: str | None,
    say: Say = _quiet,
) -> dict[str, Any]:
    """Preferred election; ``partitions`` None = all. Grouped as Kafka's tool prints them."""
    if partitions is not None and not partitions:
        say("preferred election: no partition to elect")
        return {"elected": {}, "not_needed": [], "failed": {}}
    outcome = group_election_results(hook.elect_leaders("preferred", partitions, operation_id))
    scope = "all partitions" if partitions is None else f"{len(partitions)} partition(s)"
    say(
        f"preferred election ({scope}): "
        f"{len(outcome.succeeded)} elected, {len(outcome.not_needed)} already on their preferred leader, "
        f"{len(outcome.failed)} failed"
        + (
            f" (e.g. {next(iter(outcome.failed))}: {next(iter(outcome.failed.values()))[0]})"
            if outcome.failed
            else ""
        )
    )
    return {
        "elected": {str(tp): leader for tp, leader in outcome.succeeded.items()},
        "not_needed": [str(tp) for tp in outcome.not_needed],
        "failed": {str(tp): f"{code}: {msg}" if msg else code for tp, (code, msg) in outcome.failed.items()},
    }


# -- reassignment ------------------------------------------------------------------------------------------


def reassignment_progress(
    store: MetadataStore, plan: Mapping[TopicPartition, Sequence[int]]
) -> dict[str, list[TopicPartition]]:
    """``{"complete": [...], "in_progress": [...], "pending": [...]}`` from the topic znodes and the
    legacy request znode (two batched reads): what a retried task has left to do."""
    assignments: dict[TopicPartition, ReplicaAssignment] = {}
    for t in store.get_replica_assignment_and_topic_ids(sorted({tp.topic for tp in plan})).values():
        if isinstance(t, MetadataStoreError):
            raise t
        assignments.update(t.assignment)
    out: dict[str, list[TopicPartition]] = {"complete": [], "in_progress": [], "pending": []}
    for v in verify_reassignment(plan, assignments, store.get_partition_reassignment()):
        key = "complete" if v.status == COMPLETE else "in_progress" if v.status == IN_PROGRESS else "pending"
        out[key].append(v.topic_partition)
    return out


def execute_reassignment(
    hook: KafkaClusterHook,
    plan: Mapping[TopicPartition, Sequence[int]],
    batches: Sequence[Sequence[TopicPartition]],
    *,
    operation_id: str | None,
    batch_timeout_s: float,
    say: Say = _quiet,
) -> list[dict[str, Any]]:
    """Batch after batch: submit what is neither complete nor in flight, wait until the whole batch
    is complete. Safe to call again after a crash: finished work is skipped, work in flight awaited.

    Every broker the plan touches (current or target replica) that is registered at the start is
    guarded: if one goes, the run stops at once naming it (the reassignments in flight stay with the
    controller, which completes them if the broker comes back), instead of waiting out the batch
    timeout for a replica that cannot catch up."""
    involved = {b for rs in plan.values() for b in rs}
    involved |= {b for ra in hook.assignments({tp.topic for tp in plan}).values() for b in ra.replicas}
    registered = set(hook.get_store().get_sorted_broker_list())
    hook.guard_brokers(involved & registered, "the reassignment")
    reports: list[dict[str, Any]] = []
    try:
        for i, batch in enumerate(batches):
            reports.append(
                _execute_batch(hook, plan, batch, (i + 1, len(batches)), operation_id, batch_timeout_s, say)
            )
    except BrokerLostError as e:
        in_flight = reassignment_progress(hook.get_store(), plan)["in_progress"]
        raise BrokerLostError(
            e.broker_ids,
            f"the reassignment, at batch {len(reports) + 1} of {len(batches)}; stopped there "
            f"({len(in_flight)} partition(s) left in flight with the controller, "
            f"{len(batches) - len(reports) - 1} batch(es) not started)",
        ) from None
    finally:
        hook.guard_brokers((), "")
    return reports


def _execute_batch(
    hook: KafkaClusterHook,
    plan: Mapping[TopicPartition, Sequence[int]],
    batch: Sequence[TopicPartition],
    position: tuple[int, int],
    operation_id: str | None,
    batch_timeout_s: float,
    say: Say,
) -> dict[str, Any]:
    """One batch of ``execute_reassignment`` (``position``: its number, how many)."""
    i, total = position
    sub = {tp: tuple(plan[tp]) for tp in batch}
    progress = reassignment_progress(hook.get_store(), sub)
    submitted: dict[str, str] = {}
    if progress["pending"]:
        results = hook.alter_reassignments({tp: sub[tp] for tp in progress["pending"]}, operation_id)
        failed = {str(tp): f"{e}: {m}" if m else e for tp, (e, m) in results.items() if e != "NONE"}
        if failed:
            raise OperationFailedError(
                f"batch {i}: the controller refused {len(failed)} partition(s): {failed}"
            )
        submitted = {str(tp): "submitted" for tp in progress["pending"]}
    t0 = hook.clock.monotonic()

    def complete() -> bool:
        return len(reassignment_progress(hook.get_store(), sub)["complete"]) == len(sub)

    hook.wait_for(
        complete,
        batch_timeout_s,
        f"batch {i} of {total} ({len(sub)} partitions) to complete",
    )
    say(
        f"batch {i}/{total}: {len(sub)} partition(s) complete after "
        f"{(hook.clock.monotonic() - t0) * 1000:.0f} ms ({len(submitted)} submitted, "
        f"{len(progress['complete'])} already done, {len(progress['in_progress'])} resumed in flight)"
    )
    return {
        "batch": i,
        "partitions": len(sub),
        "already_complete": len(progress["complete"]),
        "resumed_in_flight": len(progress["in_progress"]),
        "submitted": len(submitted),
        "wait_ms": round((hook.clock.monotonic() - t0) * 1000, 1),
    }


def cancel_reassignment(
    hook: KafkaClusterHook, plan: Mapping[TopicPartition, Sequence[int]], operation_id: str | None
) -> list[str]:
    """Cancel whatever of ``plan`` is still in flight (KIP-455: target None)."""
    in_flight = reassignment_progress(hook.get_store(), plan)["in_progress"]
    if in_flight:
        hook.alter_reassignments(dict.fromkeys(in_flight), operation_id)
    return [str(tp) for tp in in_flight]
