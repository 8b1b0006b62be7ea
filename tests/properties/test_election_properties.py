"""Targeted properties: the election algorithms and wrappers against reference implementations
written here from docs/controller-behaviour.md §2.2, §2.3, and the laws of
``ReplicaAssignment.reassign_to`` (docs/controller-behaviour.md §5.1).

The references are deliberately naive (list comprehensions straight from the spec's sentences)
so that they are easy to check by eye; the core's versions are the optimised ones.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

from hypothesis import given
from hypothesis import strategies as st

from kafka_controller.core.context import ControllerContext
from kafka_controller.core.election import (
    controlled_shutdown_partition_leader_election,
    leader_for_controlled_shutdown,
    leader_for_offline,
    leader_for_preferred_replica,
    leader_for_reassign,
    offline_partition_leader_election,
    preferred_replica_partition_leader_election,
    reassign_partition_leader_election,
)
from kafka_controller.domain.values import Broker, LeaderAndIsr, ReplicaAssignment, TopicPartition

Ints = Collection[int]
Cluster = tuple[ControllerContext, list[tuple[TopicPartition, LeaderAndIsr]]]
BROKERS = st.integers(0, 7)
replica_lists = st.lists(BROKERS, unique=True, max_size=6)
broker_sets = st.sets(BROKERS)


# ---------------------------------------------------------------------------------- references
def ref_offline(assignment: Sequence[int], isr: Ints, live: Ints, unclean: bool) -> tuple[int | None, bool]:
    clean = [r for r in assignment if r in live and r in isr]
    if clean:
        return clean[0], False
    dirty = [r for r in assignment if r in live] if unclean else []
    return (dirty[0], True) if dirty else (None, False)


def ref_reassign(target: Sequence[int], isr: Ints, live: Ints) -> int | None:
    found = [r for r in target if r in live and r in isr]
    return found[0] if found else None


def ref_preferred(assignment: Sequence[int], isr: Ints, live: Ints) -> int | None:
    return assignment[0] if assignment and assignment[0] in live and assignment[0] in isr else None


def ref_controlled_shutdown(
    assignment: Sequence[int], isr: Ints, live: Ints, shutting_down: Ints
) -> int | None:
    found = [r for r in assignment if r in live and r in isr and r not in shutting_down]
    return found[0] if found else None


# ---------------------------------------------------------------------------------- pure algorithms
@given(replica_lists, replica_lists, broker_sets, st.booleans())
def test_offline_partition_leader_election_matches_reference(
    assignment: list[int], isr: list[int], live: set[int], unclean: bool
) -> None:
    assert offline_partition_leader_election(assignment, isr, live, unclean) == ref_offline(
        assignment, isr, live, unclean
    )


@given(replica_lists, replica_lists, broker_sets)
def test_reassign_partition_leader_election_matches_reference(
    target: list[int], isr: list[int], live: set[int]
) -> None:
    assert reassign_partition_leader_election(target, isr, live) == ref_reassign(target, isr, live)


@given(replica_lists, replica_lists, broker_sets)
def test_preferred_replica_partition_leader_election_matches_reference(
    assignment: list[int], isr: list[int], live: set[int]
) -> None:
    leader = preferred_replica_partition_leader_election(assignment, isr, live)
    assert leader == ref_preferred(assignment, isr, live)


@given(replica_lists, replica_lists, broker_sets, broker_sets)
def test_controlled_shutdown_partition_leader_election_matches_reference(
    assignment: list[int], isr: list[int], live: set[int], down: set[int]
) -> None:
    leader = controlled_shutdown_partition_leader_election(assignment, isr, live, down)
    assert leader == ref_controlled_shutdown(assignment, isr, live, down)


# ---------------------------------------------------------------------------------- wrappers
@st.composite
def clusters(draw: st.DrawFn) -> Cluster:
    """A context with a random live set, shutting-down set and offline log dirs, and a batch of
    partitions (each with an assignment, possibly mid-reassignment, and a current LeaderAndIsr)."""
    ctx = ControllerContext()
    registered = draw(broker_sets)
    ctx.set_live_brokers({Broker(b): 1 for b in registered})
    ctx.shutting_down_broker_ids = draw(st.sets(st.sampled_from(sorted(registered)))) if registered else set()
    batch = []
    for p in range(draw(st.integers(1, 6))):
        tp = TopicPartition("t", p)
        replicas = draw(st.lists(BROKERS, unique=True, min_size=1, max_size=5))
        split = draw(st.integers(0, len(replicas)))
        assignment = ReplicaAssignment(tuple(replicas))
        if draw(st.booleans()):  # mid-reassignment: the full RS differs from the targets
            assignment = ReplicaAssignment(tuple(replicas[:split])).reassign_to(replicas[split:] or replicas)
        ctx.update_partition_full_replica_assignment(tp, assignment)
        isr = draw(st.lists(st.sampled_from(assignment.replicas), unique=True))
        leader = draw(st.sampled_from([-1, *assignment.replicas]))
        batch.append((tp, LeaderAndIsr(leader, draw(st.integers(0, 5)), tuple(isr), draw(st.integers(0, 5)))))
    for b in draw(st.sets(st.sampled_from(sorted(registered)))) if registered else ():
        ctx.replicas_on_offline_dirs[b] = {tp for tp, _ in batch if draw(st.booleans())}
    return ctx, batch


def online(
    ctx: ControllerContext, tp: TopicPartition, include_shutting_down: bool = False
) -> Callable[[int], bool]:
    return lambda r: ctx.is_replica_online(r, tp, include_shutting_down)


@given(clusters(), st.lists(st.booleans(), min_size=6, max_size=6), st.booleans())
def test_leader_for_offline_matches_spec_table(
    cluster: Cluster, unclean_flags: list[bool], unknown_config: bool
) -> None:
    ctx, batch = cluster
    entries = [
        (tp, None if unknown_config and i == 0 else lai, unclean_flags[i])
        for i, (tp, lai) in enumerate(batch)
    ]
    results = leader_for_offline(ctx, entries)
    assert [r.topic_partition for r in results] == [tp for tp, _, _ in entries]
    expected_unclean = 0
    for result, (tp, lai, unclean) in zip(results, entries, strict=True):
        assignment = ctx.partition_replica_assignment(tp)
        live = [r for r in assignment if online(ctx, tp)(r)]
        assert result.live_replicas == tuple(live)  # recipients: the online replicas only
        if lai is None:
            assert result.leader_and_isr is None
            continue
        leader, dirty = ref_offline(assignment, lai.isr, live, unclean)
        assert result.unclean == dirty
        expected_unclean += dirty
        if leader is None:
            assert result.leader_and_isr is None
            continue
        new_isr = tuple(r for r in lai.isr if online(ctx, tp)(r)) if leader in lai.isr else (leader,)
        assert result.leader_and_isr == LeaderAndIsr(leader, lai.leader_epoch + 1, new_isr, lai.zk_version)
    assert ctx.stats.unclean_leader_elections == expected_unclean  # marked once per unclean leader


@given(clusters())
def test_leader_for_reassign_matches_spec_table(cluster: Cluster) -> None:
    ctx, batch = cluster
    for result, (tp, lai) in zip(leader_for_reassign(ctx, batch), batch, strict=True):
        target = ctx.partition_full_replica_assignment(tp).target_replicas
        leader = ref_reassign(target, lai.isr, [r for r in target if online(ctx, tp)(r)])
        assert result.live_replicas == tuple(target)  # all of TRS, dead ones too
        expected = (
            None if leader is None else LeaderAndIsr(leader, lai.leader_epoch + 1, lai.isr, lai.zk_version)
        )
        assert result.leader_and_isr == expected


@given(clusters())
def test_leader_for_preferred_replica_matches_spec_table(cluster: Cluster) -> None:
    ctx, batch = cluster
    for result, (tp, lai) in zip(leader_for_preferred_replica(ctx, batch), batch, strict=True):
        assignment = ctx.partition_replica_assignment(tp)
        leader = ref_preferred(assignment, lai.isr, [r for r in assignment if online(ctx, tp)(r)])
        assert result.live_replicas == tuple(assignment)  # all of RS
        expected = (
            None if leader is None else LeaderAndIsr(leader, lai.leader_epoch + 1, lai.isr, lai.zk_version)
        )
        assert result.leader_and_isr == expected


@given(clusters())
def test_leader_for_controlled_shutdown_matches_spec_table(cluster: Cluster) -> None:
    ctx, batch = cluster
    down = set(ctx.shutting_down_broker_ids)
    for result, (tp, lai) in zip(leader_for_controlled_shutdown(ctx, batch), batch, strict=True):
        assignment = ctx.partition_replica_assignment(tp)
        live = [r for r in assignment if online(ctx, tp, include_shutting_down=True)(r)]
        leader = ref_controlled_shutdown(assignment, lai.isr, live, down)
        assert result.live_replicas == tuple(live)  # the shutting-down broker is a recipient
        if leader is None:
            assert result.leader_and_isr is None
        else:
            new_isr = tuple(r for r in lai.isr if r not in down)  # every shutting-down broker leaves
            assert result.leader_and_isr == LeaderAndIsr(
                leader, lai.leader_epoch + 1, new_isr, lai.zk_version
            )
            assert leader in new_isr


# ---------------------------------------------------------------------------------- reassign_to laws
@st.composite
def assignments(draw: st.DrawFn) -> ReplicaAssignment:
    """Plain assignments and in-progress reassignments (built the way the controller builds them)."""
    origin = draw(st.lists(BROKERS, unique=True, min_size=1, max_size=5))
    if draw(st.booleans()):
        return ReplicaAssignment(tuple(origin))
    return ReplicaAssignment(tuple(origin)).reassign_to(
        draw(st.lists(BROKERS, unique=True, min_size=1, max_size=5))
    )


targets = st.lists(BROKERS, unique=True, min_size=1, max_size=5)


@given(assignments(), targets)
def test_reassign_to_targets_first_then_origin_being_removed(a: ReplicaAssignment, target: list[int]) -> None:
    r = a.reassign_to(target)
    origin = a.origin_replicas
    assert r.target_replicas == tuple(target)
    # re-targeting starts from the origin replicas: the same set, kept ones in target order first
    assert r.origin_replicas == tuple(x for x in target if x in origin) + tuple(
        x for x in origin if x not in target
    )
    assert r.replicas == tuple(target) + tuple(x for x in origin if x not in target)
    assert r.adding_replicas == tuple(x for x in target if x not in origin)
    assert r.removing_replicas == tuple(x for x in origin if x not in target)
    assert r.is_being_reassigned == (set(target) != set(origin))


@given(assignments())
def test_reassign_to_is_idempotent(a: ReplicaAssignment) -> None:
    assert a.reassign_to(a.target_replicas) == a


@given(assignments(), targets, targets)
def test_retargeting_forgets_the_previous_target(
    a: ReplicaAssignment, first: list[int], second: list[int]
) -> None:
    """Only the order of the removed tail may differ (the first target reordered the origin)."""
    twice, once = a.reassign_to(first).reassign_to(second), a.reassign_to(second)
    assert twice.target_replicas == once.target_replicas == tuple(second)
    assert twice.adding_replicas == once.adding_replicas
    assert set(twice.removing_replicas) == set(once.removing_replicas)
    assert twice.replicas[: len(second)] == once.replicas[: len(second)]
    assert sorted(twice.replicas) == sorted(once.replicas)


@given(targets, targets)
def test_reassigning_back_to_the_origin_cancels(origin: list[int], target: list[int]) -> None:
    a = ReplicaAssignment(tuple(origin))
    assert a.reassign_to(target).reassign_to(origin) == a


@given(assignments(), BROKERS)
def test_remove_replica_removes_it_everywhere_and_keeps_order(a: ReplicaAssignment, broker: int) -> None:
    r = a.remove_replica(broker)
    for before, after in (
        (a.replicas, r.replicas),
        (a.adding_replicas, r.adding_replicas),
        (a.removing_replicas, r.removing_replicas),
    ):
        assert after == tuple(x for x in before if x != broker)
